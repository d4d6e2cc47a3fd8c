//===- ExecutorAllToAllTest.cpp - AllToAll on thread ranks ----------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Expert parallelism's AllToAll on four thread ranks against a naive
// reference written from Instructions.def's definition: the dispatch
// (contiguous sends, strided receives), the scaled combine (strided sends),
// both strided at once, a bf16 one, the round trip that gives x back bit
// for bit, a group of one axis of a 2x2 mesh, the overlapped lane, and the
// bytes the communicator counts against the ring formula.
//
//===----------------------------------------------------------------------===//

#include "PlanTestSupport.h"

#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/PlanScheduleVerifier.h"
#include "dsc/Runtime/ThreadCommunicator.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {

ThreadWorldOptions quickTimeout() {
  ThreadWorldOptions o;
  o.timeout = std::chrono::seconds(20);
  return o;
}

// Experts, capacity and hidden of the dispatched tokens [E, C, H].
constexpr int64_t kExperts = 8, kCapacity = 3, kHidden = 2;
constexpr int64_t kElements = kExperts * kCapacity * kHidden;

/// Rank `rank`'s value of element i of input `k`: different on every rank
/// and element, exact in f32 and (an integer below 256 times 4) in bf16.
float valueOf(int rank, int k, int64_t i) {
  return float((rank * kElements + i) * (k + 1)) * (k % 2 ? -1.0f : 1.0f);
}

/// Group rank r's y from the definition of AllToAll: the group's x
/// (`xs[j]`, group rank j's) viewed as [sendOuter, D, .] send x[:, j, :] to
/// rank j; y viewed as [recvOuter, D, .] holds rank j's block in y[:, j, :];
/// then y *= scale.
std::vector<float> reference(const std::vector<std::vector<float>> &xs, int r,
                             int64_t sendOuter, int64_t recvOuter,
                             float scale) {
  const int64_t d = int64_t(xs.size()), n = int64_t(xs[0].size());
  const int64_t sendRun = n / (sendOuter * d), recvRun = n / (recvOuter * d);
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t j = 0; j < d; ++j) {
    std::vector<float> block;
    for (int64_t o = 0; o < sendOuter; ++o)
      for (int64_t k = 0; k < sendRun; ++k)
        block.push_back(xs[size_t(j)][size_t((o * d + r) * sendRun + k)]);
    for (int64_t o = 0; o < recvOuter; ++o)
      for (int64_t k = 0; k < recvRun; ++k)
        y[size_t((o * d + j) * recvRun + k)] =
            block[size_t(o * recvRun + k)] * scale;
  }
  return y;
}

/// The tiny plan on `mesh` with expert-parallel all-to-alls over the group
/// of `axes`, D ranks:
///   dispatch   ep.x [E, C, H] -> ep.y [E/D, D*C, H]
///              (sendOuter 1, recvOuter E/D)
///   roundtrip  dispatch, then ep.y -> ep.back [E, C, H]
///              (sendOuter E/D, recvOuter 1)
///   combine    ep.dy [E/D, D*C, H] -> ep.dx [E, C, H], scale 0.5
///   strided    s.in -> s.out (sendOuter 2, recvOuter 3, f32) and
///              h.in -> h.out (sendOuter 2, recvOuter 2, bf16, scale
///              0.5: exact on these integers)
Plan makeAllToAllPlan(std::vector<Plan::MeshAxis> mesh, int64_t axes,
                      int64_t d) {
  Plan plan = makeTinyPlan(DType::F32);
  plan.mesh = std::move(mesh);
  const int64_t local = kExperts / d;
  const std::vector<int64_t> experts{kExperts, kCapacity, kHidden};
  const std::vector<int64_t> dispatched{local, d * kCapacity, kHidden};
  auto add = [&](const char *name, std::vector<int64_t> shape,
                 DType dt = DType::F32) {
    return addBuffer(plan, name, dt, std::move(shape), BufferRole::Temporary);
  };
  uint32_t x = add("ep.x", experts), y = add("ep.y", dispatched),
           back = add("ep.back", experts);
  uint32_t dy = add("ep.dy", dispatched), dx = add("ep.dx", experts);
  uint32_t sIn = add("s.in", {kElements}), sOut = add("s.out", {kElements});
  uint32_t hIn = add("h.in", {4, kElements / 4}, DType::BF16),
           hOut = add("h.out", {kElements / 4, 4}, DType::BF16);
  auto a2a = [&](uint32_t in, uint32_t out, const char *name, int64_t sendOuter,
                 int64_t recvOuter, double scale) {
    return makeInst(Opcode::AllToAll, {in}, {out}, name,
                    {axes, sendOuter, recvOuter}, {scale});
  };
  plan.programs.push_back({"dispatch", {a2a(x, y, "dispatch", 1, local, 1)}});
  plan.programs.push_back({"roundtrip",
                           {a2a(x, y, "dispatch", 1, local, 1),
                            a2a(y, back, "combine", local, 1, 1)}});
  plan.programs.push_back(
      {"combine", {a2a(dy, dx, "combine.grad", local, 1, 0.5)}});
  plan.programs.push_back({"strided",
                           {a2a(sIn, sOut, "strided", 2, 3, 1),
                            a2a(hIn, hOut, "strided.bf16", 2, 2, 0.5)}});
  plan.summary.peakBytesPerArena = {plan.arenas[0].bytes};
  return plan;
}

