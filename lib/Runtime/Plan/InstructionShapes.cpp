//===- InstructionShapes.cpp - Each opcode's shape rules ------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What each kernel needs of its operands' shapes and of its attributes'
// values beyond their kind (a matmul's m, n, k against its buffers, a
// slice's box inside its tensor, a collective's chunks), checked after the
// signature so that every operand and attribute read here exists.
//
//===----------------------------------------------------------------------===//

#include "InstructionChecker.h"

#include "dsc/Support/CollectiveBytes.h"

#include <algorithm>
#include <limits>
#include <vector>

using namespace dsc::rt;
using namespace dsc::rt::verifier;

void InstructionChecker::attentionShapes(size_t numIn, size_t numOut) {
  const Buffer &q = in(0);
  if (q.shape.size() != 3)
    fail(inName(0) + " must be [batch, seq, hidden]");
  for (size_t i = 1; i < numIn; ++i)
    sameShape(q, inName(0), in(i), inName(i));
  for (size_t i = 0; i < numOut; ++i)
    sameShape(q, inName(0), out(i), outName(i));
  int64_t heads = intAt("heads", 1, q.shape[2] > 0 ? q.shape[2] : 1);
  if (q.shape[2] % heads != 0)
    fail("hidden " + std::to_string(q.shape[2]) +
         " is not divisible by heads " + std::to_string(heads));
  floatAt("dropout", 0.0, 1.0, /*hiOpen=*/true);
  if (intAt("window", 0, INT64_MAX) > 0 && !intNamed("causal"))
    fail("a sliding window needs a causal attention");
}

void InstructionChecker::lseShape(const Buffer &lse, const std::string &name) {
  const Buffer &q = in(0);
  const int64_t heads = intAt("heads", 1, INT64_MAX);
  if (lse.shape != std::vector<int64_t>{q.shape[0], heads, q.shape[1]})
    fail(name + " must be [batch, heads, seq] = [" +
         std::to_string(q.shape[0]) + ", " + std::to_string(heads) + ", " +
         std::to_string(q.shape[1]) + "]");
  const DType want = q.dtype == DType::F64 ? DType::F64 : DType::F32;
  if (lse.dtype != want)
    fail(name + " must be " + dtypeName(want) + " (the scores' logsumexp of " +
         dtypeName(q.dtype) + " q), got " + dtypeName(lse.dtype));
}

void InstructionChecker::sliceShapes(const Buffer &whole,
                                     const std::string &wholeName,
                                     const Buffer &part,
                                     const std::string &partName) {
  if (part.shape.size() != whole.shape.size())
    fail(partName + " must have the rank of " + wholeName);
  for (size_t d = 0; d < whole.shape.size(); ++d) {
    int64_t off = listAt("offsets", d);
    if (off < 0 || part.shape[d] > whole.shape[d] ||
        off > whole.shape[d] - part.shape[d])
      fail("offset " + std::to_string(off) + " + size " +
           std::to_string(part.shape[d]) + " in dim " + std::to_string(d) +
           " exceeds " + wholeName);
  }
}

