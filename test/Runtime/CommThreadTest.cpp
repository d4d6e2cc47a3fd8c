//===- CommThreadTest.cpp - The thread communicator's collectives ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Every collective of the thread communicator on 1, 2, 3, 4 and 8 ranks
// against a serial fp64 reference, bitwise agreement across ranks and runs,
// byte counters against the ring formulas, concurrent mesh sub-groups,
// point-to-point, and the failure paths (a throwing rank, abort, a missing
// rank, a mismatch) that must end in an Error instead of a hang.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/ThreadCommunicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

using namespace dsc::rt;

namespace {

/// Plenty for correct runs on a loaded 2-core machine.
ThreadWorldOptions relaxed() {
  ThreadWorldOptions o;
  o.timeout = std::chrono::seconds(60);
  return o;
}

/// A deterministic value of varied sign and magnitude, so the summation
/// order shows in the low bits.
double valueAt(int rank, size_t i) {
  uint32_t h = uint32_t(rank + 1) * 2654435761u ^ uint32_t(i) * 40503u;
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return (double(h % 20001) - 10000.0) / 997.0 * double(1 + i % 7);
}

std::vector<float> inputF32(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = float(valueAt(rank, i));
  return v;
}

bool sameBits(const void *a, const void *b, size_t bytes) {
  return std::memcmp(a, b, bytes) == 0;
}

/// Sum over ranks of what each rank's counter says for `kind`.
uint64_t totalSent(const std::vector<CommStats> &stats, CollectiveKind kind) {
  uint64_t t = 0;
  for (const CommStats &s : stats)
    t += s.sent(kind);
  return t;
}

class CommThreads : public ::testing::TestWithParam<int> {};

} // namespace

TEST_P(CommThreads, AllReduceSumMatchesFp64AndIsBitwiseIdentical) {
  int n = GetParam();
  // 840 = 2^3·3·5·7 splits evenly over every n tested; 1001 does not.
  for (size_t count : {size_t(840), size_t(1001), size_t(3)}) {
    std::vector<std::vector<float>> out(static_cast<size_t>(n)),
        again(static_cast<size_t>(n));
    std::vector<CommStats> stats(static_cast<size_t>(n));
    for (auto *dst : {&out, &again})
      runRanks(
          n,
          [&](Communicator &c) {
            std::vector<float> v = inputF32(c.rank(), count);
            c.allReduce(v.data(), count, DType::F32, ReduceOp::Sum);
            (*dst)[size_t(c.rank())] = v;
            stats[size_t(c.rank())] = c.stats();
          },
          relaxed());
    for (size_t i = 0; i < count; ++i) {
      double ref = 0, mag = 0;
      for (int r = 0; r < n; ++r) {
        ref += double(float(valueAt(r, i)));
        mag += std::fabs(double(float(valueAt(r, i))));
      }
      ASSERT_NEAR(out[0][i], ref, 1e-6 * mag + 1e-6) << "element " << i;
    }
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(sameBits(out[0].data(), out[size_t(r)].data(), count * 4))
          << "rank " << r << " differs from rank 0, count " << count;
      EXPECT_TRUE(
          sameBits(out[size_t(r)].data(), again[size_t(r)].data(), count * 4))
          << "rank " << r << " differs between runs, count " << count;
      EXPECT_EQ(stats[size_t(r)].sent(CollectiveKind::AllReduce),
                ringBytesSent(CollectiveKind::AllReduce, count * 4, 4, n, r))
          << "rank " << r << ", count " << count;
      EXPECT_EQ(
          stats[size_t(r)].received(CollectiveKind::AllReduce),
          ringBytesReceived(CollectiveKind::AllReduce, count * 4, 4, n, r));
      EXPECT_EQ(stats[size_t(r)].count(CollectiveKind::AllReduce), 1u);
    }
    uint64_t bytes = count * 4;
    // Ring all-reduce: 2(n-1)/n·S per rank when n divides the elements, and
    // 2(n-1)·S over all ranks in any case.
    if (count % size_t(n) == 0) {
      EXPECT_EQ(stats[0].sent(CollectiveKind::AllReduce),
                2 * uint64_t(n - 1) * bytes / uint64_t(n));
    }
    EXPECT_EQ(totalSent(stats, CollectiveKind::AllReduce),
              2 * uint64_t(n - 1) * bytes);
    uint64_t received = 0;
    for (const CommStats &s : stats)
      received += s.received(CollectiveKind::AllReduce);
    EXPECT_EQ(received, 2 * uint64_t(n - 1) * bytes);
  }
}

