//===- CommMpiTest.cpp - The MPI communicator under mpirun ----------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Run by ctest as `mpirun ... -np 4|8 DscRuntimeCommMpiTest`: every
// collective against the same references as the thread test, results
// identical on all ranks, ring-model byte counters, a 2 x (n/2) mesh of
// split groups, point-to-point, and an MPI error turned into an Error. Each
// rank checks its own results; the ranks agree on the verdict by an
// all-reduce and rank 0 prints it. Exits 77 (ctest skip) outside mpirun.
// With --abort-rank R, rank R calls abort() to show how the job ends.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/MpiCommunicator.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace dsc::rt;

namespace {

int failures = 0;

void expect(bool ok, const std::string &what, int rank) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what.c_str());
  }
}

double valueAt(int rank, size_t i) {
  uint32_t h = uint32_t(rank + 1) * 2654435761u ^ uint32_t(i) * 40503u;
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return (double(h % 20001) - 10000.0) / 997.0 * double(1 + i % 7);
}

void checkCollectives(Communicator &c) {
  int n = c.size(), r = c.rank();
  c.resetStats();

  // All-reduce (sum) against an fp64 reference; the same bits everywhere.
  const size_t count = 1001;
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = float(valueAt(r, i));
  c.allReduce(v.data(), count, DType::F32, ReduceOp::Sum);
  for (size_t i = 0; i < count; ++i) {
    double ref = 0, mag = 0;
    for (int q = 0; q < n; ++q) {
      ref += double(float(valueAt(q, i)));
      mag += std::fabs(double(float(valueAt(q, i))));
    }
    if (std::fabs(v[i] - ref) > 1e-6 * mag + 1e-6) {
      expect(false, "all_reduce element " + std::to_string(i), r);
      break;
    }
  }
  std::vector<float> everyone(size_t(n) * count);
  c.allGather(v.data(), everyone.data(), count, DType::F32);
  for (int q = 0; q < n; ++q)
    expect(std::memcmp(everyone.data() + size_t(q) * count, v.data(),
                       count * 4) == 0,
           "all_reduce result of rank " + std::to_string(q) +
               " differs from this rank's",
           r);

  // Avg, max, min, i32.
  std::vector<double> a(7), b(7);
  std::vector<int32_t> ints(7);
  for (size_t i = 0; i < 7; ++i) {
    a[i] = b[i] = valueAt(r, i);
    ints[i] = int32_t(i) * 10 + r;
  }
  c.allReduce(a.data(), 7, DType::F64, ReduceOp::Avg);
  c.allReduce(b.data(), 7, DType::F64, ReduceOp::Max);
  c.allReduce(ints.data(), 7, DType::I32, ReduceOp::Sum);
  for (size_t i = 0; i < 7; ++i) {
    double sum = 0, hi = -INFINITY;
    int32_t isum = 0;
    for (int q = 0; q < n; ++q) {
      sum += valueAt(q, i);
      hi = std::max(hi, valueAt(q, i));
      isum += int32_t(i) * 10 + q;
    }
    expect(std::fabs(a[i] - sum / n) <= 1e-12 * (1 + std::fabs(sum)), "avg", r);
    expect(b[i] == hi, "max", r);
    expect(ints[i] == isum, "i32 sum", r);
  }

  // Reduce-scatter, all-to-all, broadcast.
  const size_t block = 65;
  std::vector<float> in(size_t(n) * block), mine(block);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(valueAt(r, i));
  c.reduceScatter(in.data(), mine.data(), block, DType::F32, ReduceOp::Sum);
  for (size_t i = 0; i < block; ++i) {
    size_t g = size_t(r) * block + i;
    double ref = 0, mag = 0;
    for (int q = 0; q < n; ++q) {
      ref += double(float(valueAt(q, g)));
      mag += std::fabs(double(float(valueAt(q, g))));
    }
    if (std::fabs(mine[i] - ref) > 1e-6 * mag + 1e-6) {
      expect(false, "reduce_scatter element " + std::to_string(i), r);
      break;
    }
  }
  std::vector<int32_t> send(size_t(n) * 3), recv(size_t(n) * 3);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < 3; ++i)
      send[size_t(j) * 3 + size_t(i)] = r * 1000 + j * 10 + i;
  c.allToAll(send.data(), recv.data(), 3, DType::I32);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < 3; ++i)
      expect(recv[size_t(j) * 3 + size_t(i)] == j * 1000 + r * 10 + i,
             "all_to_all", r);
  std::vector<int32_t> tokens(11, -1);
  if (r == n - 1)
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = int32_t(i * i);
  c.broadcast(tokens.data(), tokens.size(), DType::I32, n - 1);
  for (size_t i = 0; i < tokens.size(); ++i)
    expect(tokens[i] == int32_t(i * i), "broadcast", r);

  // Ring-model counters.
  CommStats s = c.stats();
  uint64_t arBytes =
      ringBytesSent(CollectiveKind::AllReduce, count * 4, 4, n, r) +
      ringBytesSent(CollectiveKind::AllReduce, 7 * 8, 8, n, r) * 2 +
      ringBytesSent(CollectiveKind::AllReduce, 7 * 4, 4, n, r);
  expect(s.sent(CollectiveKind::AllReduce) == arBytes, "all_reduce bytes", r);
  expect(s.sent(CollectiveKind::ReduceScatter) == uint64_t(n - 1) * block * 4,
         "reduce_scatter bytes: (n-1)/n of the input", r);
  expect(s.sent(CollectiveKind::AllGather) == uint64_t(n - 1) * count * 4,
         "all_gather bytes: (n-1)/n of the output", r);
  expect(s.count(CollectiveKind::AllReduce) == 4, "all_reduce calls", r);

  // Point-to-point: a ring shift, and a send/recv pair.
  float out = float(r), got = -1;
  c.sendRecv(&out, 1, (r + 1) % n, &got, 1, (r + n - 1) % n, DType::F32, 5);
  expect(got == float((r + n - 1) % n), "send_recv ring shift", r);
  if (r < 2) {
    double msg[3] = {1.5, 2.5, double(r)};
    if (r == 0)
      c.send(msg, 3, DType::F64, 1, 9);
    else {
      c.recv(msg, 3, DType::F64, 0, 9);
      expect(msg[2] == 0.0, "recv payload", r);
    }
  }
  c.barrier();
}

