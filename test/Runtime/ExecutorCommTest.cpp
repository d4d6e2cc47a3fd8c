//===- ExecutorCommTest.cpp - The executor on several ranks ---------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Hand-built plans with a mesh, run on thread ranks (runRanks): AllReduce
// buckets (contiguous buffers reduced in one call), averaged values equal
// and bitwise identical on every rank, byte counters against the ring
// formula, group splits on a 2x2 mesh, data-parallel training equal to one
// rank with all the micro-batches, and the mesh/world mismatches.
//
//===----------------------------------------------------------------------===//

#include "PlanTestSupport.h"

#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/ThreadCommunicator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {

template <typename Fn> std::string errorOf(Fn fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e.what();
  } catch (const std::exception &e) {
    return std::string("unexpected non-Error exception: ") + e.what();
  }
  return "no error";
}

ThreadWorldOptions quickTimeout() {
  ThreadWorldOptions o;
  o.timeout = std::chrono::seconds(20);
  return o;
}

/// Adds a buffer right after buffer `after` (no alignment gap), so the two
/// are contiguous in arena 0.
uint32_t addBufferAfter(Plan &plan, uint32_t after, const std::string &name,
                        DType dtype, std::vector<int64_t> shape,
                        BufferRole role) {
  Buffer b;
  b.name = name;
  b.arena = 0;
  b.dtype = dtype;
  b.shape = std::move(shape);
  b.role = role;
  b.bytes = uint64_t(numElements(b.shape)) * dtypeSize(dtype);
  b.offset = plan.buffers[after].offset + plan.buffers[after].bytes;
  plan.arenas[0].bytes = std::max(plan.arenas[0].bytes, b.offset + b.bytes);
  plan.buffers.push_back(b);
  return uint32_t(plan.buffers.size() - 1);
}

/// The tiny plan on mesh `mesh` with three gradient-like buffers: a [5] and
/// b [3] contiguous, c [7] after an alignment gap, and a program "sync"
/// all-reducing (a, b, c) over `axes` with `reduce`.
Plan makeSyncPlan(std::vector<Plan::MeshAxis> mesh, int64_t axes,
                  int64_t reduce, DType dt = DType::F32) {
  Plan plan = makeTinyPlan(dt);
  plan.mesh = std::move(mesh);
  uint32_t a = addBuffer(plan, "a", dt, {5}, BufferRole::Gradient);
  uint32_t b = addBufferAfter(plan, a, "b", dt, {3}, BufferRole::Gradient);
  uint32_t c = addBuffer(plan, "c", dt, {7}, BufferRole::Gradient);
  plan.programs.push_back({"sync",
                           {makeInst(Opcode::AllReduce, {a, b, c}, {a, b, c},
                                     "grads.all_reduce", {axes, reduce})}});
  plan.summary.peakBytesPerArena = {plan.arenas[0].bytes};
  return plan;
}

/// Rank r's value of element i of buffer `k` (0, 1, 2): not exactly
/// representable, different on every rank.
double valueOf(int rank, int k, int i) {
  return 0.1 * (rank + 1) + 0.37 * k + 0.013 * i + 1.0 / (3 + rank);
}

void fillSync(Executor &ex, int rank) {
  const char *names[] = {"a", "b", "c"};
  for (int k = 0; k < 3; ++k) {
    BufferView v = ex.buffer(names[k]);
    for (int64_t i = 0; i < v.size(); ++i)
      v.as<float>()[i] = float(valueOf(rank, k, int(i)));
  }
}

std::vector<float> readSync(Executor &ex) {
  std::vector<float> out;
  for (const char *name : {"a", "b", "c"}) {
    BufferView v = ex.buffer(name);
    out.insert(out.end(), v.as<float>(), v.as<float>() + v.size());
  }
  return out;
}