TEST_P(CommThreads, AllReduceOtherOpsAndTypes) {
  int n = GetParam();
  const size_t count = 37;
  std::vector<std::vector<double>> avg(static_cast<size_t>(n)),
      mx(static_cast<size_t>(n)), mn(static_cast<size_t>(n));
  std::vector<std::vector<int32_t>> isum(static_cast<size_t>(n)),
      iavg(static_cast<size_t>(n));
  runRanks(
      n,
      [&](Communicator &c) {
        size_t r = size_t(c.rank());
        std::vector<double> a(count), b(count), d(count);
        std::vector<int32_t> i(count), j(count);
        for (size_t k = 0; k < count; ++k) {
          a[k] = b[k] = d[k] = valueAt(c.rank(), k);
          i[k] = j[k] = int32_t(k) * 10 + c.rank();
        }
        c.allReduce(a.data(), count, DType::F64, ReduceOp::Avg);
        c.allReduce(b.data(), count, DType::F64, ReduceOp::Max);
        c.allReduce(d.data(), count, DType::F64, ReduceOp::Min);
        c.allReduce(i.data(), count, DType::I32, ReduceOp::Sum);
        c.allReduce(j.data(), count, DType::I32, ReduceOp::Avg);
        avg[r] = a, mx[r] = b, mn[r] = d, isum[r] = i, iavg[r] = j;
      },
      relaxed());
  for (size_t k = 0; k < count; ++k) {
    double sum = 0, hi = -INFINITY, lo = INFINITY;
    int64_t isumRef = 0;
    for (int r = 0; r < n; ++r) {
      sum += valueAt(r, k);
      hi = std::max(hi, valueAt(r, k));
      lo = std::min(lo, valueAt(r, k));
      isumRef += int64_t(k) * 10 + r;
    }
    for (int r = 0; r < n; ++r) {
      EXPECT_NEAR(avg[size_t(r)][k], sum / n, 1e-12 * (1 + std::fabs(sum)));
      EXPECT_EQ(avg[size_t(r)][k], avg[0][k]);
      EXPECT_EQ(mx[size_t(r)][k], hi);
      EXPECT_EQ(mn[size_t(r)][k], lo);
      EXPECT_EQ(isum[size_t(r)][k], isumRef);
      EXPECT_EQ(iavg[size_t(r)][k], int32_t(isumRef / n));
    }
  }
}

TEST_P(CommThreads, ReduceScatterMatchesFp64) {
  int n = GetParam();
  const size_t recvCount = 65;
  std::vector<std::vector<float>> out(static_cast<size_t>(n));
  std::vector<CommStats> stats(static_cast<size_t>(n));
  runRanks(
      n,
      [&](Communicator &c) {
        std::vector<float> in = inputF32(c.rank(), size_t(n) * recvCount);
        std::vector<float> mine(recvCount, -1.0f);
        c.reduceScatter(in.data(), mine.data(), recvCount, DType::F32,
                        ReduceOp::Sum);
        out[size_t(c.rank())] = mine;
        stats[size_t(c.rank())] = c.stats();
      },
      relaxed());
  uint64_t bytes = uint64_t(n) * recvCount * 4;
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < recvCount; ++i) {
      size_t g = size_t(r) * recvCount + i;
      double ref = 0, mag = 0;
      for (int q = 0; q < n; ++q) {
        ref += double(float(valueAt(q, g)));
        mag += std::fabs(double(float(valueAt(q, g))));
      }
      ASSERT_NEAR(out[size_t(r)][i], ref, 1e-6 * mag + 1e-6)
          << "rank " << r << " element " << i;
    }
    // Reduce-scatter: (n-1)/n·S per rank.
    EXPECT_EQ(stats[size_t(r)].sent(CollectiveKind::ReduceScatter),
              uint64_t(n - 1) * bytes / uint64_t(n));
    EXPECT_EQ(stats[size_t(r)].sent(CollectiveKind::ReduceScatter),
              ringBytesSent(CollectiveKind::ReduceScatter, bytes, 4, n, r));
  }
}