std::vector<float> readF32(Executor &ex, const char *name) {
  BufferView v = ex.buffer(name);
  return std::vector<float>(v.as<float>(), v.as<float>() + v.size());
}

/// A bf16 buffer's values as floats (exact).
std::vector<float> readBf16(Executor &ex, const char *name) {
  BufferView v = ex.buffer(name);
  std::vector<float> out(static_cast<size_t>(v.size()));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = bf16ToFloat(v.as<uint16_t>()[i]);
  return out;
}

void fill(Executor &ex, const char *name, int rank, int k) {
  BufferView v = ex.buffer(name);
  for (int64_t i = 0; i < v.size(); ++i) {
    if (v.desc->dtype == DType::BF16)
      v.as<uint16_t>()[i] = floatToBf16(valueOf(rank, k, i));
    else
      v.as<float>()[i] = valueOf(rank, k, i);
  }
}

std::vector<float> inputOf(int rank, int k) {
  std::vector<float> v(static_cast<size_t>(kElements));
  for (int64_t i = 0; i < kElements; ++i)
    v[size_t(i)] = valueOf(rank, k, i);
  return v;
}

/// What each world rank saw: its group, its rank there, and the buffers.
struct RankResult {
  std::vector<int> group;
  int groupRank = -1;
  std::map<std::string, std::vector<float>> buffers;
  CommStats stats;
};

/// Runs every program of makeAllToAllPlan on `worldSize` thread ranks.
std::vector<RankResult> runAll(const Plan &plan, int worldSize, int64_t axes,
                               bool overlap) {
  std::vector<RankResult> results(static_cast<size_t>(worldSize));
  std::mutex mu;
  runRanks(
      worldSize,
      [&](Communicator &world) {
        Executor ex(plan, 7, &world);
        ex.setOverlapCommunication(overlap);
        EXPECT_EQ(ex.overlapsCommunication(), overlap);
        const int w = world.rank();
        RankResult r;
        r.group = ex.group(axes)->worldRanks();
        r.groupRank = ex.group(axes)->rank();
        fill(ex, "ep.x", w, 0);
        ex.runProgram("dispatch");
        r.buffers["ep.y"] = readF32(ex, "ep.y");
        ex.runProgram("roundtrip");
        r.buffers["ep.back"] = readF32(ex, "ep.back");
        fill(ex, "ep.dy", w, 1);
        ex.runProgram("combine");
        r.buffers["ep.dx"] = readF32(ex, "ep.dx");
        fill(ex, "s.in", w, 2);
        fill(ex, "h.in", w, 3);
        ex.runProgram("strided");
        r.buffers["s.out"] = readF32(ex, "s.out");
        r.buffers["h.out"] = readBf16(ex, "h.out");
        r.stats = ex.group(axes)->stats();
        std::lock_guard<std::mutex> lock(mu);
        results[size_t(w)] = std::move(r);
      },
      quickTimeout());
  return results;
}