TEST(ExecutorComm, AllReduceAveragesBucketsBitwiseEqualOnEveryRank) {
  const int n = 2;
  Plan plan = makeSyncPlan({{"dp", n}}, /*axes=*/1, /*reduce=*/1);
  std::vector<std::vector<float>> results(n);
  std::vector<CommStats> stats(n);
  runRanks(
      n,
      [&](Communicator &world) {
        Executor ex(plan, 7, &world);
        EXPECT_EQ(ex.meshCoordinates(), std::vector<int64_t>{world.rank()});
        ASSERT_NE(ex.group(1), nullptr);
        EXPECT_EQ(ex.group(1)->size(), n);
        EXPECT_EQ(ex.group(2), nullptr);
        fillSync(ex, world.rank());
        ex.runProgram("sync");
        results[world.rank()] = readSync(ex);
        stats[world.rank()] = ex.collectiveStats();
      },
      quickTimeout());
  // The average of the ranks' float values, in double.
  std::vector<double> want;
  const int sizes[] = {5, 3, 7};
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < sizes[k]; ++i) {
      double sum = 0;
      for (int r = 0; r < n; ++r)
        sum += double(float(valueOf(r, k, i)));
      want.push_back(sum / n);
    }
  ASSERT_EQ(results[0].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(results[0][i], want[i], 1e-6 * std::fabs(want[i])) << i;
  for (int r = 1; r < n; ++r)
    EXPECT_EQ(std::memcmp(results[r].data(), results[0].data(),
                          results[0].size() * sizeof(float)),
              0)
        << "rank " << r << " differs from rank 0";
  // Two calls: the bucket (a, b) of 8 floats and c alone (7 floats).
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(stats[r].count(CollectiveKind::AllReduce), 2u) << r;
    uint64_t want = ringBytesSent(CollectiveKind::AllReduce, 8 * 4, 4, n, r) +
                    ringBytesSent(CollectiveKind::AllReduce, 7 * 4, 4, n, r);
    EXPECT_EQ(stats[r].sent(CollectiveKind::AllReduce), want) << r;
    EXPECT_EQ(stats[r].totalSent(), want) << r;
  }
  // 2(n-1)/n of 8 floats, and of 7 floats split 4 + 3.
  EXPECT_EQ(stats[0].sent(CollectiveKind::AllReduce) +
                stats[1].sent(CollectiveKind::AllReduce),
            uint64_t(2 * (n - 1) * (8 + 7) * 4));
}

TEST(ExecutorComm, SumMaxMinAndF64) {
  for (int64_t reduce : {0, 2, 3}) {
    const int n = 3;
    Plan plan = makeSyncPlan({{"dp", n}}, 1, reduce, DType::F64);
    std::vector<std::vector<double>> results(n);
    runRanks(
        n,
        [&](Communicator &world) {
          Executor ex(plan, 7, &world);
          const char *names[] = {"a", "b", "c"};
          for (int k = 0; k < 3; ++k) {
            BufferView v = ex.buffer(names[k]);
            for (int64_t i = 0; i < v.size(); ++i)
              v.as<double>()[i] = valueOf(world.rank(), k, int(i));
          }
          ex.runProgram("sync");
          std::vector<double> out;
          for (const char *name : names) {
            std::vector<double> v = ex.read(name);
            out.insert(out.end(), v.begin(), v.end());
          }
          results[world.rank()] = out;
        },
        quickTimeout());
    size_t at = 0;
    const int sizes[] = {5, 3, 7};
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < sizes[k]; ++i, ++at) {
        double want = valueOf(0, k, i);
        for (int r = 1; r < n; ++r) {
          double x = valueOf(r, k, i);
          want = reduce == 0   ? want + x
                 : reduce == 2 ? std::max(want, x)
                               : std::min(want, x);
        }
        for (int r = 0; r < n; ++r)
          EXPECT_NEAR(results[r][at], want, 1e-12) << "reduce " << reduce;
      }
  }
}