void InstructionChecker::shapes() {
  switch (inst.opcode) {
  case Opcode::Embedding:
  case Opcode::EmbeddingGrad:
  case Opcode::VocabParallelEmbedding:
  case Opcode::VocabParallelEmbeddingGrad: {
    bool fwd = inst.opcode == Opcode::Embedding ||
               inst.opcode == Opcode::VocabParallelEmbedding;
    const Buffer &table = fwd ? in(0) : out(0);
    std::string tableName = fwd ? inName(0) : outName(0);
    const Buffer &y = fwd ? out(0) : in(0);
    std::string yName = fwd ? outName(0) : inName(0);
    if (table.shape.size() != 2)
      fail(tableName + " must be [vocab, hidden]");
    int64_t h = table.shape[1];
    if (last(y) != h || y.shape.empty())
      fail(yName + " must end in hidden " + std::to_string(h));
    elements(y, yName, mulChecked(n(in(1)), h), "ids x hidden");
    break;
  }
  case Opcode::PositionEmbedding:
  case Opcode::PositionEmbeddingGrad: {
    bool fwd = inst.opcode == Opcode::PositionEmbedding;
    const Buffer &table = fwd ? in(0) : out(0);
    std::string tableName = fwd ? inName(0) : outName(0);
    const Buffer &y = fwd ? out(0) : in(0);
    std::string yName = fwd ? outName(0) : inName(0);
    if (table.shape.size() != 2)
      fail(tableName + " must be [positions, hidden]");
    int64_t batch = intAt("batch", 1, INT32_MAX);
    int64_t seq = intAt("seq", 1, table.shape[0]);
    if (last(y) != table.shape[1] || y.shape.empty())
      fail(yName + " must end in hidden " + std::to_string(table.shape[1]));
    elements(y, yName, mulChecked(mulChecked(batch, seq), table.shape[1]),
             "batch x seq x hidden");
    break;
  }
  case Opcode::Matmul: {
    int64_t batch = intAt("batch", 1, INT64_MAX);
    int64_t m = intAt("m", 1, INT64_MAX);
    int64_t nn = intAt("n", 1, INT64_MAX);
    int64_t k = intAt("k", 1, INT64_MAX);
    bool ta = intNamed("transA"), tb = intNamed("transB");
    bool bc = intNamed("broadcastB");
    elements(in(0), inName(0), mulChecked(mulChecked(batch, m), k),
             "batch x m x k");
    elements(in(1), inName(1), mulChecked(mulChecked(bc ? 1 : batch, k), nn),
             bc ? "k x n, broadcast" : "batch x k x n");
    elements(out(0), outName(0), mulChecked(mulChecked(batch, m), nn),
             "batch x m x n");
    if (last(in(0)) != (ta ? m : k))
      fail(inName(0) + " must end in " + (ta ? "m = " : "k = ") +
           std::to_string(ta ? m : k) + (ta ? " (transA)" : ""));
    if (last(in(1)) != (tb ? k : nn))
      fail(inName(1) + " must end in " + (tb ? "k = " : "n = ") +
           std::to_string(tb ? k : nn) + (tb ? " (transB)" : ""));
    if (last(out(0)) != nn)
      fail(outName(0) + " must end in n = " + std::to_string(nn));
    break;
  }
  case Opcode::Add:
  case Opcode::Mul:
    sameShape(in(0), inName(0), in(1), inName(1));
    sameShape(in(0), inName(0), out(0), outName(0));
    break;
  case Opcode::BiasAdd:
    minRank(in(0), inName(0), 1);
    vectorOf(in(1), inName(1), last(in(0)), "the last dim of x");
    sameShape(in(0), inName(0), out(0), outName(0));
    break;
  case Opcode::BiasGelu:
    minRank(in(0), inName(0), 1);
    vectorOf(in(1), inName(1), last(in(0)), "the last dim of x");
    sameShape(in(0), inName(0), out(0), outName(0));
    break;
  case Opcode::BiasGeluGrad:
    minRank(in(0), inName(0), 1);
    vectorOf(in(1), inName(1), last(in(0)), "the last dim of x");
    sameShape(in(0), inName(0), in(2), inName(2));
    sameShape(in(0), inName(0), out(0), outName(0));
    break;
  case Opcode::Gelu:
  case Opcode::GeluExact:
  case Opcode::Dropout:
  case Opcode::DropoutChunk:
  case Opcode::Accumulate:
    sameShape(in(0), inName(0), out(0), outName(0));
    if (inst.opcode == Opcode::Dropout || inst.opcode == Opcode::DropoutChunk)
      floatAt("p", 0.0, 1.0, /*hiOpen=*/true);
    if (inst.opcode == Opcode::DropoutChunk)
      meshGroupAt("axes", "chunked dropout");
    break;
  case Opcode::Softmax:
    minRank(in(0), inName(0), 1);
    sameShape(in(0), inName(0), out(0), outName(0));
    break;
  case Opcode::Swiglu:
  case Opcode::SwigluGrad: {
    // x [..., 2F]; y or dy [..., F]; dx like x.
    const Buffer &half = inst.opcode == Opcode::Swiglu ? out(0) : in(1);
    const std::string halfName =
        inst.opcode == Opcode::Swiglu ? outName(0) : inName(1);
    minRank(in(0), inName(0), 1);
    if (half.shape.size() != in(0).shape.size() ||
        !std::equal(half.shape.begin(), half.shape.end() - 1,
                    in(0).shape.begin()) ||
        2 * last(half) != last(in(0)))
      fail(halfName + " must be " + inName(0) +
           " with half its last dim ([up | gate] -> gated)");
    if (inst.opcode == Opcode::SwigluGrad)
      sameShape(in(0), inName(0), out(0), outName(0));
    break;
  }
  case Opcode::RepeatHeads:
  case Opcode::RepeatHeadsGrad: {
    const bool fwd = inst.opcode == Opcode::RepeatHeads;
    const Buffer &narrow = fwd ? in(0) : out(0), &wide = fwd ? out(0) : in(0);
    const std::string narrowName = fwd ? inName(0) : outName(0);
    minRank(narrow, narrowName, 1);
    const int64_t c = last(narrow);
    const int64_t headDim = intAt("headDim", 1, c > 0 ? c : 1);
    const int64_t repeats = intAt("repeats", 1, 1 << 20);
    if (c % headDim != 0)
      fail("headDim " + std::to_string(headDim) +
           " does not divide the last dim " + std::to_string(c));
    if (wide.shape.size() != narrow.shape.size() ||
        !std::equal(wide.shape.begin(), wide.shape.end() - 1,
                    narrow.shape.begin()) ||
        last(wide) != mulChecked(c, repeats))
      fail((fwd ? outName(0) : inName(0)) + " must be " + narrowName +
           " with its last dim times repeats");
    break;
  }
  case Opcode::Rotary: {
    minRank(in(0), inName(0), 2);
    sameShape(in(0), inName(0), out(0), outName(0));
    int64_t c = last(in(0));
    int64_t headDim = intAt("headDim", 1, c > 0 ? c : 1);
    if (c % headDim != 0)
      fail("headDim " + std::to_string(headDim) +
           " does not divide the last dim " + std::to_string(c));
    if (intAt("rotaryDims", 2, headDim) % 2 != 0)
      fail("rotaryDims must be even");
    floatAt("base", 1.0, 1e30);
    break;
  }
  case Opcode::RmsNorm:
    minRank(in(0), inName(0), 1);
    vectorOf(in(1), inName(1), last(in(0)), "the last dim of x");
    sameShape(in(0), inName(0), out(0), outName(0));
    floatAt("eps", 0.0, 1.0);
    break;
  case Opcode::LayerNorm:
    minRank(in(0), inName(0), 1);
    vectorOf(in(1), inName(1), last(in(0)), "the last dim of x");
    vectorOf(in(2), inName(2), last(in(0)), "the last dim of x");
    sameShape(in(0), inName(0), out(0), outName(0));
    floatAt("eps", 0.0, 1.0);
    break;
  case Opcode::Attention:
    attentionShapes(3, 1);
    break;
  case Opcode::AttentionGrad:
    attentionShapes(4, 3);
    break;
  case Opcode::AttentionLse:
    attentionShapes(3, 1);
    lseShape(out(1), outName(1));
    break;
  case Opcode::AttentionGradLse:
    attentionShapes(5, 3);
    lseShape(in(5), inName(5));
    break;
  case Opcode::CrossEntropy:
  case Opcode::CrossEntropyGrad:
  case Opcode::VocabParallelCrossEntropy:
  case Opcode::VocabParallelCrossEntropyGrad: {
    const Buffer &logits = in(0);
    minRank(logits, inName(0), 1);
    int64_t v = last(logits);
    if (v < 1)
      fail(inName(0) + " has an empty vocab dim");
    elements(in(1), inName(1), n(logits) / v, "one target per logits row");
    // classes counts the whole vocabulary's: a vocabulary-parallel rank
    // holds 1/group of its columns.
    const bool vocabParallel =
        inst.opcode == Opcode::VocabParallelCrossEntropy ||
        inst.opcode == Opcode::VocabParallelCrossEntropyGrad;
    intAt("classes", 0,
          vocabParallel ? v * meshGroupAt("axes", "vocabulary-parallel "
                                                  "cross-entropy")
                        : v);
    if (inst.opcode == Opcode::CrossEntropy ||
        inst.opcode == Opcode::VocabParallelCrossEntropy) {
      scalar(out(0), outName(0));
    } else {
      scalar(in(2), inName(2));
      sameShape(logits, inName(0), out(0), outName(0));
    }
    break;
  }
  case Opcode::Copy:
    elements(out(0), outName(0), n(in(0)), "a copy keeps the element count");
    break;
  case Opcode::Transfer: {
    const Buffer &x = in(0), &y = out(0);
    if (plan.arenas[x.arena].tier == plan.arenas[y.arena].tier)
      fail(inName(0) + " and " + outName(0) + " are both in the " +
           tierName(plan.arenas[x.arena].tier) +
           " tier; a transfer changes the tier");
    if (plan.arenas[x.arena].tier == Tier::Nvme &&
        plan.arenas[y.arena].tier == Tier::Nvme)
      fail("both sides are on nvme");
    const int64_t chunk = intNamed("chunk");
    if (chunk == 0) {
      elements(y, outName(0), n(x), "a whole transfer keeps the count");
      break;
    }
    const int64_t group = meshGroupAt("axes", "chunked transfer");
    const Buffer &whole = chunk == 1 ? x : y, &part = chunk == 1 ? y : x;
    if (n(part) * group != n(whole))
      fail("the chunked side has " + std::to_string(n(part)) +
           " elements; the chunk over " + std::to_string(group) +
           " ranks of the other's " + std::to_string(n(whole)) + " has " +
           std::to_string(n(whole) / group));
    break;
  }
  case Opcode::Cast:
    elements(out(0), outName(0), n(in(0)), "a cast keeps the element count");
    break;
  case Opcode::Transpose: {
    const Buffer &x = in(0), &y = out(0);
    std::vector<bool> seen(x.shape.size());
    const ops::Transpose tr = ops::Transpose::decode(inst);
    const std::vector<int64_t> &perm = tr.permutation;
    for (size_t i = 0; i < perm.size(); ++i) {
      int64_t p = perm[i];
      checkRange(p, "permutation", 0, int64_t(x.shape.size()) - 1);
      if (seen[p])
        fail("ints are not a permutation: " + std::to_string(p) +
             " appears twice");
      seen[p] = true;
    }
    if (y.shape.size() != x.shape.size())
      fail(outName(0) + " must have the rank of " + inName(0));
    for (size_t i = 0; i < perm.size(); ++i)
      if (y.shape[i] != x.shape[perm[i]])
        fail(outName(0) + " dim " + std::to_string(i) + " must be " +
             std::to_string(x.shape[perm[i]]) + " (input dim " +
             std::to_string(perm[i]) + ")");
    break;
  }
  case Opcode::Slice:
    sliceShapes(in(0), inName(0), out(0), outName(0));
    break;
  case Opcode::SliceGrad:
    sliceShapes(out(0), outName(0), in(0), inName(0));
    break;
  case Opcode::Concat: {
    const Buffer &y = out(0);
    int64_t dim = intAt("dim", 0, int64_t(y.shape.size()) - 1);
    int64_t total = 0;
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      const Buffer &x = in(i);
      if (x.shape.size() != y.shape.size())
        fail(inName(i) + " must have the rank of " + outName(0));
      for (size_t d = 0; d < y.shape.size(); ++d)
        if (int64_t(d) != dim && x.shape[d] != y.shape[d])
          fail(inName(i) + " differs from " + outName(0) + " in dim " +
               std::to_string(d) + ", which is not the concat dim");
      if (x.shape[dim] > INT64_MAX - total)
        fail("the inputs' sizes in dim " + std::to_string(dim) + " overflow");
      total += x.shape[dim];
    }
    if (total != y.shape[dim])
      fail("the inputs sum to " + std::to_string(total) + " in dim " +
           std::to_string(dim) + " but " + outName(0) + " has " +
           std::to_string(y.shape[dim]));
    break;
  }
  case Opcode::BiasGrad:
    minRank(in(0), inName(0), 1);
    vectorOf(out(0), outName(0), last(in(0)), "the last dim of dy");
    break;
  case Opcode::GeluGrad:
  case Opcode::GeluExactGrad:
  case Opcode::SoftmaxGrad:
    minRank(in(0), inName(0), 1);
    sameShape(in(0), inName(0), in(1), inName(1));
    sameShape(in(0), inName(0), out(0), outName(0));
    break;
  case Opcode::RmsNormGrad:
  case Opcode::LayerNormGrad: {
    // x, gamma, dy -> dx, dgamma (and dbeta for layer norm).
    minRank(in(0), inName(0), 1);
    int64_t c = last(in(0));
    vectorOf(in(1), inName(1), c, "the last dim of x");
    sameShape(in(0), inName(0), in(2), inName(2));
    sameShape(in(0), inName(0), out(0), outName(0));
    for (size_t o = 1; o < inst.outputs.size(); ++o)
      vectorOf(out(o), outName(o), c, "the last dim of x");
    floatAt("eps", 0.0, 1.0);
    break;
  }
  case Opcode::Zero:
    break;
  case Opcode::GlobalNormClip:
    // Each gradient is counted and scaled once.
    normOperands();
    break;
  case Opcode::GlobalNormClipParts: {
    normOperands();
    const int64_t axes = intNamed("axes");
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      const int64_t chunkAxes = listAt("parts", 3 * i),
                    inBuffer = listAt("parts", 3 * i + 1),
                    splitAxes = listAt("parts", 3 * i + 2);
      checkRange(inBuffer, "inBuffer", 0, 1);
      // The parts must be parts within the norm's group.
      if ((chunkAxes | splitAxes) & ~axes || (chunkAxes & splitAxes))
        fail(inName(i) + " has chunk axes " + std::to_string(chunkAxes) +
             " and split axes " + std::to_string(splitAxes) +
             ", which must be disjoint masks within the norm's axes " +
             std::to_string(axes));
      const int64_t chunks = meshGroupSize(chunkAxes);
      if (!inBuffer && numElements(in(i).shape) % chunks != 0)
        fail(inName(i) + " has " + std::to_string(numElements(in(i).shape)) +
             " elements, not divisible into " + std::to_string(chunks) +
             " chunks");
    }
    break;
  }
  case Opcode::LearningRate: {
    scalar(out(0), outName(0));
    const int64_t warmup = intAt("warmup", 0, INT64_MAX);
    const int64_t total = intAt("total", 0, INT64_MAX);
    // GPT-NeoX's decays divide by total - warmup.
    const auto kind = LrScheduleKind(intNamed("kind"));
    if ((kind == LrScheduleKind::AnnealingLinear ||
         kind == LrScheduleKind::AnnealingCosine ||
         kind == LrScheduleKind::AnnealingExponential) &&
        total <= warmup)
      fail("a decaying schedule needs total (" + std::to_string(total) +
           ") > warmup (" + std::to_string(warmup) + ")");
    floatAt("base", 0.0, std::numeric_limits<double>::max());
    floatAt("warmupStart", 0.0, std::numeric_limits<double>::max());
    floatAt("decayEnd", 0.0, std::numeric_limits<double>::max());
    break;
  }
  case Opcode::CyclicLearningRate: {
    scalar(out(0), outName(0));
    intAt("firstStairs", 0, INT64_MAX);
    intAt("secondStairs", 0, INT64_MAX);
    const double maxRate = std::numeric_limits<double>::max();
    const double minLr = floatAt("minLr", 0.0, maxRate);
    if (!(minLr > 0))
      fail("minLr must be > 0");
    floatAt("maxLr", minLr, maxRate);
    if (!(floatAt("firstSize", 0.0, maxRate) > 0))
      fail("firstSize must be > 0");
    floatAt("secondSize", 0.0, maxRate);
    floatAt("decaySize", 0.0, maxRate);
    floatAt("rate", -maxRate, maxRate);
    break;
  }
  case Opcode::CyclicMomentum: {
    scalar(out(0), outName(0));
    intAt("firstStairs", 0, INT64_MAX);
    intAt("secondStairs", 0, INT64_MAX);
    const double maxSize = std::numeric_limits<double>::max();
    const double minMom = floatAt("minMom", 0.0, 1.0);
    floatAt("maxMom", minMom, 1.0);
    if (!(floatAt("firstSize", 0.0, maxSize) > 0))
      fail("firstSize must be > 0");
    floatAt("secondSize", 0.0, maxSize);
    floatAt("decaySize", 0.0, maxSize);
    floatAt("rate", -maxSize, maxSize);
    break;
  }
  case Opcode::AllReduce:
  case Opcode::AllGather:
  case Opcode::ReduceScatter: {
    int64_t groupSize = meshGroupAt("axes", "collective");
    if (inst.opcode == Opcode::AllReduce)
      break;
    for (size_t i = 0; i < inst.inputs.size(); ++i)
      if (numElements(in(i).shape) % groupSize != 0)
        fail(inName(i) + " has " + std::to_string(numElements(in(i).shape)) +
             " elements, not divisible into the group's " +
             std::to_string(groupSize) + " chunks");
    break;
  }
  case Opcode::ReduceScatterAccumulate:
  case Opcode::ReduceScatterChunks:
  case Opcode::TakeChunk: {
    // The output is the rank's chunk of the input.
    int64_t groupSize = meshGroupAt(
        "axes", inst.opcode == Opcode::TakeChunk ? "chunk" : "collective");
    if (numElements(out(0).shape) * groupSize != numElements(in(0).shape))
      fail(outName(0) + " has " + std::to_string(numElements(out(0).shape)) +
           " elements; the chunk of " + inName(0) + " over " +
           std::to_string(groupSize) + " ranks has " +
           std::to_string(numElements(in(0).shape) / groupSize));
    break;
  }
  case Opcode::GatherParameter:
  case Opcode::GatherChunks: {
    // The output is the group's chunks, in group-rank order.
    int64_t groupSize = meshGroupAt("axes", "collective");
    const Buffer &chunk = in(0);
    if (inst.opcode == Opcode::GatherParameter) {
      // A temporary: the device copy of a chunk offloaded to host or NVMe.
      if (chunk.role != BufferRole::Parameter &&
          chunk.role != BufferRole::Temporary)
        fail(inName(0) + " has role " + roleName(chunk.role) +
             "; only a parameter's chunk (or its fetched copy) is gathered");
      if (chunk.layout.chunkAxes != intNamed("axes"))
        fail(inName(0) + " is chunked over mesh axes mask " +
             std::to_string(chunk.layout.chunkAxes) +
             " but the gather runs over mask " +
             std::to_string(intNamed("axes")));
      if (out(0).role != BufferRole::Temporary)
        fail(outName(0) + " has role " + roleName(out(0).role) +
             "; the gathered parameter must be a temporary");
    }
    if (numElements(out(0).shape) != numElements(chunk.shape) * groupSize)
      fail(outName(0) + " has " + std::to_string(numElements(out(0).shape)) +
           " elements; the " + std::to_string(groupSize) + " chunks of " +
           inName(0) + " (" + std::to_string(numElements(chunk.shape)) +
           " elements each) make " +
           std::to_string(numElements(chunk.shape) * groupSize));
    break;
  }
  case Opcode::OnebitAdam:
  case Opcode::AdamMomentum:
  case Opcode::FrozenAdam: {
    // f32 states of one shape (DeepSpeed's arithmetic is f32), lr a scalar.
    const bool onebit = inst.opcode == Opcode::OnebitAdam;
    const bool frozen = inst.opcode == Opcode::FrozenAdam;
    const Buffer &like = out(0);
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      const bool isLr = (onebit && i == 1) || (frozen && i == 2);
      if (isLr)
        scalar(in(i), inName(i));
      else
        sameShape(like, outName(0), in(i), inName(i));
    }
    for (size_t o = 1; o < inst.outputs.size(); ++o)
      sameShape(like, outName(0), out(o), outName(o));
    if (like.dtype != DType::F32)
      fail(outName(0) + " is " + dtypeName(like.dtype) +
           "; 1-bit Adam's states are f32");
    if (onebit)
      adamFloats();
    if (inst.opcode == Opcode::AdamMomentum)
      floatAt("beta1", 0.0, 1.0, /*hiOpen=*/true);
    if (frozen) {
      floatAt("eps", 0.0, 1.0);
      floatAt("wd", 0.0, std::numeric_limits<double>::max());
    }
    break;
  }
  case Opcode::OnebitLamb:
  case Opcode::LambFreezeScale:
  case Opcode::LambMomentum:
  case Opcode::FrozenLamb: {
    // f32 states of one shape, lr a scalar, the tensor's f64 coeffs [5].
    const Opcode op = inst.opcode;
    const bool freeze = op == Opcode::LambFreezeScale;
    const Buffer &like = freeze ? in(0) : out(0);
    const std::string likeName = freeze ? inName(0) : outName(0);
    auto state = [&](const Buffer &b, const std::string &name) {
      sameShape(like, likeName, b, name);
      if (b.dtype != DType::F32)
        fail(name + " is " + dtypeName(b.dtype) +
             "; 1-bit LAMB's states are f32");
    };
    auto coeffs = [&](const Buffer &b, const std::string &name) {
      vectorOf(b, name, 5, "a 1-bit LAMB tensor's coefficients");
      if (b.dtype != DType::F64)
        fail(name + " is " + dtypeName(b.dtype) +
             "; 1-bit LAMB's coefficients are f64 (DeepSpeed's doubles)");
    };
    const size_t lastOut = inst.outputs.size() - 1;
    // Which input is lr, and which operand the coefficients.
    const size_t lrIn = op == Opcode::OnebitLamb   ? 1
                        : op == Opcode::FrozenLamb ? 2
                                                   : inst.inputs.size();
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      if (i == lrIn)
        scalar(in(i), inName(i));
      else if (op == Opcode::LambMomentum && i == 1)
        coeffs(in(i), inName(i));
      else
        state(in(i), inName(i));
    }
    for (size_t o = 0; o < inst.outputs.size(); ++o) {
      if (op != Opcode::LambMomentum && o == lastOut)
        coeffs(out(o), outName(o));
      else
        state(out(o), outName(o));
    }
    const double hi = std::numeric_limits<double>::max();
    if (op == Opcode::OnebitLamb) {
      adamFloats();
      floatAt("maxCoeff", floatAt("minCoeff", 0.0, hi), hi);
      floatAt("coeffBeta", 0.0, 1.0);
    }
    if (op == Opcode::LambMomentum)
      floatAt("beta1", 0.0, 1.0, /*hiOpen=*/true);
    if (op == Opcode::FrozenLamb) {
      adamFloats();
      floatAt("factorMax", floatAt("factorMin", 0.0, hi), hi);
      floatAt("factorThreshold", 0.0, 1.0);
    }
    break;
  }
  case Opcode::ZeroOneAdamUpdate:
  case Opcode::AddLearningRate:
  case Opcode::ZeroOneAdamRewind:
  case Opcode::ZeroOneAdamResync: {
    // f32 states of the parameter's shape, lr a scalar, the sum f64 [1].
    const Opcode op = inst.opcode;
    auto sum = [&](const Buffer &b, const std::string &name) {
      vectorOf(b, name, 1, "0/1 Adam's sum of learning rates");
      if (b.dtype != DType::F64)
        fail(name + " is " + dtypeName(b.dtype) +
             "; 0/1 Adam's sum of learning rates is f64 (DeepSpeed's "
             "double)");
    };
    if (op == Opcode::AddLearningRate) {
      scalar(in(0), inName(0));
      sum(out(0), outName(0));
      break;
    }
    const Buffer &like = out(0);
    auto state = [&](const Buffer &b, const std::string &name) {
      sameShape(like, outName(0), b, name);
      if (b.dtype != DType::F32)
        fail(name + " is " + dtypeName(b.dtype) +
             "; 0/1 Adam's states are f32");
    };
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      if (op == Opcode::ZeroOneAdamUpdate && i == 2)
        scalar(in(i), inName(i));
      else if (op == Opcode::ZeroOneAdamResync && i == 1)
        sum(in(i), inName(i));
      else
        state(in(i), inName(i));
    }
    for (size_t o = 0; o < inst.outputs.size(); ++o)
      state(out(o), outName(o));
    floatAt("eps", 0.0, 1.0);
    if (op == Opcode::ZeroOneAdamUpdate)
      floatAt("wd", 0.0, std::numeric_limits<double>::max());
    break;
  }
  case Opcode::LambScalingCoeffs:
    for (size_t o = 0; o < inst.outputs.size(); ++o) {
      vectorOf(out(o), outName(o), 5, "a 1-bit LAMB tensor's coefficients");
      if (out(o).dtype != DType::F64)
        fail(outName(o) + " is " + dtypeName(out(o).dtype) +
             "; 1-bit LAMB's coefficients are f64 (DeepSpeed's doubles)");
    }
    break;
  case Opcode::OnebitAdamShard:
  case Opcode::FrozenAdamShard: {
    // ZeRO-1/2 under 1-bit Adam: param, m (and the warm-up's grad) whole,
    // v this rank's chunk of the group's D; f32, lr a scalar.
    const bool warmUp = inst.opcode == Opcode::OnebitAdamShard;
    const int64_t groupSize = meshGroupAt("axes", "sharded update");
    const Buffer &param = out(0);
    const int64_t whole = n(param);
    if (whole % groupSize != 0)
      fail(outName(0) + " has " + std::to_string(whole) +
           " elements, not divisible into the group's " +
           std::to_string(groupSize) + " shards");
    if (warmUp) {
      sameShape(param, outName(0), in(0), inName(0));
      sameShape(param, outName(0), out(1), outName(1));
      scalar(in(1), inName(1));
    } else {
      sameShape(param, outName(0), in(0), inName(0));
      scalar(in(2), inName(2));
    }
    const Buffer &v = warmUp ? out(2) : in(1);
    const std::string vName = warmUp ? outName(2) : inName(1);
    if (n(v) * groupSize != whole)
      fail(vName + " has " + std::to_string(n(v)) + " elements; a shard of " +
           std::to_string(whole) + " over " + std::to_string(groupSize) +
           " ranks has " + std::to_string(whole / groupSize));
    for (const Buffer *b : {&param, &v})
      if (b->dtype != DType::F32)
        fail(b->name + " is " + dtypeName(b->dtype) +
             "; 1-bit Adam's states are f32");
    if (warmUp) {
      adamFloats();
    } else {
      floatAt("eps", 0.0, 1.0);
      floatAt("wd", 0.0, std::numeric_limits<double>::max());
    }
    break;
  }
  case Opcode::CompressedAllReduce: {
    // The errors, then the bucket's states (n elements in all): the worker
    // error n padded to D·lcm(D, 8), the server error the padded n / D;
    // all f32.
    const int64_t groupSize = meshGroupAt("axes", "collective");
    int64_t elements = 0;
    for (size_t o = 0; o < inst.outputs.size(); ++o) {
      if (out(o).dtype != DType::F32)
        fail(outName(o) + " is " + dtypeName(out(o).dtype) +
             "; the compressed all-reduce works on f32");
      if (o >= 2)
        elements += n(out(o));
    }
    const int64_t padded = ::dsc::onebitPaddedSize(elements, groupSize);
    for (auto [o, want] : {std::make_pair(size_t(0), padded),
                           std::make_pair(size_t(1), padded / groupSize)})
      if (n(out(o)) != want)
        fail(outName(o) + " has " + std::to_string(n(out(o))) +
             " elements; for the bucket's " + std::to_string(elements) +
             " elements over " + std::to_string(groupSize) +
             " ranks (padded to " + std::to_string(padded) + ") it needs " +
             std::to_string(want));
    break;
  }
  case Opcode::AllToAll: {
    // x and y hold the same elements, each viewed as [outer, D, run]: D
    // blocks of `outer` runs, block j to (from) group rank j.
    const int64_t groupSize = meshGroupAt("axes", "collective");
    const int64_t count = n(in(0));
    if (n(out(0)) != count)
      fail(outName(0) + " has " + std::to_string(n(out(0))) + " elements but " +
           inName(0) + " has " + std::to_string(count) +
           "; an all-to-all moves every element once, so they must be equal");
    for (const char *outer : {"sendOuter", "recvOuter"}) {
      const int64_t o = intAt(outer, 1, INT64_MAX);
      const int64_t runs = mulChecked(o, groupSize);
      const std::string product = std::string(outer) + " " + std::to_string(o) +
                                  " x group size " + std::to_string(groupSize);
      if (runs < 0)
        fail(product + " overflows");
      if (count % runs != 0)
        fail(product + " = " + std::to_string(runs) +
             " runs do not divide the " + std::to_string(count) +
             " elements of " + inName(0));
    }
    // Any finite scale: the backends scale every float dtype but f64 on a
    // GPU (whose plans have no f64).
    floatAt("scale", -std::numeric_limits<double>::max(),
            std::numeric_limits<double>::max());
    break;
  }
  case Opcode::AdamWShard:
  case Opcode::AdamWShardScheduledBeta1: {
    scalar(in(1), inName(1));
    if (inst.opcode == Opcode::AdamWShardScheduledBeta1)
      scalar(in(2), inName(2));
    int64_t groupSize = meshGroupAt("axes", "sharded update");
    int64_t n = numElements(out(0).shape);
    if (n % groupSize != 0)
      fail(outName(0) + " has " + std::to_string(n) +
           " elements, not divisible into the group's " +
           std::to_string(groupSize) + " shards");
    if (numElements(in(0).shape) != n &&
        numElements(in(0).shape) * groupSize != n)
      fail(inName(0) + " has " + std::to_string(numElements(in(0).shape)) +
           " elements: the whole gradient (" + std::to_string(n) +
           ") or this rank's chunk (" + std::to_string(n / groupSize) +
           ") was expected");
    for (size_t o = 1; o < 3; ++o)
      if (numElements(out(o).shape) * groupSize != n)
        fail(outName(o) + " has " + std::to_string(numElements(out(o).shape)) +
             " elements; a shard of " + std::to_string(n) + " over " +
             std::to_string(groupSize) + " ranks has " +
             std::to_string(n / groupSize));
    adamFloats();
    break;
  }
  case Opcode::MoeRoute:
  case Opcode::MoeRouteGrad: {
    // logits [..., E]; slots and gates (or their gradient) [E, C]; the aux
    // loss (or its gradient) a scalar; the logits' gradient their shape.
    const bool fwd = inst.opcode == Opcode::MoeRoute;
    const Buffer &logits = in(0);
    const Buffer &slots = fwd ? out(0) : in(1);
    const std::string slotsName = fwd ? outName(0) : inName(1);
    minRank(logits, inName(0), 1);
    const int64_t experts = last(logits),
                  tokens = n(logits) / std::max<int64_t>(experts, 1);
    if (slots.shape.size() != 2 || slots.shape[0] != experts)
      fail(slotsName + " must be [experts, capacity] with experts " +
           std::to_string(experts) + " (the logits' last dimension)");
    const int64_t capacity =
        intAt("capacity", 1, std::numeric_limits<int32_t>::max());
    if (slots.shape[1] != capacity)
      fail(slotsName + " must have capacity " + std::to_string(capacity) +
           " columns");
    intAt("topK", 1, std::max<int64_t>(experts, 1));
    if (!intNamed("dropTokens") && capacity < tokens)
      fail("a router that drops nothing needs capacity >= its " +
           std::to_string(tokens) + " tokens, got " + std::to_string(capacity));
    if (tokens > std::numeric_limits<int32_t>::max())
      fail("more tokens than i32 slots can name");
    floatAt("auxCoeff", 0.0, std::numeric_limits<double>::max());
    floatAt("zCoeff", 0.0, std::numeric_limits<double>::max());
    if (fwd) {
      sameShape(slots, slotsName, out(1), outName(1));
      scalar(out(2), outName(2));
    } else {
      sameShape(slots, slotsName, in(2), inName(2));
      scalar(in(3), inName(3));
      sameShape(logits, inName(0), out(0), outName(0));
    }
    break;
  }
  case Opcode::MoeDispatch:
  case Opcode::MoeDispatchScaled:
  case Opcode::MoeCombine:
  case Opcode::MoeCombineSum:
  case Opcode::MoeGatesGrad: {
    // Token rows [..., H] against slot rows [E, C, H] and slots [E, C].
    const bool dispatch = inst.opcode == Opcode::MoeDispatch ||
                          inst.opcode == Opcode::MoeDispatchScaled;
    const Buffer &slots = in(1);
    if (slots.shape.size() != 2)
      fail(inName(1) + " must be [experts, capacity]");
    const Buffer &slotRows = dispatch ? out(0) : in(0);
    const std::string slotRowsName = dispatch ? outName(0) : inName(0);
    const bool gatesGrad = inst.opcode == Opcode::MoeGatesGrad;
    const Buffer &tokenRows = dispatch ? in(0) : gatesGrad ? in(2) : out(0);
    const std::string tokenRowsName = dispatch    ? inName(0)
                                      : gatesGrad ? inName(2)
                                                  : outName(0);
    minRank(tokenRows, tokenRowsName, 1);
    const int64_t hidden = last(tokenRows);
    if (slotRows.shape !=
        std::vector<int64_t>{slots.shape[0], slots.shape[1], hidden})
      fail(slotRowsName + " must be [experts, capacity, hidden] = [" +
           std::to_string(slots.shape[0]) + ", " +
           std::to_string(slots.shape[1]) + ", " + std::to_string(hidden) +
           "]");
    if (n(tokenRows) / std::max<int64_t>(hidden, 1) >
        std::numeric_limits<int32_t>::max())
      fail("more tokens than i32 slots can name");
    if (inst.opcode == Opcode::MoeDispatchScaled ||
        inst.opcode == Opcode::MoeCombine)
      sameShape(slots, inName(1), in(2), inName(2));
    if (gatesGrad)
      sameShape(slots, inName(1), out(0), outName(0));
    break;
  }
  case Opcode::AdamW:
  case Opcode::AdamWScheduledBeta1:
  case Opcode::Sgd: {
    scalar(in(1), inName(1));
    if (inst.opcode == Opcode::AdamWScheduledBeta1)
      scalar(in(2), inName(2));
    for (size_t o = 0; o < inst.outputs.size(); ++o)
      sameShape(in(0), inName(0), out(o), outName(o));
    if (inst.opcode != Opcode::Sgd) {
      adamFloats();
    } else {
      floatAt("momentum", 0.0, 1.0);
      floatAt("wd", 0.0, std::numeric_limits<double>::max());
    }
    break;
  }
  }
}