/// Checks every rank's results against the reference of its group.
void expectReference(const std::vector<RankResult> &results, int64_t d) {
  const int64_t local = kExperts / d;
  for (size_t w = 0; w < results.size(); ++w) {
    const RankResult &me = results[w];
    ASSERT_EQ(int64_t(me.group.size()), d) << w;
    ASSERT_EQ(me.group[size_t(me.groupRank)], int(w));
    auto inputs = [&](int k) {
      std::vector<std::vector<float>> xs;
      for (int member : me.group)
        xs.push_back(inputOf(member, k));
      return xs;
    };
    const int r = me.groupRank;
    EXPECT_EQ(me.buffers.at("ep.y"), reference(inputs(0), r, 1, local, 1.0f))
        << "dispatch, world rank " << w;
    // Dispatch in MoE terms: y[e, j*C + c, :] is group rank j's token c of
    // expert r*E/D + e.
    const std::vector<float> &y = me.buffers.at("ep.y");
    for (int64_t e = 0; e < local; ++e)
      for (int64_t j = 0; j < d; ++j)
        for (int64_t c = 0; c < kCapacity; ++c)
          for (int64_t h = 0; h < kHidden; ++h)
            EXPECT_EQ(y[size_t(((e * d + j) * kCapacity + c) * kHidden + h)],
                      valueOf(me.group[size_t(j)], 0,
                              ((r * local + e) * kCapacity + c) * kHidden + h))
                << w << " " << e << " " << j << " " << c << " " << h;
    // The combine undoes the dispatch, bit for bit.
    EXPECT_EQ(me.buffers.at("ep.back"), inputOf(int(w), 0)) << w;
    EXPECT_EQ(me.buffers.at("ep.dx"), reference(inputs(1), r, local, 1, 0.5f))
        << "scaled combine, world rank " << w;
    EXPECT_EQ(me.buffers.at("s.out"), reference(inputs(2), r, 2, 3, 1.0f))
        << "strided both ways, world rank " << w;
    EXPECT_EQ(me.buffers.at("h.out"), reference(inputs(3), r, 2, 2, 0.5f))
        << "scaled bf16, world rank " << w;
  }
}

TEST(ExecutorAllToAll, DispatchCombineAndStridedMatchTheDefinition) {
  Plan plan = makeAllToAllPlan({{"ep", 4}}, /*axes=*/1, /*d=*/4);
  ASSERT_NO_THROW(validatePlan(plan));
  EXPECT_NO_THROW(verifyPlanSchedule(plan));
  expectReference(runAll(plan, 4, 1, /*overlap=*/false), 4);
}

TEST(ExecutorAllToAll, OverlappedLaneGivesTheSameBits) {
  Plan plan = makeAllToAllPlan({{"ep", 4}}, 1, 4);
  expectReference(runAll(plan, 4, 1, /*overlap=*/true), 4);
}

// On dp=2 x ep=2 the all-to-all over ep (mask 2) exchanges within
// {2*dp, 2*dp + 1} only: the reference built from those two ranks' inputs
// would not match a mix with the other dp group's.
TEST(ExecutorAllToAll, RunsOverOneAxisOfA2x2Mesh) {
  Plan plan = makeAllToAllPlan({{"dp", 2}, {"ep", 2}}, /*axes=*/2, /*d=*/2);
  ASSERT_NO_THROW(validatePlan(plan));
  std::vector<RankResult> results = runAll(plan, 4, 2, false);
  for (int w = 0; w < 4; ++w)
    EXPECT_EQ(results[size_t(w)].group,
              (std::vector<int>{2 * (w / 2), 2 * (w / 2) + 1}));
  expectReference(results, 2);
}

// What the communicator counts is what the plan's byte formula says: each
// rank sends (D-1)/D of its input per call (ringBytesSent's AllToAll,
// ringShareBytes), whatever the packing.
TEST(ExecutorAllToAll, CountedBytesEqualTheRingFormula) {
  for (int64_t d : {4, 2}) {
    const int64_t axes = d == 4 ? 1 : 2;
    Plan plan = d == 4 ? makeAllToAllPlan({{"ep", 4}}, 1, 4)
                       : makeAllToAllPlan({{"dp", 2}, {"ep", 2}}, 2, 2);
    std::vector<RankResult> results = runAll(plan, 4, axes, false);
    // dispatch, roundtrip (2), combine, strided f32: f32 inputs of
    // kElements; strided bf16: one of 2-byte elements.
    const uint64_t f32Bytes = uint64_t(kElements) * 4;
    const uint64_t bf16Bytes = uint64_t(kElements) * 2;
    for (size_t w = 0; w < results.size(); ++w) {
      const CommStats &s = results[w].stats;
      const int r = results[w].groupRank;
      const uint64_t want =
          5 * ringBytesSent(CollectiveKind::AllToAll, f32Bytes, 4, d, r) +
          ringBytesSent(CollectiveKind::AllToAll, bf16Bytes, 2, d, r);
      EXPECT_EQ(s.sent(CollectiveKind::AllToAll), want) << d << " " << w;
      EXPECT_EQ(want, 5 * dsc::ringShareBytes(f32Bytes, d) +
                          dsc::ringShareBytes(bf16Bytes, d));
      EXPECT_EQ(want,
                uint64_t(d - 1) * (5 * f32Bytes + bf16Bytes) / uint64_t(d));
      EXPECT_EQ(s.count(CollectiveKind::AllToAll), 6u) << d << " " << w;
    }
  }
}

} // namespace