TEST(ExecutorComm, GroupsOfA2x2Mesh) {
  // dp=2 x tp=2: world rank w = 2 * dp + tp. Mask 1 (dp) groups ranks with
  // the same tp coordinate, mask 2 (tp) those with the same dp coordinate.
  Plan plan = makeSyncPlan({{"dp", 2}, {"tp", 2}}, 1, 0);
  Plan tpPlan = plan;
  tpPlan.programs.back().instructions.push_back(
      tpPlan.programs.back().instructions[0]);
  tpPlan.programs.back().instructions[1].ints[0] = 2;
  tpPlan.programs.back().instructions[1].name = "tp.all_reduce";
  std::mutex mu;
  std::vector<std::vector<int>> dpGroups(4), tpGroups(4);
  std::vector<std::vector<int64_t>> coords(4);
  std::vector<std::vector<float>> results(4);
  runRanks(
      4,
      [&](Communicator &world) {
        Executor ex(tpPlan, 7, &world);
        fillSync(ex, world.rank());
        ex.runProgram("sync"); // sum over dp, then over tp: over all four
        std::lock_guard<std::mutex> lock(mu);
        dpGroups[world.rank()] = ex.group(1)->worldRanks();
        tpGroups[world.rank()] = ex.group(2)->worldRanks();
        coords[world.rank()] = ex.meshCoordinates();
        results[world.rank()] = readSync(ex);
      },
      quickTimeout());
  for (int w = 0; w < 4; ++w) {
    int dp = w / 2, tp = w % 2;
    EXPECT_EQ(coords[w], (std::vector<int64_t>{dp, tp}));
    EXPECT_EQ(dpGroups[w], (std::vector<int>{tp, 2 + tp})) << w;
    EXPECT_EQ(tpGroups[w], (std::vector<int>{2 * dp, 2 * dp + 1})) << w;
  }
  const int sizes[] = {5, 3, 7};
  size_t at = 0;
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < sizes[k]; ++i, ++at) {
      double want = 0;
      for (int r = 0; r < 4; ++r)
        want += valueOf(r, k, i);
      for (int r = 0; r < 4; ++r)
        EXPECT_NEAR(results[r][at], want, 1e-5) << r << " " << at;
    }
}

// Sequence parallelism's instructions on tp=2 thread ranks: TakeChunk
// keeps the rank's rows of a replicated buffer, GatherChunks concatenates
// the ranks' rows, ReduceScatterChunks leaves each rank its rows of the
// sum, and DropoutChunk draws on each rank's rows the mask Dropout draws
// on the whole (the concatenated chunks equal one rank's Dropout).
TEST(ExecutorComm, SequenceParallelChunks) {
  Plan plan = makeTinyPlan(DType::F32);
  plan.mesh = {{"tp", 2}};
  uint32_t whole =
      addBuffer(plan, "whole", DType::F32, {8, 4}, BufferRole::Temporary);
  uint32_t rows =
      addBuffer(plan, "rows", DType::F32, {4, 4}, BufferRole::Temporary);
  uint32_t gathered =
      addBuffer(plan, "gathered", DType::F32, {8, 4}, BufferRole::Temporary);
  uint32_t summed =
      addBuffer(plan, "summed", DType::F32, {4, 4}, BufferRole::Temporary);
  uint32_t dropped =
      addBuffer(plan, "dropped", DType::F32, {4, 4}, BufferRole::Temporary);
  uint32_t droppedWhole = addBuffer(plan, "dropped.whole", DType::F32, {8, 4},
                                    BufferRole::Temporary);
  Instruction chunkDropout =
      makeInst(Opcode::DropoutChunk, {rows}, {dropped}, "dropout", {5, 1});
  chunkDropout.floats = {0.5};
  Instruction wholeDropout =
      makeInst(Opcode::Dropout, {whole}, {droppedWhole}, "dropout.whole", {5});
  wholeDropout.floats = {0.5};
  plan.programs.push_back(
      {"sp",
       {makeInst(Opcode::TakeChunk, {whole}, {rows}, "take", {1}),
        makeInst(Opcode::GatherChunks, {rows}, {gathered}, "gather", {1}),
        makeInst(Opcode::ReduceScatterChunks, {whole}, {summed}, "scatter",
                 {1, 0}),
        chunkDropout, wholeDropout}});
  plan.summary.peakBytesPerArena = {plan.arenas[0].bytes};
  ASSERT_NO_THROW(validatePlan(plan));
  std::mutex mu;
  std::vector<std::vector<float>> taken(2), gather(2), sum(2), drop(2),
      dropWhole(2);
  auto read = [](Executor &ex, const char *name) {
    BufferView v = ex.buffer(name);
    return std::vector<float>(v.as<float>(), v.as<float>() + v.size());
  };
  runRanks(
      2,
      [&](Communicator &world) {
        Executor ex(plan, 7, &world);
        BufferView w = ex.buffer("whole");
        for (int64_t i = 0; i < w.size(); ++i)
          w.as<float>()[i] = float(1 + i); // replicated: the same on both
        ex.runProgram("sp");
        std::lock_guard<std::mutex> lock(mu);
        int r = world.rank();
        taken[r] = read(ex, "rows");
        gather[r] = read(ex, "gathered");
        sum[r] = read(ex, "summed");
        drop[r] = read(ex, "dropped");
        dropWhole[r] = read(ex, "dropped.whole");
      },
      quickTimeout());
  for (int r = 0; r < 2; ++r) {
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(taken[r][i], float(1 + 16 * r + i)) << r << " " << i;
      EXPECT_EQ(sum[r][i], 2.0f * float(1 + 16 * r + i)) << r << " " << i;
      EXPECT_EQ(drop[r][i], dropWhole[r][16 * r + i]) << r << " " << i;
    }
    for (int i = 0; i < 32; ++i)
      EXPECT_EQ(gather[r][i], float(1 + i)) << r << " " << i;
  }
  // The mask is not trivial: p = 0.5 drops some of the 32 and keeps some.
  int kept = 0;
  for (float v : dropWhole[0])
    kept += v != 0.0f;
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 32);
}