TEST_P(CommThreads, ReduceScatterMatchesAllReduceBitwise) {
  // Both run the same ring, so a rank's reduce-scatter block equals its
  // block of the all-reduce bit for bit: ZeRO-2 and plain DP agree exactly.
  int n = GetParam();
  const size_t recvCount = 33;
  std::atomic<int> mismatches{0};
  runRanks(
      n,
      [&](Communicator &c) {
        std::vector<float> in = inputF32(c.rank(), size_t(n) * recvCount);
        std::vector<float> mine(recvCount);
        c.reduceScatter(in.data(), mine.data(), recvCount, DType::F32,
                        ReduceOp::Avg);
        c.allReduce(in.data(), in.size(), DType::F32, ReduceOp::Avg);
        if (!sameBits(mine.data(), in.data() + size_t(c.rank()) * recvCount,
                      recvCount * 4))
          ++mismatches;
      },
      relaxed());
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_P(CommThreads, AllGatherAllToAllBroadcast) {
  int n = GetParam();
  const size_t c0 = 19;
  std::vector<CommStats> stats(static_cast<size_t>(n));
  std::atomic<int> errors{0};
  runRanks(
      n,
      [&](Communicator &c) {
        int r = c.rank();
        std::vector<float> mine = inputF32(r, c0), all(size_t(n) * c0);
        c.allGather(mine.data(), all.data(), c0, DType::F32);
        for (int q = 0; q < n; ++q)
          if (!sameBits(all.data() + size_t(q) * c0, inputF32(q, c0).data(),
                        c0 * 4))
            ++errors;
        // In place: the rank's block already sits in the output.
        std::vector<double> inPlace(size_t(n) * c0, -1);
        for (size_t i = 0; i < c0; ++i)
          inPlace[size_t(r) * c0 + i] = valueAt(r, i);
        c.allGather(inPlace.data() + size_t(r) * c0, inPlace.data(), c0,
                    DType::F64);
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < c0; ++i)
            if (inPlace[size_t(q) * c0 + i] != valueAt(q, i))
              ++errors;
        // All-to-all: block j of rank r holds r*1000 + j*10 + element.
        std::vector<int32_t> send(size_t(n) * c0), recv(size_t(n) * c0);
        for (int j = 0; j < n; ++j)
          for (size_t i = 0; i < c0; ++i)
            send[size_t(j) * c0 + i] = r * 1000 + j * 10 + int32_t(i);
        c.allToAll(send.data(), recv.data(), c0, DType::I32);
        for (int j = 0; j < n; ++j)
          for (size_t i = 0; i < c0; ++i)
            if (recv[size_t(j) * c0 + i] != j * 1000 + r * 10 + int32_t(i))
              ++errors;
        // Broadcast tokens from the last rank.
        std::vector<int32_t> tokens(c0, r == n - 1 ? 7 : -3);
        if (r == n - 1)
          for (size_t i = 0; i < c0; ++i)
            tokens[i] = int32_t(i * i);
        c.broadcast(tokens.data(), c0, DType::I32, n - 1);
        for (size_t i = 0; i < c0; ++i)
          if (tokens[i] != int32_t(i * i))
            ++errors;
        stats[size_t(r)] = c.stats();
      },
      relaxed());
  EXPECT_EQ(errors.load(), 0);
  uint64_t gathered = uint64_t(n) * c0 * 4;
  for (int r = 0; r < n; ++r) {
    const CommStats &s = stats[size_t(r)];
    // All-gather: (n-1)/n·S per rank, S the gathered bytes (two calls, f32
    // then f64).
    EXPECT_EQ(s.sent(CollectiveKind::AllGather),
              uint64_t(n - 1) * gathered / uint64_t(n) * 3);
    EXPECT_EQ(s.sent(CollectiveKind::AllToAll), uint64_t(n - 1) * c0 * 4);
    EXPECT_EQ(s.sent(CollectiveKind::Broadcast),
              ringBytesSent(CollectiveKind::Broadcast, c0 * 4, 4, n, r, n - 1));
    EXPECT_EQ(s.count(CollectiveKind::AllGather), 2u);
  }
  EXPECT_EQ(totalSent(stats, CollectiveKind::Broadcast),
            uint64_t(n - 1) * c0 * 4);
}