void checkMesh(Communicator &world) {
  // World rank w = dp * (n/2) + tp: tp rows, dp columns of 2.
  int n = world.size(), w = world.rank(), tpSize = n / 2;
  int dp = w / tpSize, tp = w % tpSize;
  std::unique_ptr<Communicator> tpComm = world.split(dp, tp);
  std::unique_ptr<Communicator> dpComm = world.split(tp, dp);
  expect(tpComm && tpComm->size() == tpSize && tpComm->rank() == tp, "tp split",
         w);
  expect(dpComm && dpComm->size() == 2 && dpComm->rank() == dp, "dp split", w);
  expect(tpComm->worldRanks().front() == dp * tpSize, "tp group world ranks",
         w);
  std::vector<double> x(16, double(w));
  tpComm->allReduce(x.data(), x.size(), DType::F64, ReduceOp::Sum);
  double ref = 0;
  for (int t = 0; t < tpSize; ++t)
    ref += dp * tpSize + t;
  expect(x[15] == ref, "tp all_reduce", w);
  int32_t y = w;
  dpComm->allReduce(&y, 1, DType::I32, ReduceOp::Max);
  expect(y == tpSize + tp, "dp all_reduce", w);
  expect(!world.split(-1, 0), "split with a negative color returns null", w);
}

void checkErrors(Communicator &c) {
  // A message longer than the receive buffer is MPI_ERR_TRUNCATE; with
  // MPI_ERRORS_RETURN it becomes an Error naming MPI_Recv.
  int r = c.rank();
  if (r < 2) {
    double big[4] = {1, 2, 3, 4};
    if (r == 0) {
      c.send(big, 4, DType::F64, 1, 11);
    } else {
      bool threw = false;
      try {
        c.recv(big, 2, DType::F64, 0, 11);
      } catch (const Error &e) {
        threw =
            std::string(e.what()).find("MPI_Recv failed") != std::string::npos;
        std::printf("rank 1: the truncated recv threw: %s\n", e.what());
      }
      expect(threw, "truncated recv throws Error naming MPI_Recv", r);
    }
  }
  bool refused = false;
  try {
    float f = 0;
    c.broadcast(&f, 1, DType::F32, c.size());
  } catch (const Error &) {
    refused = true;
  }
  expect(refused, "broadcast from a rank outside the group is refused", r);
}

} // namespace

int main(int argc, char **argv) {
  if (!launchedByMpi()) {
    std::printf("not started by mpirun: skipped\n");
    return 77;
  }
  if (!haveMpiCommunicator()) {
    std::printf("built without MPI: skipped\n");
    return 77;
  }
  int verdict = 1;
  try {
    std::unique_ptr<Communicator> world =
        createMpiWorldCommunicator(&argc, &argv);
    expect(std::string(world->backendName()) == "mpi", "backend name",
           world->rank());
    if (world->size() < 2 || world->size() % 2) {
      std::fprintf(stderr, "run me on an even number (>= 2) of ranks\n");
      return 1;
    }
    // --abort-rank R: rank R aborts while the others wait in an all-reduce;
    // mpirun must end the whole job (ctest checks the message).
    // --exit-rank R: rank R dies (exit code 3, no MPI_Finalize) instead.
    if (argc == 3 && (std::string(argv[1]) == "--abort-rank" ||
                      std::string(argv[1]) == "--exit-rank")) {
      std::vector<float> x(4, 1.0f);
      if (world->rank() == std::stoi(argv[2])) {
        if (std::string(argv[1]) == "--exit-rank")
          std::_Exit(3);
        world->abort("injected failure");
      }
      world->allReduce(x.data(), x.size(), DType::F32, ReduceOp::Sum);
      world->allReduce(x.data(), x.size(), DType::F32, ReduceOp::Sum);
      std::fprintf(stderr,
                   "rank %d: the all-reduce completed without the "
                   "aborted rank\n",
                   world->rank());
      return 0;
    }
    checkCollectives(*world);
    checkMesh(*world);
    checkErrors(*world);
    int32_t bad = failures;
    world->allReduce(&bad, 1, DType::I32, ReduceOp::Sum);
    if (world->rank() == 0)
      std::printf("%s: %d failed checks on %d MPI ranks\n",
                  bad ? "FAIL" : "PASS", bad, world->size());
    verdict = bad ? 1 : 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return verdict;
}