/// The tiny plan made data parallel: mesh dp=`dp`, the gradients averaged
/// over dp at the start of the optimizer program (one bucket: the two
/// gradients are contiguous).
Plan makeDataParallelTinyPlan(int64_t dp) {
  Plan plan = makeTinyPlan(DType::F64, TinyShape{16, 8, 2, 4});
  plan.mesh = {{"dp", dp}};
  uint32_t gWte = uint32_t(plan.findBuffer("wte.weight.grad"));
  uint32_t gHead = uint32_t(plan.findBuffer("head.weight.grad"));
  EXPECT_EQ(plan.buffers[gWte].offset + plan.buffers[gWte].bytes,
            plan.buffers[gHead].offset);
  Program &opt = plan.programs[2];
  opt.instructions.insert(opt.instructions.begin(),
                          makeInst(Opcode::AllReduce, {gWte, gHead},
                                   {gWte, gHead}, "grads.all_reduce", {1, 1}));
  plan.summary.collectiveBytesPerStep = uint64_t(ringBytesSent(
      CollectiveKind::AllReduce,
      plan.buffers[gWte].bytes + plan.buffers[gHead].bytes, 8, int(dp), 0));
  return plan;
}

/// Deterministic batch `index` of the tiny shape.
void batchOf(int64_t index, int32_t *tokens, int32_t *targets) {
  for (int i = 0; i < 8; ++i) {
    tokens[i] = int32_t((index * 7 + i * 3) % 16);
    targets[i] = int32_t((index * 5 + i * 11 + 1) % 16);
  }
}

TEST(ExecutorComm, DataParallelTrainsLikeOneRankWithAllMicroBatches) {
  const int dp = 2, steps = 4;
  // One rank, dp micro-batches per step.
  std::vector<double> oneLoss;
  std::vector<double> oneParams;
  {
    Executor ex(makeTinyPlan(DType::F64, TinyShape{16, 8, 2, 4}), 11);
    for (int s = 0; s < steps; ++s)
      oneLoss.push_back(
          ex.trainStep([&](int64_t m, int32_t *t,
                           int32_t *y) { batchOf(s * dp + m, t, y); },
                       dp)
              .loss);
    oneParams = ex.read("head.weight");
  }
  // dp ranks, one micro-batch each: rank d takes micro-batch d.
  Plan plan = makeDataParallelTinyPlan(dp);
  std::vector<std::vector<double>> losses(dp), params(dp);
  std::vector<uint64_t> bytes(dp);
  runRanks(
      dp,
      [&](Communicator &world) {
        int d = world.rank();
        Executor ex(plan, 11, &world);
        for (int s = 0; s < steps; ++s) {
          StepResult r =
              ex.trainStep([&](int64_t m, int32_t *t,
                               int32_t *y) { batchOf(s * dp + d + m, t, y); },
                           1);
          double loss = r.loss;
          world.allReduce(&loss, 1, DType::F64, ReduceOp::Avg);
          losses[d].push_back(loss);
          bytes[d] = r.collectiveBytesSent;
        }
        params[d] = ex.read("head.weight");
      },
      quickTimeout());
  for (int s = 0; s < steps; ++s)
    for (int d = 0; d < dp; ++d)
      EXPECT_NEAR(losses[d][s], oneLoss[s], 1e-12 * std::fabs(oneLoss[s]))
          << "step " << s << " rank " << d;
  for (int d = 0; d < dp; ++d) {
    ASSERT_EQ(params[d].size(), oneParams.size());
    for (size_t i = 0; i < oneParams.size(); ++i)
      EXPECT_NEAR(params[d][i], oneParams[i], 1e-12) << i;
    EXPECT_EQ(std::memcmp(params[d].data(), params[0].data(),
                          params[0].size() * sizeof(double)),
              0);
    // Measured bytes per step equal the plan's prediction (the ring formula).
    EXPECT_EQ(bytes[d], plan.summary.collectiveBytesPerStep) << d;
  }
}