TEST_P(CommThreads, SendRecvPairsAndRingShift) {
  int n = GetParam();
  if (n < 2)
    GTEST_SKIP() << "point-to-point needs two ranks";
  std::atomic<int> errors{0};
  std::vector<CommStats> stats(static_cast<size_t>(n));
  runRanks(
      n,
      [&](Communicator &c) {
        int r = c.rank();
        // Pairs (0,1), (2,3), ...: three messages on one tag arrive in
        // order, one on another tag.
        if (n % 2 == 0 || r < n - 1) {
          int peer = r ^ 1;
          if (r % 2 == 0) {
            for (int m = 0; m < 3; ++m) {
              std::vector<double> msg(5, r * 100 + m);
              c.send(msg.data(), 5, DType::F64, peer, 1);
            }
            int32_t token = 42 + r;
            c.send(&token, 1, DType::I32, peer, 2);
          } else {
            for (int m = 0; m < 3; ++m) {
              std::vector<double> msg(5);
              c.recv(msg.data(), 5, DType::F64, peer, 1);
              if (msg[4] != peer * 100 + m)
                ++errors;
            }
            int32_t token = 0;
            c.recv(&token, 1, DType::I32, peer, 2);
            if (token != 42 + peer)
              ++errors;
          }
        }
        // Every rank sends right and receives from the left at once, the
        // pattern that deadlocks with two blocking sends.
        float out = float(r), in = -1;
        c.sendRecv(&out, 1, (r + 1) % n, &in, 1, (r + n - 1) % n, DType::F32,
                   0);
        if (in != float((r + n - 1) % n))
          ++errors;
        stats[size_t(r)] = c.stats();
      },
      relaxed());
  EXPECT_EQ(errors.load(), 0);
  uint64_t sent = 0, received = 0;
  for (const CommStats &s : stats) {
    sent += s.sent(CollectiveKind::Send);
    received += s.received(CollectiveKind::Recv);
  }
  EXPECT_EQ(sent, received);
  EXPECT_EQ(stats[1].received(CollectiveKind::Recv), 3 * 5 * 8 + 4 + 4u);
}

TEST_P(CommThreads, SplitMakesGroups) {
  int n = GetParam();
  std::atomic<int> errors{0};
  runRanks(
      n,
      [&](Communicator &c) {
        int r = c.rank();
        // Reversed order by key; odd ranks join no group.
        std::unique_ptr<Communicator> evens = c.split(r % 2 == 0 ? 5 : -1, -r);
        if (r % 2 == 1) {
          if (evens)
            ++errors;
          return;
        }
        int members = (n + 1) / 2;
        if (!evens || evens->size() != members ||
            evens->rank() != members - 1 - r / 2 || evens->worldRank() != r)
          ++errors;
        int32_t v = r;
        evens->allReduce(&v, 1, DType::I32, ReduceOp::Sum);
        int32_t ref = 0;
        for (int q = 0; q < n; q += 2)
          ref += q;
        if (v != ref)
          ++errors;
        if (c.stats().count(CollectiveKind::AllReduce) != 0)
          ++errors; // counted on the sub-communicator only
      },
      relaxed());
  EXPECT_EQ(errors.load(), 0);
}

