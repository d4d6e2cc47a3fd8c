//===- CommTcpTest.cpp - The TCP store and communicator -------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Ranks as threads that meet over loopback through a TcpStore, each with its
// own store connection and sockets, exactly as processes would. The oracle
// for every collective is the thread communicator run on the same inputs:
// the results, every rank's, must agree bit for bit (same ring, same
// reduction order), and so must the byte counters. Then the failure paths:
// a rendezvous that times out names the missing ranks, a peer that leaves
// or aborts is named, mismatched calls are named, none of them hang.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/TcpCommunicator.h"
#include "dsc/Runtime/TcpStore.h"
#include "dsc/Runtime/ThreadCommunicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

using namespace dsc::rt;

namespace {

using Body = std::function<void(Communicator &)>;

/// Values of varied sign and magnitude, so the summation order shows in the
/// low bits.
std::vector<float> inputF32(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) {
    uint32_t h = uint32_t(rank + 1) * 2654435761u ^ uint32_t(i) * 40503u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    v[i] = float((double(h % 20001) - 10000.0) / 997.0 * double(1 + i % 7) *
                 (i % 3 ? 1e-3 : 1e3));
  }
  return v;
}

RendezvousOptions optionsFor(int port, int rank, int size, double seconds) {
  RendezvousOptions o;
  o.port = port;
  o.rank = rank;
  o.size = size;
  o.hostServer = false;
  o.timeout = std::chrono::milliseconds(int64_t(seconds * 1000));
  return o;
}

/// Runs `body` on `n` TCP ranks (threads, each with its own store client and
/// sockets) against one store server; each rank's error message, "" if none.
/// A rank whose body throws aborts first, as dsc-run's ranks do.
std::vector<std::string> runTcp(int n, const Body &body, double seconds = 60) {
  TcpStoreServer server(0);
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        auto store =
            TcpStore::rendezvous(optionsFor(server.port(), r, n, seconds));
        auto comm = createTcpWorldCommunicator(
            store, std::chrono::milliseconds(int64_t(seconds * 1000)));
        try {
          body(*comm);
        } catch (const std::exception &e) {
          // As dsc-run does: tell the peers why before leaving.
          comm->abort(e.what());
          throw;
        }
      } catch (const std::exception &e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (std::thread &t : threads)
    t.join();
  return errors;
}

/// What each rank ends with: every collective's output bytes in call order,
/// then its byte counters.
struct Outcome {
  std::vector<std::vector<char>> bytes;
  std::vector<std::string> stats;
};

