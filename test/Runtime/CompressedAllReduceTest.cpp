//===- CompressedAllReduceTest.cpp - 1-bit all-reduce against numpy -------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The compressed all-reduce (CompressedAllReduce.h) on 1, 2 and 4 thread
// ranks against the independent numpy reference's goldens
// (scripts/onebit-reference, cross-checked there with DeepSpeed's own
// compressed_allreduce): every round's result, worker errors and server
// errors, for sizes that need padding, random and zero initial errors, and
// exact zeros (sign(0) = +1). Tolerance: 1e-5 of the round's largest value
// (the reference's README: norms and square roots may round 1 ulp apart).
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CompressedAllReduce.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/OnebitAdam.h"
#include "dsc/Runtime/ThreadCommunicator.h"

#include "OnebitGoldens.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <vector>

using namespace dsc::rt;

namespace {

using namespace onebit_goldens;

TEST(CompressedAllReduce, PaddingIsDeepSpeeds) {
  EXPECT_EQ(onebitPaddedSize(37, 1), 40);
  EXPECT_EQ(onebitPaddedSize(37, 2), 48);
  EXPECT_EQ(onebitPaddedSize(37, 3), 72);
  EXPECT_EQ(onebitPaddedSize(1000, 4), 1024);
  EXPECT_EQ(onebitPaddedSize(64, 4), 64);
}

TEST(CompressedAllReduce, MatchesTheNumpyReference) {
  const llvm::json::Value golden = readGolden("compressed-allreduce.json");
  ASSERT_TRUE(golden.getAsObject());
  const llvm::json::Value *json = &golden;
  int64_t checked = 0;
  for (const llvm::json::Value &c : *json->getAsObject()->getArray("cases")) {
    const llvm::json::Object &kase = *c.getAsObject();
    const std::string name = kase.getString("name")->str();
    const int64_t p = *kase.getInteger("p"), n = *kase.getInteger("padded_n");
    ASSERT_EQ(onebitPaddedSize(*kase.getInteger("n"), p), n) << name;
    for (const llvm::json::Value &r : *kase.getArray("rounds")) {
      const llvm::json::Object &round = *r.getAsObject();
      const Rows inputs = rows(*round.get("inputs"));
      const Rows workerIn = rows(*round.get("worker_errors_in"));
      const Rows serverIn = rows(*round.get("server_errors_in"));
      const Rows workerOut = rows(*round.get("worker_errors_out"));
      const Rows serverOut = rows(*round.get("server_errors_out"));
      const std::vector<float> result = row(*round.get("result"));
      Rows x = inputs, worker = workerIn, server = serverIn;
      runRanks(int(p), [&](Communicator &comm) {
        const size_t r = size_t(comm.rank());
        compressedAllReduce(comm, x[r].data(), worker[r].data(),
                            server[r].data(), n);
      });
      for (int64_t rank = 0; rank < p; ++rank) {
        const size_t r = size_t(rank);
        EXPECT_LT(relativeError(x[r], result), 1e-5)
            << name << " rank " << rank << ": result";
        EXPECT_LT(relativeError(worker[r], workerOut[r]), 1e-5)
            << name << " rank " << rank << ": worker error";
        EXPECT_LT(relativeError(server[r], serverOut[r]), 1e-5)
            << name << " rank " << rank << ": server error";
        // The signs are exact: every element's sign equals the reference's.
        for (size_t i = 0; i < result.size(); ++i)
          ASSERT_EQ(x[r][i] >= 0, result[i] >= 0)
              << name << " rank " << rank << " element " << i;
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 50);
}

/// The bytes a rank sends, as the communicator counts them: phase 1's
/// all-to-all of (p - 1) sign chunks and all-gather of the scale, phase 2's
/// all-gathers of the server's signs and scale; at most 1/14 of an fp32
/// all-reduce of the same buffer (the bound; the formula gives
/// about 1/32).
TEST(CompressedAllReduce, SendsAFourteenthOrLessOfAnAllReduce) {
  const int64_t p = 4, n = 4096, words = signWords(n / p);
  std::vector<uint64_t> compressed(static_cast<size_t>(p)),
      exact(static_cast<size_t>(p));
  runRanks(int(p), [&](Communicator &comm) {
    std::vector<float> x(size_t(n), 1.0f), e(size_t(n), 0.0f),
        s(size_t(n / p), 0.0f);
    const uint64_t before = comm.stats().totalSent();
    compressedAllReduce(comm, x.data(), e.data(), s.data(), n);
    const uint64_t middle = comm.stats().totalSent();
    comm.allReduce(x.data(), size_t(n), DType::F32, ReduceOp::Sum);
    compressed[size_t(comm.rank())] = middle - before;
    exact[size_t(comm.rank())] = comm.stats().totalSent() - middle;
  });
  const uint64_t signs = uint64_t((p - 1) * words * 4), scale = (p - 1) * 4;
  for (int64_t r = 0; r < p; ++r) {
    EXPECT_EQ(compressed[size_t(r)], 2 * signs + 2 * scale) << "rank " << r;
    EXPECT_LE(14 * compressed[size_t(r)], exact[size_t(r)]) << "rank " << r;
  }
}

TEST(CompressedAllReduce, RefusesAnUnpaddedLength) {
  std::vector<float> x(37), e(37), s(37);
  EXPECT_THROW(runRanks(2,
                        [&](Communicator &comm) {
                          compressedAllReduce(comm, x.data(), e.data(),
                                              s.data(), 37);
                        }),
               Error);
}

/// DeepSpeed's OnebitAdam over 20 steps (4 exact, then compressed) on 1, 2
/// and 4 ranks against the numpy reference: the parameters after every
/// step, the moments and both errors at the end.
TEST(OnebitAdam, MatchesTheNumpyReference) {
  const llvm::json::Value golden = readGolden("onebit-adam.json");
  ASSERT_TRUE(golden.getAsObject());
  const llvm::json::Value *json = &golden;
  const llvm::json::Object &root = *json->getAsObject();
  OnebitAdamConfig config;
  config.lr = *root.getNumber("lr");
  config.beta1 = *root.getNumber("beta1");
  config.beta2 = *root.getNumber("beta2");
  config.eps = *root.getNumber("eps");
  config.freezeStep = *root.getInteger("freeze_step");
  int64_t cases = 0;
  for (const llvm::json::Value &c : *root.getArray("cases")) {
    const llvm::json::Object &kase = *c.getAsObject();
    const std::string name = kase.getString("name")->str();
    const int64_t p = *kase.getInteger("p"), n = *kase.getInteger("n");
    config.weightDecay = *kase.getNumber("weight_decay");
    const std::vector<float> params0 = row(*kase.get("params0"));
    std::vector<Rows> grads;
    for (const llvm::json::Value &step : *kase.getArray("grads"))
      grads.push_back(rows(step));
    const Rows params = rows(*kase.get("params"));
    const llvm::json::Array &stages = *kase.getArray("stages");
    std::vector<std::vector<float>> finalParams(static_cast<size_t>(p));
    std::vector<OnebitAdamState> states(static_cast<size_t>(p));
    std::vector<std::vector<double>> errors(static_cast<size_t>(p));
    std::vector<std::vector<std::string>> stageSeen(static_cast<size_t>(p));
    runRanks(int(p), [&](Communicator &comm) {
      const size_t r = size_t(comm.rank());
      std::vector<float> x = params0;
      for (size_t k = 0; k < grads.size(); ++k) {
        stageSeen[r].push_back(states[r].compressesNext(config) ? "compressed"
                                                                : "exact");
        onebitAdamStep(comm, x.data(), grads[k][r].data(), n, states[r],
                       config);
        errors[r].push_back(relativeError(x, params[k]));
      }
      finalParams[r] = x;
    });
    for (int64_t rank = 0; rank < p; ++rank) {
      const size_t r = size_t(rank);
      for (size_t k = 0; k < stages.size(); ++k) {
        EXPECT_EQ(stageSeen[r][k], stages[k].getAsString()->str())
            << name << " step " << k + 1;
        // The parameters within 1e-6 of their largest magnitude.
        EXPECT_LT(errors[r][k], 1e-6)
            << name << " rank " << rank << " step " << k + 1;
      }
      EXPECT_LT(relativeError(states[r].expAvg, row(*kase.get("exp_avg"))),
                1e-5)
          << name;
      EXPECT_LT(
          relativeError(states[r].expAvgSq, row(*kase.get("exp_avg_sq"))),
          1e-5)
          << name;
      if (p > 1) {
        EXPECT_LT(relativeError(states[r].workerError,
                                rows(*kase.get("worker_errors"))[r]),
                  1e-5)
            << name << " rank " << rank;
        EXPECT_LT(relativeError(states[r].serverError,
                                rows(*kase.get("server_errors"))[r]),
                  1e-5)
            << name << " rank " << rank;
      }
    }
    ++cases;
  }
  EXPECT_EQ(cases, 8);
}

} // namespace