TEST(CommThreadsMesh, AxesOfA2x4MeshRunConcurrently) {
  // World rank w = dp * 4 + tp. tp groups are rows of 4, dp groups columns
  // of 2; both reduce at once, interleaved, and must not mix messages.
  const int n = 8;
  std::atomic<int> errors{0};
  std::vector<CommStats> tpStats(n), dpStats(n);
  runRanks(
      n,
      [&](Communicator &world) {
        int w = world.rank(), dp = w / 4, tp = w % 4;
        std::unique_ptr<Communicator> tpComm = world.split(dp, tp);
        std::unique_ptr<Communicator> dpComm = world.split(tp, dp);
        if (tpComm->size() != 4 || dpComm->size() != 2 ||
            tpComm->rank() != tp || dpComm->rank() != dp)
          ++errors;
        for (int step = 0; step < 20; ++step) {
          std::vector<double> a(64, w + step), b(48, 10.0 * w);
          tpComm->allReduce(a.data(), a.size(), DType::F64, ReduceOp::Sum);
          dpComm->allReduce(b.data(), b.size(), DType::F64, ReduceOp::Max);
          double tpRef = 4.0 * step + (4 * dp) * 4 + 6;
          double dpRef = 10.0 * (4 + tp);
          if (a[63] != tpRef || b[0] != dpRef)
            ++errors;
        }
        // A send inside the tp group: group ranks, not world ranks.
        float x = float(w), y = -1;
        tpComm->sendRecv(&x, 1, (tp + 1) % 4, &y, 1, (tp + 3) % 4, DType::F32,
                         3);
        if (y != float(dp * 4 + (tp + 3) % 4))
          ++errors;
        world.barrier();
        tpStats[size_t(w)] = tpComm->stats();
        dpStats[size_t(w)] = dpComm->stats();
      },
      relaxed());
  EXPECT_EQ(errors.load(), 0);
  for (int w = 0; w < n; ++w) {
    EXPECT_EQ(tpStats[size_t(w)].sent(CollectiveKind::AllReduce),
              20u * 2 * 3 * 64 * 8 / 4);
    EXPECT_EQ(dpStats[size_t(w)].sent(CollectiveKind::AllReduce),
              20u * 2 * 1 * 48 * 8 / 2);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, CommThreads, ::testing::Values(1, 2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return "np" + std::to_string(info.param);
                         });

//===----------------------------------------------------------------------===//
// Failures end in errors, not hangs
//===----------------------------------------------------------------------===//

namespace {

/// Runs `body` on n ranks, keeping each rank's error message; returns
/// runRanks' own message and the time it took.
struct FailedRun {
  std::string message;
  std::vector<std::string> perRank;
  double seconds;
};

FailedRun runExpectingFailure(int n,
                              const std::function<void(Communicator &)> &body,
                              ThreadWorldOptions options) {
  FailedRun run;
  run.perRank.resize(static_cast<size_t>(n));
  std::mutex mu;
  auto start = std::chrono::steady_clock::now();
  try {
    runRanks(
        n,
        [&](Communicator &c) {
          try {
            body(c);
          } catch (const std::exception &e) {
            std::lock_guard<std::mutex> lock(mu);
            run.perRank[size_t(c.rank())] = e.what();
            throw;
          }
        },
        options);
  } catch (const Error &e) {
    run.message = e.what();
  }
  run.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return run;
}

} // namespace

TEST(CommThreadsFailure, ThrowingRankStopsTheOthersFast) {
  ThreadWorldOptions options;
  options.timeout = std::chrono::seconds(60); // must not be what ends it
  FailedRun run = runExpectingFailure(
      4,
      [](Communicator &c) {
        std::vector<float> v(1000, 1.0f);
        c.allReduce(v.data(), v.size(), DType::F32, ReduceOp::Sum);
        if (c.rank() == 3)
          throw std::runtime_error("out of memory in layer 7");
        for (int i = 0; i < 100; ++i)
          c.allReduce(v.data(), v.size(), DType::F32, ReduceOp::Sum);
      },
      options);
  EXPECT_EQ(run.message, "rank 3 failed: out of memory in layer 7");
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(
        run.perRank[size_t(r)].find("rank 3 failed: out of memory in layer 7"),
        std::string::npos)
        << "rank " << r << ": " << run.perRank[size_t(r)];
  EXPECT_LT(run.seconds, 10.0);
}

TEST(CommThreadsFailure, AbortNamesTheRankAndReason) {
  ThreadWorldOptions options;
  options.timeout = std::chrono::seconds(60);
  FailedRun run = runExpectingFailure(
      3,
      [](Communicator &c) {
        if (c.rank() == 1) {
          // Let the others block in the collective first.
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          c.abort("loss is NaN");
        }
        std::vector<int32_t> t(4, 1);
        c.broadcast(t.data(), t.size(), DType::I32, 1);
      },
      options);
  EXPECT_EQ(run.message, "rank 1 failed: loss is NaN");
  EXPECT_NE(run.perRank[0].find("rank 1 failed: loss is NaN"),
            std::string::npos)
      << run.perRank[0];
  EXPECT_NE(run.perRank[0].find("broadcast"), std::string::npos)
      << run.perRank[0];
  EXPECT_LT(run.seconds, 10.0);
}

TEST(CommThreadsFailure, MissingRankTimesOutNamingIt) {
  // Rank 3 is busy elsewhere (it waits for the others to give up), so the
  // all-reduce can only end by the timeout.
  ThreadWorldOptions options;
  options.timeout = std::chrono::milliseconds(500);
  ThreadWorld world(4, options);
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> c = world.communicator(r);
      if (r == 3) {
        while (!world.failed())
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return;
      }
      try {
        std::vector<float> v(16, 1.0f);
        c->allReduce(v.data(), v.size(), DType::F32, ReduceOp::Sum);
      } catch (const Error &e) {
        errors[size_t(r)] = e.what();
      }
    });
  auto start = std::chrono::steady_clock::now();
  for (std::thread &t : threads)
    t.join();
  double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_TRUE(world.failed());
  std::string message = world.failureMessage();
  EXPECT_NE(message.find("all_reduce(16 elements, sum) on threads group "
                         "[0 1 2 3]"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("timed out after 0.5 s: world rank(s) 3 did not "
                         "arrive"),
            std::string::npos)
      << message;
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(errors[size_t(r)].find("3 did not arrive"), std::string::npos)
        << "rank " << r << ": " << errors[size_t(r)];
  EXPECT_LT(took, 10.0);
}