/// Every collective on f32, f64, i32 and bf16, uneven counts, groups from
/// split, point-to-point in a ring; records each output.
void everyCollective(Communicator &comm, Outcome &out) {
  const int n = comm.size(), me = comm.rank();
  auto record = [&](const void *p, size_t bytes) {
    const char *c = static_cast<const char *>(p);
    out.bytes[size_t(me)].insert(out.bytes[size_t(me)].end(), c, c + bytes);
  };
  for (size_t count : {size_t(1), size_t(5), size_t(1037)}) {
    for (ReduceOp op :
         {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
      std::vector<float> f = inputF32(me, count);
      comm.allReduce(f.data(), count, DType::F32, op);
      record(f.data(), f.size() * 4);
    }
    std::vector<double> d(count);
    std::vector<int32_t> i(count);
    std::vector<uint16_t> h(count);
    std::vector<float> f = inputF32(me, count);
    for (size_t k = 0; k < count; ++k) {
      d[k] = double(f[k]) / 3.0;
      i[k] = int32_t(f[k]);
      h[k] = floatToBf16(f[k]);
    }
    comm.allReduce(d.data(), count, DType::F64, ReduceOp::Sum);
    comm.allReduce(i.data(), count, DType::I32, ReduceOp::Avg);
    comm.allReduce(h.data(), count, DType::BF16, ReduceOp::Sum);
    record(d.data(), count * 8);
    record(i.data(), count * 4);
    record(h.data(), count * 2);

    std::vector<float> all = inputF32(me + 10, count * size_t(n)), part(count);
    comm.reduceScatter(all.data(), part.data(), count, DType::F32,
                       ReduceOp::Avg);
    record(part.data(), count * 4);
    std::vector<float> gathered(count * size_t(n));
    comm.allGather(f.data(), gathered.data(), count, DType::F32);
    record(gathered.data(), gathered.size() * 4);
    std::vector<float> swapped(count * size_t(n));
    comm.allToAll(all.data(), swapped.data(), count, DType::F32);
    record(swapped.data(), swapped.size() * 4);
    std::vector<float> b = inputF32(me + 20, count);
    comm.broadcast(b.data(), count, DType::F32, n - 1);
    record(b.data(), count * 4);
  }
  // A ring of point-to-point: even ranks send first, odd ones receive.
  if (n > 1) {
    std::vector<float> mine = inputF32(me + 30, 300), theirs(300);
    const int next = (me + 1) % n, prev = (me + n - 1) % n;
    comm.sendRecv(mine.data(), 300, next, theirs.data(), 300, prev, DType::F32,
                  7);
    record(theirs.data(), 1200);
    if (me % 2 == 0 && me + 1 < n)
      comm.send(mine.data(), 300, DType::F32, me + 1, 3);
    else if (me % 2 == 1)
      comm.recv(theirs.data(), 300, DType::F32, me - 1, 3),
          record(theirs.data(), 1200);
  }
  comm.barrier();
  // Mesh groups as a plan makes them: dp (same rank % 2), then one inside
  // the other.
  std::unique_ptr<Communicator> dp = comm.split(me % 2, me);
  std::vector<float> g = inputF32(me + 40, 301);
  dp->allReduce(g.data(), g.size(), DType::F32, ReduceOp::Sum);
  record(g.data(), g.size() * 4);
  std::unique_ptr<Communicator> none = comm.split(me == 0 ? -1 : 1, -me);
  if (none) {
    std::vector<float> z = inputF32(me + 50, 17);
    none->allReduce(z.data(), z.size(), DType::F32, ReduceOp::Sum);
    record(z.data(), z.size() * 4);
    record(none->worldRanks().data(), none->worldRanks().size() * 4);
  }
  out.stats[size_t(me)] =
      formatCommStats(comm.stats()) + " | " + formatCommStats(dp->stats());
}

class TcpAgainstThreads : public ::testing::TestWithParam<int> {};

TEST_P(TcpAgainstThreads, EveryCollectiveBitIdentical) {
  const int n = GetParam();
  Outcome threads{std::vector<std::vector<char>>(size_t(n)),
                  std::vector<std::string>(size_t(n))};
  Outcome tcp = threads;
  ThreadWorldOptions options;
  options.timeout = std::chrono::seconds(60);
  runRanks(n, [&](Communicator &c) { everyCollective(c, threads); }, options);
  std::vector<std::string> errors = runTcp(n, [&](Communicator &c) {
    EXPECT_STREQ(c.backendName(), "tcp");
    everyCollective(c, tcp);
  });
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(errors[size_t(r)], "");
    ASSERT_FALSE(threads.bytes[size_t(r)].empty());
    ASSERT_EQ(tcp.bytes[size_t(r)].size(), threads.bytes[size_t(r)].size());
    EXPECT_TRUE(tcp.bytes[size_t(r)] == threads.bytes[size_t(r)])
        << "the tcp results differ from the threads' in some bit";
    EXPECT_EQ(tcp.stats[size_t(r)], threads.stats[size_t(r)]);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, TcpAgainstThreads,
                         ::testing::Values(1, 2, 3, 4));

TEST(TcpStore, SetGetAddAcrossRanks) {
  std::vector<std::string> errors = runTcp(3, [](Communicator &c) {});
  for (const std::string &e : errors)
    EXPECT_EQ(e, "");
  TcpStoreServer server(0);
  auto store = TcpStore::rendezvous(optionsFor(server.port(), 0, 1, 5));
  store->set("k", std::string("a\0b", 3));
  EXPECT_EQ(store->get("k"), std::string("a\0b", 3));
  EXPECT_EQ(store->add("n", 5), 5);
  EXPECT_EQ(store->add("n", -2), 3);
  std::string unused;
  EXPECT_FALSE(store->tryGet("absent", &unused));
}

TEST(TcpStore, TimeoutNamesTheRanksThatNeverArrived) {
  TcpStoreServer server(0);
  std::vector<std::string> errors(2);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        TcpStore::rendezvous(optionsFor(server.port(), r, 4, 1));
      } catch (const Error &e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (std::thread &t : threads)
    t.join();
  const std::string expected =
      "rendezvous at 127.0.0.1:" + std::to_string(server.port()) +
      " timed out after 1 s: ranks 2, 3 of 4 never arrived";
  EXPECT_EQ(errors[0], expected);
  EXPECT_EQ(errors[1], expected);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(TcpStore, NoStoreNamesRankZero) {
  // A port nobody listens at: bind one, note it, close it.
  int port;
  {
    TcpStoreServer gone(0);
    port = gone.port();
  }
  try {
    TcpStore::rendezvous(optionsFor(port, 1, 2, 0.3));
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "timed out after 0.3 s: rank 0 of 2, which serves the "
                  "store, never arrived"),
              std::string::npos)
        << e.what();
  }
}

