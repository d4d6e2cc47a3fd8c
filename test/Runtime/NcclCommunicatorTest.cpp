//===- NcclCommunicatorTest.cpp - The NCCL communicator on in-process GPUs ===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// min(devices, 4) thread ranks, one GPU and stream each, bootstrapped over
// the thread communicator: every collective against a host reference, the
// byte counters against the ring model, split groups, barrier and the
// watchdog. On one GPU the same cases run as a group of one. Without a
// device the program exits 77 (CudaTestMain.h), which ctest reports as skipped.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/NcclCommunicator.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/ThreadCommunicator.h"

#include <cuda_runtime_api.h>
#include "CudaTestMain.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace dsc::rt;

namespace {

int deviceCount() { return dsc::rt::test::cudaDevicesVisible(); }

/// The ranks of every test: one per GPU, at most 4.
int gpuRanks() { return std::min(deviceCount(), 4); }

void cudaOk(cudaError_t code, const char *what) {
  if (code != cudaSuccess)
    throw Error(std::string(what) + " failed: " + cudaGetErrorString(code));
}

/// A device buffer filled from and read back to host vectors on the rank's
/// stream (a non-blocking stream is not ordered after cudaMemcpy).
template <typename T> class DeviceVector {
public:
  DeviceVector(size_t n, cudaStream_t stream) : n(n), stream(stream) {
    void *raw = nullptr;
    cudaOk(cudaMalloc(&raw, std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc");
    ptr = static_cast<T *>(raw);
  }
  DeviceVector(const std::vector<T> &host, cudaStream_t stream)
      : DeviceVector(host.size(), stream) {
    upload(host);
  }
  ~DeviceVector() { cudaFree(ptr); }
  DeviceVector(const DeviceVector &) = delete;
  DeviceVector &operator=(const DeviceVector &) = delete;

  void upload(const std::vector<T> &host) {
    cudaOk(cudaMemcpyAsync(ptr, host.data(), n * sizeof(T),
                           cudaMemcpyHostToDevice, stream),
           "cudaMemcpyAsync");
    cudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  std::vector<T> download() const {
    std::vector<T> host(n);
    cudaOk(cudaMemcpyAsync(host.data(), ptr, n * sizeof(T),
                           cudaMemcpyDeviceToHost, stream),
           "cudaMemcpyAsync");
    cudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    return host;
  }
  T *data() { return ptr; }

private:
  T *ptr = nullptr;
  size_t n;
  cudaStream_t stream;
};

using RankBody =
    std::function<void(Communicator &nccl, Communicator &boot, cudaStream_t)>;

/// Runs `body` on n thread ranks, rank r on device r with its own stream
/// and an NCCL communicator bootstrapped over the threads.
void runOnGpus(int n, const RankBody &body) {
  ThreadWorldOptions options;
  options.timeout = std::chrono::seconds(120);
  runRanks(
      n,
      [&](Communicator &boot) {
        int device = boot.rank();
        cudaOk(cudaSetDevice(device), "cudaSetDevice");
        cudaStream_t stream = nullptr;
        cudaOk(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
               "cudaStreamCreate");
        {
          std::unique_ptr<Communicator> nccl =
              createNcclCommunicator(boot, device, stream);
          body(*nccl, boot, stream);
        } // the destructor waits for the stream (or the body aborted)
        cudaStreamDestroy(stream);
      },
      options);
}

/// Deterministic values of varied sign and magnitude.
float valueAt(int rank, size_t i) {
  uint32_t h = uint32_t(rank + 1) * 2654435761u ^ uint32_t(i) * 40503u;
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return float((double(h % 20001) - 10000.0) / 997.0);
}

std::vector<float> inputF32(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = valueAt(rank, i);
  return v;
}

/// bf16 as its bits: round to nearest even (inputs here are finite).
uint16_t toBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}
float fromBf16(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

class NcclComm : public ::testing::Test {
protected:
  void SetUp() override { n = gpuRanks(); }
  int n = 0;
};

} // namespace

TEST_F(NcclComm, GroupIsTheBootstrapsAndReducesEveryDtype) {
  runOnGpus(n, [&](Communicator &c, Communicator &boot, cudaStream_t) {
    EXPECT_STREQ(c.backendName(), "nccl");
    EXPECT_EQ(c.rank(), boot.rank());
    EXPECT_EQ(c.size(), n);
    EXPECT_EQ(c.worldRank(), boot.worldRank());
    EXPECT_EQ(c.worldRanks(), boot.worldRanks());
    for (DType t :
         {DType::F32, DType::F64, DType::I32, DType::BF16, DType::F16})
      EXPECT_TRUE(c.canReduce(t)) << dtypeName(t);
  });
  EXPECT_TRUE(haveNcclCommunicator());
}

TEST_F(NcclComm, AllReduceF32MatchesHostAndCountsTheRing) {
  const size_t count = 1001;
  runOnGpus(n, [&](Communicator &c, Communicator &, cudaStream_t s) {
    for (ReduceOp op :
         {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
      DeviceVector<float> buf(inputF32(c.rank(), count), s);
      c.allReduce(buf.data(), count, DType::F32, op);
      synchronizeNccl(c);
      std::vector<float> got = buf.download();
      for (size_t i = 0; i < count; ++i) {
        double sum = 0, mag = 0, hi = -1e30, lo = 1e30;
        for (int r = 0; r < n; ++r) {
          double x = valueAt(r, i);
          sum += x;
          mag += std::fabs(x);
          hi = std::max(hi, x);
          lo = std::min(lo, x);
        }
        if (op == ReduceOp::Sum)
          ASSERT_NEAR(got[i], sum, 1e-5 * mag + 1e-6) << "element " << i;
        else if (op == ReduceOp::Avg)
          ASSERT_NEAR(got[i], sum / n, 1e-5 * mag / n + 1e-6) << i;
        else
          ASSERT_EQ(double(got[i]), op == ReduceOp::Max ? hi : lo) << i;
      }
    }
    CommStats st = c.stats();
    EXPECT_EQ(st.count(CollectiveKind::AllReduce), 4u);
    EXPECT_EQ(st.sent(CollectiveKind::AllReduce),
              4 * ringBytesSent(CollectiveKind::AllReduce, count * 4, 4, n,
                                c.rank()));
    EXPECT_EQ(st.received(CollectiveKind::AllReduce),
              4 * ringBytesReceived(CollectiveKind::AllReduce, count * 4, 4, n,
                                    c.rank()));
  });
}

TEST_F(NcclComm, AllReduceBf16MatchesHost) {
  // Small integers: every sum over <= 4 ranks is exact in bf16.
  const size_t count = 515;
  auto value = [](int rank, size_t i) {
    return float(int((size_t(rank) * 7 + i) % 9) - 4);
  };
  runOnGpus(n, [&](Communicator &c, Communicator &, cudaStream_t s) {
    for (ReduceOp op :
         {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
      std::vector<uint16_t> host(count);
      for (size_t i = 0; i < count; ++i)
        host[i] = toBf16(value(c.rank(), i));
      DeviceVector<uint16_t> buf(host, s);
      c.allReduce(buf.data(), count, DType::BF16, op);
      synchronizeNccl(c);
      std::vector<uint16_t> got = buf.download();
      for (size_t i = 0; i < count; ++i) {
        float sum = 0, hi = -1e30f, lo = 1e30f;
        for (int r = 0; r < n; ++r) {
          sum += value(r, i);
          hi = std::max(hi, value(r, i));
          lo = std::min(lo, value(r, i));
        }
        float x = fromBf16(got[i]);
        if (op == ReduceOp::Sum)
          ASSERT_EQ(x, sum) << "element " << i;
        else if (op == ReduceOp::Avg) // bf16 keeps 8 significant bits
          ASSERT_NEAR(x, sum / float(n), 0.02f * std::fabs(sum) + 1e-3f) << i;
        else
          ASSERT_EQ(x, op == ReduceOp::Max ? hi : lo) << i;
      }
    }
  });
}

TEST_F(NcclComm, ReduceScatterSumsEachRanksBlock) {
  const size_t recvCount = 257;
  runOnGpus(n, [&](Communicator &c, Communicator &, cudaStream_t s) {
    DeviceVector<float> send(inputF32(c.rank(), size_t(n) * recvCount), s);
    DeviceVector<float> recv(recvCount, s);
    c.reduceScatter(send.data(), recv.data(), recvCount, DType::F32,
                    ReduceOp::Sum);
    synchronizeNccl(c);
    std::vector<float> got = recv.download();
    for (size_t j = 0; j < recvCount; ++j) {
      size_t i = size_t(c.rank()) * recvCount + j;
      double sum = 0, mag = 0;
      for (int r = 0; r < n; ++r) {
        sum += valueAt(r, i);
        mag += std::fabs(valueAt(r, i));
      }
      ASSERT_NEAR(got[j], sum, 1e-5 * mag + 1e-6) << "element " << j;
    }
    EXPECT_EQ(c.stats().sent(CollectiveKind::ReduceScatter),
              ringBytesSent(CollectiveKind::ReduceScatter,
                            size_t(n) * recvCount * 4, 4, n, c.rank()));
  });
}

TEST_F(NcclComm, AllGatherOutOfPlaceAndInPlace) {
  const size_t sendCount = 129;
  runOnGpus(n, [&](Communicator &c, Communicator &, cudaStream_t s) {
    std::vector<float> expected;
    for (int r = 0; r < n; ++r) {
      std::vector<float> part = inputF32(r, sendCount);
      expected.insert(expected.end(), part.begin(), part.end());
    }
    DeviceVector<float> send(inputF32(c.rank(), sendCount), s);
    DeviceVector<float> recv(size_t(n) * sendCount, s);
    c.allGather(send.data(), recv.data(), sendCount, DType::F32);
    synchronizeNccl(c);
    EXPECT_EQ(recv.download(), expected);

    // In place: `send` is the rank's own block of `recv`.
    std::vector<float> mine(size_t(n) * sendCount, 0.0f);
    std::vector<float> own = inputF32(c.rank(), sendCount);
    std::copy(own.begin(), own.end(),
              mine.begin() + std::ptrdiff_t(size_t(c.rank()) * sendCount));
    DeviceVector<float> inPlace(mine, s);
    c.allGather(inPlace.data() + size_t(c.rank()) * sendCount, inPlace.data(),
                sendCount, DType::F32);
    synchronizeNccl(c);
    EXPECT_EQ(inPlace.download(), expected);
    EXPECT_EQ(c.stats().sent(CollectiveKind::AllGather),
              2 * ringBytesSent(CollectiveKind::AllGather,
                                size_t(n) * sendCount * 4, 4, n, c.rank()));
  });
}

TEST_F(NcclComm, BroadcastFromTheLastRank) {
  const size_t count = 333;
  int root = n - 1; // nonzero whenever there are two GPUs
  runOnGpus(n, [&](Communicator &c, Communicator &, cudaStream_t s) {
    std::vector<float> host =
        c.rank() == root ? inputF32(root, count) : std::vector<float>(count, 0);
    DeviceVector<float> buf(host, s);
    c.broadcast(buf.data(), count, DType::F32, root);
    synchronizeNccl(c);
    EXPECT_EQ(buf.download(), inputF32(root, count));
    CommStats st = c.stats();
    EXPECT_EQ(st.sent(CollectiveKind::Broadcast),
              ringBytesSent(CollectiveKind::Broadcast, count * 4, 4, n,
                            c.rank(), root));
    EXPECT_EQ(st.received(CollectiveKind::Broadcast),
              ringBytesReceived(CollectiveKind::Broadcast, count * 4, 4, n,
                                c.rank(), root));
  });
}

TEST_F(NcclComm, AllToAllTransposesBlocks) {
  const size_t per = 65;
  runOnGpus(n, [&](Communicator &c, Communicator &, cudaStream_t s) {
    int me = c.rank();
    std::vector<int32_t> send(size_t(n) * per), expected(size_t(n) * per);
    for (int j = 0; j < n; ++j)
      for (size_t i = 0; i < per; ++i) {
        send[size_t(j) * per + i] = int32_t(me * 1000000 + j * 1000 + int(i));
        expected[size_t(j) * per + i] =
            int32_t(j * 1000000 + me * 1000 + int(i));
      }
    DeviceVector<int32_t> from(send, s);
    DeviceVector<int32_t> to(size_t(n) * per, s);
    c.allToAll(from.data(), to.data(), per, DType::I32);
    synchronizeNccl(c);
    EXPECT_EQ(to.download(), expected);
    EXPECT_EQ(
        c.stats().sent(CollectiveKind::AllToAll),
        ringBytesSent(CollectiveKind::AllToAll, size_t(n) * per * 4, 4, n, me));
  });
}

TEST_F(NcclComm, SendRecvRingAndOneWay) {
  if (n < 2)
    GTEST_SKIP() << "point-to-point needs two GPUs (a rank cannot send to "
                    "itself)";
  const size_t count = 100;
  runOnGpus(n, [&](Communicator &c, Communicator &, cudaStream_t s) {
    int me = c.rank(), dst = (me + 1) % n, src = (me + n - 1) % n;
    std::vector<int32_t> out(count), expected(count);
    for (size_t i = 0; i < count; ++i) {
      out[i] = int32_t(me * 1000 + int(i));
      expected[i] = int32_t(src * 1000 + int(i));
    }
    DeviceVector<int32_t> sendBuf(out, s), recvBuf(count, s);
    c.sendRecv(sendBuf.data(), count, dst, recvBuf.data(), count, src,
               DType::I32, /*tag=*/3);
    synchronizeNccl(c);
    EXPECT_EQ(recvBuf.download(), expected);

    // One way, rank 0 to rank 1.
    DeviceVector<int32_t> single(count, s);
    if (me == 0)
      c.send(sendBuf.data(), count, DType::I32, 1, 0);
    else if (me == 1)
      c.recv(single.data(), count, DType::I32, 0, 0);
    synchronizeNccl(c);
    if (me == 1) {
      std::vector<int32_t> fromZero(count);
      for (size_t i = 0; i < count; ++i)
        fromZero[i] = int32_t(i);
      EXPECT_EQ(single.download(), fromZero);
    }
    CommStats st = c.stats();
    EXPECT_EQ(st.sent(CollectiveKind::Send), (me == 0 ? 2 : 1) * count * 4);
    EXPECT_EQ(st.received(CollectiveKind::Recv), (me == 1 ? 2 : 1) * count * 4);
  });
}

TEST_F(NcclComm, SplitIntoEvenAndOddGroups) {
  runOnGpus(n, [&](Communicator &c, Communicator &, cudaStream_t s) {
    int me = c.worldRank();
    std::unique_ptr<Communicator> half = c.split(me % 2, me);
    ASSERT_TRUE(half);
    std::vector<int> members;
    for (int w = me % 2; w < n; w += 2)
      members.push_back(w);
    EXPECT_EQ(half->worldRanks(), members);
    EXPECT_EQ(half->rank(), me / 2);
    EXPECT_EQ(half->worldRank(), me);
    EXPECT_STREQ(half->backendName(), "nccl");

    DeviceVector<int32_t> buf(std::vector<int32_t>{me + 1, 10 * (me + 1)}, s);
    half->allReduce(buf.data(), 2, DType::I32, ReduceOp::Sum);
    synchronizeNccl(*half);
    int32_t sum = 0;
    for (int w : members)
      sum += w + 1;
    EXPECT_EQ(buf.download(), (std::vector<int32_t>{sum, 10 * sum}));
    EXPECT_EQ(half->stats().count(CollectiveKind::AllReduce), 1u);
    EXPECT_EQ(c.stats().count(CollectiveKind::AllReduce), 0u);

    // A negative color joins none; keys reverse the order.
    std::unique_ptr<Communicator> rest = c.split(me == 0 ? -1 : 0, -me);
    if (me == 0) {
      EXPECT_FALSE(rest);
    } else {
      ASSERT_TRUE(rest);
      std::vector<int> reversed;
      for (int w = n - 1; w >= 1; --w)
        reversed.push_back(w);
      EXPECT_EQ(rest->worldRanks(), reversed);
      EXPECT_EQ(rest->rank(), n - 1 - me);
    }
  });
}

TEST_F(NcclComm, BarrierWaitsForTheStream) {
  runOnGpus(n, [&](Communicator &c, Communicator &, cudaStream_t) {
    c.barrier();
    c.barrier();
    EXPECT_EQ(c.stats().count(CollectiveKind::Barrier), 2u);
  });
}

TEST_F(NcclComm, SynchronizeRefusesAHostCommunicator) {
  runRanks(1, [](Communicator &c) {
    try {
      synchronizeNccl(c);
      ADD_FAILURE() << "synchronizeNccl accepted a threads communicator";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("threads communicator"),
                std::string::npos)
          << e.what();
    }
  });
}

TEST_F(NcclComm, WatchdogTimesOutAndAborts) {
  if (n < 2)
    GTEST_SKIP() << "a missing peer needs two GPUs";
  runOnGpus(n, [&](Communicator &c, Communicator &boot, cudaStream_t s) {
    DeviceVector<float> buf(std::vector<float>(8, 1.0f), s);
    if (c.rank() == 0) {
      // The others never join: the all-reduce cannot finish.
      c.allReduce(buf.data(), 8, DType::F32, ReduceOp::Sum);
      try {
        synchronizeNccl(c, 1.0);
        ADD_FAILURE() << "an all-reduce without its peers finished";
      } catch (const Error &e) {
        std::string text = e.what();
        EXPECT_NE(text.find("timed out after 1 s"), std::string::npos) << text;
        EXPECT_NE(text.find("on nccl group [0 1"), std::string::npos) << text;
      }
      try {
        c.allReduce(buf.data(), 8, DType::F32, ReduceOp::Sum);
        ADD_FAILURE() << "an aborted communicator took a call";
      } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("was aborted"), std::string::npos)
            << e.what();
      }
    }
    boot.barrier();
  });
}

int main(int argc, char **argv) {
  return dsc::rt::test::runCudaTests(argc, argv, "NCCL communicator tests");
}