TEST(CommThreadsFailure, RecvWithoutSendTimesOut) {
  ThreadWorldOptions options;
  options.timeout = std::chrono::milliseconds(300);
  FailedRun run = runExpectingFailure(
      2,
      [](Communicator &c) {
        float x = 0;
        if (c.rank() == 0)
          c.recv(&x, 1, DType::F32, 1, 7);
        else {
          // Never matched (rank 0 is in recv); starts late so that rank 0's
          // deadline comes first.
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          c.barrier();
        }
      },
      options);
  EXPECT_NE(run.message.find("no send from world rank 1 with tag 7 arrived"),
            std::string::npos)
      << run.message;
}

TEST(CommThreadsFailure, ExitedRankFailsWaitersAtOnce) {
  ThreadWorldOptions options;
  options.timeout = std::chrono::seconds(60);
  FailedRun run = runExpectingFailure(
      2,
      [](Communicator &c) {
        if (c.rank() == 1)
          return; // forgets the barrier
        c.barrier();
      },
      options);
  EXPECT_NE(run.message.find("world rank 1 exited (its thread returned) "
                             "before taking part"),
            std::string::npos)
      << run.message;
  EXPECT_LT(run.seconds, 10.0);

  // Without runRanks: dropping the world communicator is leaving.
  ThreadWorld world(2, options);
  std::string seen;
  std::thread leaver([&] { world.communicator(1).reset(); });
  std::thread stayer([&] {
    auto c = world.communicator(0);
    try {
      c->barrier();
    } catch (const Error &e) {
      seen = e.what();
    }
  });
  leaver.join();
  stayer.join();
  EXPECT_NE(seen.find("world rank 1 exited"), std::string::npos) << seen;
}

TEST(CommThreadsFailure, MismatchedCollectivesAreNamed) {
  ThreadWorldOptions options;
  options.timeout = std::chrono::seconds(60);
  FailedRun run = runExpectingFailure(
      2,
      [](Communicator &c) {
        std::vector<float> v(16, 1.0f);
        c.allReduce(v.data(), c.rank() == 0 ? 8 : 16, DType::F32,
                    ReduceOp::Sum);
      },
      options);
  EXPECT_NE(run.message.find("collective mismatch"), std::string::npos)
      << run.message;
  EXPECT_NE(run.message.find("all_reduce(8 x f32, sum)"), std::string::npos)
      << run.message;
  EXPECT_NE(run.message.find("all_reduce(16 x f32, sum)"), std::string::npos)
      << run.message;
}

TEST(CommThreadsFailure, SizeMismatchInSendRecv) {
  ThreadWorldOptions options;
  options.timeout = std::chrono::seconds(60);
  FailedRun run = runExpectingFailure(
      2,
      [](Communicator &c) {
        double buf[4] = {1, 2, 3, 4};
        if (c.rank() == 0)
          c.send(buf, 4, DType::F64, 1, 0);
        else
          c.recv(buf, 2, DType::F64, 0, 0);
      },
      options);
  EXPECT_NE(run.message.find("message size mismatch: world rank 0 sent 32 "
                             "bytes but world rank 1 expects 16"),
            std::string::npos)
      << run.message;
}

TEST(CommThreadsFailure, BadArgumentsAreRefused) {
  runRanks(
      2,
      [](Communicator &c) {
        uint16_t h[2] = {0, 0};
        EXPECT_THROW(c.broadcast(h, 1, DType::F16, 2), Error);
        EXPECT_THROW(c.send(h, 1, DType::F16, c.rank(), 0), Error);
        EXPECT_THROW(c.recv(h, 1, DType::F16, -1, 0), Error);
        try {
          c.send(h, 1, DType::F16, 5, 0);
          ADD_FAILURE() << "send to rank 5 of 2 was accepted";
        } catch (const Error &e) {
          EXPECT_NE(std::string(e.what()).find(
                        "peer 5 is not a rank of this group of 2"),
                    std::string::npos)
              << e.what();
        }
        // Refused calls leave the group usable.
        c.allGather(h + c.rank(), h, 1, DType::BF16);
      },
      relaxed());
  EXPECT_THROW(ThreadWorld(0), Error);
  ThreadWorld world(1);
  auto first = world.communicator(0);
  EXPECT_THROW(world.communicator(0), Error);
}