TEST(TcpStore, TwoProcessesClaimingOneRank) {
  TcpStoreServer server(0);
  auto first = TcpStore::rendezvous(optionsFor(server.port(), 0, 1, 5));
  try {
    TcpStore::rendezvous(optionsFor(server.port(), 0, 1, 5));
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()),
              "rendezvous at 127.0.0.1:" + std::to_string(server.port()) +
                  ": two processes claim rank 0 (check each one's RANK)");
  }
}

TEST(TcpStore, MalformedTimeoutVariableIsNamed) {
  ::setenv("DSC_RENDEZVOUS_TIMEOUT", "soon", 1);
  try {
    RendezvousOptions::timeoutFromEnvironment();
    ADD_FAILURE() << "no error";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()),
              "DSC_RENDEZVOUS_TIMEOUT='soon' is not a positive number of "
              "seconds");
  }
  ::setenv("DSC_RENDEZVOUS_TIMEOUT", "2.5", 1);
  EXPECT_EQ(RendezvousOptions::timeoutFromEnvironment().count(), 2500);
  ::unsetenv("DSC_RENDEZVOUS_TIMEOUT");
  EXPECT_EQ(RendezvousOptions::timeoutFromEnvironment().count(), 300000);
}

TEST(TcpCommunicator, PeerThatLeavesIsNamedNotWaitedFor) {
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> errors = runTcp(3, [](Communicator &c) {
    if (c.rank() == 2)
      return; // leaves: its sockets close
    std::vector<float> v(1000, 1.0f);
    c.allReduce(v.data(), v.size(), DType::F32, ReduceOp::Sum);
  });
  EXPECT_EQ(errors[2], "");
  // Rank 0 receives from rank 2 in the ring, rank 1 sends to it; either
  // sees the closed connection first or learns it from the other's abort.
  for (int r : {0, 1})
    EXPECT_NE(errors[size_t(r)].find("rank 2 closed its connection"),
              std::string::npos)
        << errors[size_t(r)];
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(TcpCommunicator, AbortReasonReachesThePeer) {
  std::vector<std::string> errors = runTcp(2, [](Communicator &c) {
    if (c.rank() == 1) {
      c.abort("disk full");
      return;
    }
    float x = 1;
    c.allReduce(&x, 1, DType::F32, ReduceOp::Sum);
  });
  EXPECT_NE(errors[0].find("all_reduce"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find(": rank 1 failed: disk full"), std::string::npos)
      << errors[0];
}

TEST(TcpCommunicator, DifferentCallsAreNamed) {
  std::vector<std::string> errors = runTcp(
      2,
      [](Communicator &c) {
        std::vector<float> v(4, 1.0f), w(8);
        if (c.rank() == 0)
          c.allReduce(v.data(), 4, DType::F32, ReduceOp::Sum);
        else
          c.allGather(v.data(), w.data(), 4, DType::F32);
      },
      5);
  EXPECT_NE(errors[0].find("rank 1 sent all_gather (16 bytes, tag 1) where "
                           "this rank expects all_reduce (8 bytes, tag 1)"),
            std::string::npos)
      << errors[0];
}

TEST(TcpCommunicator, SilentPeerTimesOutNamingIt) {
  std::vector<std::string> errors = runTcp(
      2,
      [](Communicator &c) {
        float x = 1;
        if (c.rank() == 0)
          c.recv(&x, 1, DType::F32, 1, 0);
        else
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      },
      0.5);
  EXPECT_NE(errors[0].find("timed out after 0.5 s waiting for rank 1"),
            std::string::npos)
      << errors[0];
}

} // namespace