TEST(ExecutorComm, InstructionHookMarksCollectives) {
  Plan plan = makeDataParallelTinyPlan(2);
  std::vector<std::vector<InstructionEvent>> events(2);
  runRanks(
      2,
      [&](Communicator &world) {
        Executor ex(plan, 11, &world);
        ex.setInstructionHook([&](const InstructionEvent &e) {
          events[world.rank()].push_back(e);
        });
        ex.runProgram("optimizer");
      },
      quickTimeout());
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(events[r].empty());
    EXPECT_TRUE(events[r][0].collective);
    EXPECT_EQ(events[r][0].stream, 1);
    EXPECT_EQ(events[r][0].bytesSent, plan.summary.collectiveBytesPerStep);
    for (size_t i = 1; i < events[r].size(); ++i) {
      EXPECT_FALSE(events[r][i].collective);
      EXPECT_EQ(events[r][i].stream, 0);
    }
  }
}

TEST(ExecutorComm, MeshAndWorldMustAgree) {
  Plan plan = makeSyncPlan({{"dp", 2}}, 1, 1);
  EXPECT_EQ(errorOf([&] { Executor ex(plan, 1); }),
            "the plan's mesh dp=2 needs 2 ranks, but the executor was given "
            "no communicator");
  std::vector<std::string> messages(4);
  runRanks(
      4,
      [&](Communicator &world) {
        messages[world.rank()] = errorOf([&] { Executor ex(plan, 1, &world); });
      },
      quickTimeout());
  for (const std::string &m : messages)
    EXPECT_EQ(m, "the plan's mesh dp=2 needs 2 ranks, but the communicator "
                 "has 4");
  Plan noMesh = makeTinyPlan();
  runRanks(
      2,
      [&](Communicator &world) {
        messages[world.rank()] =
            errorOf([&] { Executor ex(noMesh, 1, &world); });
      },
      quickTimeout());
  EXPECT_EQ(messages[0], "the plan has no mesh (it runs on one rank) but the "
                         "communicator has 2 ranks");
  // A one-rank world runs a plan without a mesh, and a dp=1 mesh.
  runRanks(
      1,
      [&](Communicator &world) {
        Executor a(noMesh, 1, &world);
        Executor b(makeSyncPlan({{"dp", 1}}, 1, 1), 1, &world);
        fillSync(b, 0);
        std::vector<float> before = readSync(b);
        b.runProgram("sync");
        EXPECT_EQ(readSync(b), before);
      },
      quickTimeout());
}

TEST(ExecutorComm, AFailingRankStopsTheOthers) {
  Plan plan = makeDataParallelTinyPlan(2);
  std::string msg = errorOf([&] {
    runRanks(
        2,
        [&](Communicator &world) {
          Executor ex(plan, 11, &world);
          if (world.rank() == 1)
            throw Error("injected failure");
          ex.runProgram("optimizer");
        },
        quickTimeout());
  });
  EXPECT_NE(msg.find("rank 1 failed: injected failure"), std::string::npos)
      << msg;
}

} // namespace