TEST(CommThreads, Bf16AndF16SumInF32AndRoundEachRingStep) {
  // Three ranks each holding 1 + 2^-7 (exact in bf16). The ring sums in
  // f32 and rounds each partial to bf16: 2.015625 is exact, 3.0234375 is a
  // tie between 3.015625 and 3.03125 (spacing 2^-6 in [2, 4)) and goes to
  // the even 3.03125; f32 all the way would keep 3.0234375.
  runRanks(3, [](Communicator &c) {
    EXPECT_TRUE(c.canReduce(DType::BF16));
    uint16_t b[2] = {floatToBf16(1.0078125f), floatToBf16(float(c.rank()))};
    c.allReduce(b, 2, DType::BF16, ReduceOp::Sum);
    EXPECT_EQ(bf16ToFloat(b[0]), 3.03125f);
    EXPECT_EQ(bf16ToFloat(b[1]), 3.0f);
    uint16_t h[1] = {floatToF16(0.5f + float(c.rank()))};
    c.allReduce(h, 1, DType::F16, ReduceOp::Avg);
    EXPECT_EQ(f16ToFloat(h[0]), 1.5f);
  });
}

TEST(CommThreadsOptions, TimeoutFromEnvironment) {
  ::setenv("DSC_COMM_TIMEOUT", "2.5", 1);
  EXPECT_EQ(ThreadWorldOptions::fromEnvironment().timeout.count(), 2500);
  ::setenv("DSC_COMM_TIMEOUT", "soon", 1);
  try {
    ThreadWorldOptions::fromEnvironment();
    ADD_FAILURE() << "DSC_COMM_TIMEOUT=soon was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("DSC_COMM_TIMEOUT='soon'"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("DSC_COMM_TIMEOUT");
  EXPECT_EQ(ThreadWorldOptions::fromEnvironment().timeout,
            std::chrono::milliseconds(std::chrono::seconds(300)));
}

TEST(CommRingModel, StatsReadOut) {
  std::vector<CommStats> stats(2);
  runRanks(
      2,
      [&](Communicator &c) {
        float v[4] = {1, 2, 3, 4};
        c.allReduce(v, 4, DType::F32, ReduceOp::Sum);
        c.barrier();
        stats[size_t(c.rank())] = c.stats();
        c.resetStats();
        if (c.stats().totalSent() != 0)
          ADD_FAILURE() << "resetStats left counts";
      },
      relaxed());
  EXPECT_EQ(formatCommStats(stats[0]),
            "all_reduce 1 call 16 B sent 16 B received, barrier 1 call 0 B "
            "sent 0 B received");
  CommStats sum = stats[0];
  sum += stats[1];
  EXPECT_EQ(sum.totalSent(), 32u);
  EXPECT_EQ(formatCommStats(CommStats()), "no communication");
}

TEST(CommRingModel, Formulas) {
  // 2(n-1)/n·S, (n-1)/n·S; uneven splits: each rank skips its own chunk
  // (reduce-scatter) and its successor's (all-gather).
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllReduce, 4000, 4, 4, 0), 6000u);
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllReduce, 4000, 4, 1, 0), 0u);
  // 10 elements over 3 ranks: chunks of 4, 3, 3 elements.
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllReduce, 40, 4, 3, 0),
            80u - 16 - 12);
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllReduce, 40, 4, 3, 2),
            80u - 12 - 16);
  EXPECT_EQ(ringBytesSent(CollectiveKind::ReduceScatter, 4096, 4, 8, 3), 3584u);
  EXPECT_EQ(ringBytesSent(CollectiveKind::AllGather, 4096, 4, 8, 3), 3584u);
  EXPECT_EQ(ringBytesSent(CollectiveKind::Broadcast, 100, 4, 4, 0, 1), 0u);
  EXPECT_EQ(ringBytesSent(CollectiveKind::Broadcast, 100, 4, 4, 1, 1), 100u);
}
