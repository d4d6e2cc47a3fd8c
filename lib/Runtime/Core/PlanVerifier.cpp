//===- PlanVerifier.cpp - Semantic checks on a plan -----------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// validatePlan: everything the executor relies on, checked before it runs,
// so that no plan (hand-edited, corrupt, or from a buggy compiler) can make
// a kernel read or write outside its buffers. Each error names the buffer or
// the program, instruction index and instruction name at fault.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CpuKernels.h"
#include "dsc/Runtime/PlanIO.h"
#include "dsc/Runtime/ShardLayout.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_set>

using namespace dsc::rt;

namespace {

bool isFloat(DType t) { return t != DType::I32; }

/// a * b, or -1 on overflow or a negative factor.
int64_t mulChecked(int64_t a, int64_t b) {
  if (a < 0 || b < 0 || (b != 0 && a > std::numeric_limits<int64_t>::max() / b))
    return -1;
  return a * b;
}

std::string describeBuffer(const Plan &plan, uint32_t id) {
  const Buffer &b = plan.buffers[id];
  return "buffer " + std::to_string(id) + " '" + b.name + "' (" +
         dtypeName(b.dtype) + " " + shapeString(b.shape) + ")";
}

bool overlaps(const Buffer &a, const Buffer &b) {
  return a.arena == b.arena && a.bytes && b.bytes &&
         a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

void checkBuffer(const Plan &plan, size_t id) {
  const Buffer &b = plan.buffers[id];
  std::string what = "buffer " + std::to_string(id) + " '" + b.name + "'";
  auto fail = [&](const std::string &msg) { throw Error(what + ": " + msg); };
  if (uint32_t(b.dtype) > uint32_t(DType::F16))
    fail("unknown dtype " + std::to_string(uint32_t(b.dtype)));
  if (uint32_t(b.role) > uint32_t(BufferRole::Boundary))
    fail("unknown role " + std::to_string(uint32_t(b.role)));
  if (uint32_t(b.init.kind) > uint32_t(InitKind::Constant))
    fail("unknown init kind " + std::to_string(uint32_t(b.init.kind)));
  if (b.arena >= plan.arenas.size())
    fail("arena " + std::to_string(b.arena) + " does not exist (the plan has " +
         std::to_string(plan.arenas.size()) + " arenas)");
  const Arena &arena = plan.arenas[b.arena];
  if (b.offset > arena.bytes || b.bytes > arena.bytes - b.offset)
    fail("bytes [" + std::to_string(b.offset) + ", " +
         (b.bytes > std::numeric_limits<uint64_t>::max() - b.offset
              ? std::string("overflow")
              : std::to_string(b.offset + b.bytes)) +
         ") overflow arena " + std::to_string(b.arena) + " (" +
         tierName(arena.tier) + ", " + std::to_string(arena.bytes) + " bytes)");
  if (b.shape.size() > size_t(kMaxRank))
    fail("rank " + std::to_string(b.shape.size()) + " exceeds the maximum " +
         std::to_string(kMaxRank));
  int64_t n = numElements(b.shape);
  if (n < 0)
    fail("shape " + shapeString(b.shape) +
         " has a negative dim or too many elements");
  uint64_t elem = dtypeSize(b.dtype);
  if (uint64_t(n) > std::numeric_limits<uint64_t>::max() / elem ||
      uint64_t(n) * elem != b.bytes)
    fail("holds " + std::to_string(b.bytes) + " bytes but " +
         shapeString(b.shape) + " x " + dtypeName(b.dtype) + " needs " +
         std::to_string(uint64_t(n) * elem));
  if (b.offset % elem != 0)
    fail("offset " + std::to_string(b.offset) + " is not a multiple of its " +
         std::to_string(elem) + "-byte element");
  if (b.init.kind == InitKind::Normal &&
      (!isFloat(b.dtype) || !std::isfinite(b.init.std) || b.init.std < 0))
    fail("normal init needs a float buffer and a finite std >= 0");
  if (b.init.kind == InitKind::Constant && !std::isfinite(b.init.value))
    fail("constant init value is not finite");
  if (b.role == BufferRole::Constant && b.init.kind == InitKind::None)
    fail("a constant buffer needs an initializer");
  if (!b.layout.isWhole()) {
    if (b.role != BufferRole::Parameter && b.role != BufferRole::Gradient &&
        b.role != BufferRole::OptimizerState)
      fail("a " + std::string(roleName(b.role)) +
           " buffer cannot have a shard layout");
    if (b.layout.view.size() > size_t(kMaxRank))
      fail("layout view rank " + std::to_string(b.layout.view.size()) +
           " exceeds the maximum " + std::to_string(kMaxRank));
    if (std::string fault = checkShardLayout(b.layout, n, plan.mesh);
        !fault.empty())
      fail(fault);
  }
}

/// Refuses any overlap of a persistent buffer (every role but Temporary)
/// with another buffer: a temporary reusing those bytes would corrupt
/// parameters, gradients, optimizer state or the batch.
void checkPersistentOverlap(const Plan &plan) {
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].bytes)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Buffer &x = plan.buffers[a], &y = plan.buffers[b];
    return x.arena != y.arena ? x.arena < y.arena : x.offset < y.offset;
  });
  // Per arena: the buffer reaching furthest so far, of any role and of a
  // persistent role. A later buffer overlaps an earlier one iff it starts
  // before the furthest end.
  int64_t anyOwner = -1, persistentOwner = -1;
  uint32_t arena = UINT32_MAX;
  auto end = [&](int64_t id) {
    return plan.buffers[id].offset + plan.buffers[id].bytes;
  };
  for (uint32_t id : order) {
    const Buffer &b = plan.buffers[id];
    if (b.arena != arena) {
      arena = b.arena;
      anyOwner = persistentOwner = -1;
    }
    bool persistent = b.role != BufferRole::Temporary;
    int64_t clash = -1;
    if (persistent && anyOwner >= 0 && b.offset < end(anyOwner))
      clash = anyOwner;
    else if (persistentOwner >= 0 && b.offset < end(persistentOwner))
      clash = persistentOwner;
    if (clash >= 0) {
      const Buffer &c = plan.buffers[clash];
      throw Error("buffer " + std::to_string(id) + " '" + b.name + "' (" +
                  roleName(b.role) + ", bytes [" + std::to_string(b.offset) +
                  ", " + std::to_string(end(id)) + ")) overlaps buffer " +
                  std::to_string(clash) + " '" + c.name + "' (" +
                  roleName(c.role) + ", bytes [" + std::to_string(c.offset) +
                  ", " + std::to_string(end(clash)) + ")) in arena " +
                  std::to_string(arena) +
                  "; persistent buffers may share no bytes");
    }
    if (anyOwner < 0 || end(id) > end(anyOwner))
      anyOwner = id;
    if (persistent && (persistentOwner < 0 || end(id) > end(persistentOwner)))
      persistentOwner = id;
  }
}

void checkWellKnown(const Plan &plan) {
  auto check = [&](int64_t id, const char *field, BufferRole role) {
    if (id < 0 || uint64_t(id) >= plan.buffers.size())
      throw Error(std::string("well-known ") + field + " buffer " +
                  std::to_string(id) + " is out of range (" +
                  std::to_string(plan.buffers.size()) + " buffers)");
    const Buffer &b = plan.buffers[id];
    std::string what = std::string("well-known ") + field + " " +
                       describeBuffer(plan, uint32_t(id));
    if (b.role != role)
      throw Error(what + " has role " + roleName(b.role) + ", expected " +
                  roleName(role));
    if (role == BufferRole::Tokens || role == BufferRole::Targets) {
      std::vector<int64_t> want = {plan.microBatchSize, plan.seqLength};
      if (b.dtype != DType::I32 || b.shape != want)
        throw Error(what + " must be i32 " + shapeString(want) +
                    " [microBatchSize, seqLength]");
    } else if (!isFloat(b.dtype) || numElements(b.shape) != 1) {
      throw Error(what + " must be a float scalar");
    }
  };
  check(plan.tokens, "tokens", BufferRole::Tokens);
  check(plan.targets, "targets", BufferRole::Targets);
  check(plan.loss, "loss", BufferRole::Loss);
  if (plan.gradNorm != -1)
    check(plan.gradNorm, "gradNorm", BufferRole::Scalar);
  if (plan.learningRate != -1)
    check(plan.learningRate, "learningRate", BufferRole::Scalar);
  if (plan.lossScale != -1)
    check(plan.lossScale, "lossScale", BufferRole::Constant);
}

/// Pipeline stages: one per coordinate of the mesh axis "pp", their
/// programs present, their boundary buffers of the roles the schedule
/// fills, and each message's two ends of one dtype and size.
void checkStages(const Plan &plan) {
  if (plan.stages.empty())
    return;
  const int64_t axis = findMeshAxis(plan.mesh, "pp");
  if (axis < 0 || plan.mesh[axis].size != int64_t(plan.stages.size()))
    throw Error("the plan has " + std::to_string(plan.stages.size()) +
                " pipeline stages but its mesh (" + meshString(plan.mesh) +
                ") has no 'pp' axis of that size");
  const size_t last = plan.stages.size() - 1;
  for (size_t k = 0; k < plan.stages.size(); ++k) {
    const PipelineStage &st = plan.stages[k];
    const std::string where = "pipeline stage " + std::to_string(k);
    for (const std::string *name :
         {&st.forward, &st.forwardBackward, &st.optimizer})
      if (!plan.findProgram(*name))
        throw Error(where + ": no program '" + *name + "'");
    auto check = [&](int64_t id, const char *field, BufferRole role,
                     bool present) {
      if (!present) {
        if (id != -1)
          throw Error(where + ": has a " + field +
                      " buffer, which this stage cannot have");
        return;
      }
      if (id < 0 || uint64_t(id) >= plan.buffers.size())
        throw Error(where + ": " + field + " buffer " + std::to_string(id) +
                    " is out of range");
      if (plan.buffers[id].role != role)
        throw Error(where + ": " + field + " " +
                    describeBuffer(plan, uint32_t(id)) + " has role " +
                    roleName(plan.buffers[id].role) + ", expected " +
                    roleName(role));
    };
    check(st.input, "input", k == 0 ? BufferRole::Tokens : BufferRole::Boundary,
          true);
    check(st.output, "output", BufferRole::Boundary, k != last);
    check(st.outputGrad, "outputGrad", BufferRole::Boundary, k != last);
    check(st.inputGrad, "inputGrad", BufferRole::Boundary, k != 0);
    check(st.loss, "loss", BufferRole::Loss, k == last);
    check(st.gradNorm, "gradNorm", BufferRole::Scalar, true);
    check(st.learningRate, "learningRate", BufferRole::Scalar, true);
    if (k == last)
      continue;
    // The messages between k and k+1: both ends alike.
    const PipelineStage &next = plan.stages[k + 1];
    for (auto [a, b] : {std::make_pair(st.output, next.input),
                        std::make_pair(st.outputGrad, next.inputGrad),
                        std::make_pair(st.output, st.outputGrad)}) {
      const Buffer &x = plan.buffers[a], &y = plan.buffers[b];
      if (x.dtype != y.dtype || x.shape != y.shape)
        throw Error(where + ": " + describeBuffer(plan, uint32_t(a)) +
                    " and " + describeBuffer(plan, uint32_t(b)) +
                    " are two ends of one message but differ in dtype or "
                    "shape");
    }
  }
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

class InstructionChecker {
public:
  InstructionChecker(const Plan &plan, const Program &prog, size_t index)
      : plan(plan), prog(prog), index(index), inst(prog.instructions[index]),
        info(lookupOpcode(uint32_t(inst.opcode))) {}

  void run();

private:
  /// Ranks in the group of mesh axes `mask` (already checked in range).
  int64_t meshGroupSize(int64_t mask) const {
    int64_t size = 1;
    for (size_t a = 0; a < plan.mesh.size(); ++a)
      if (mask >> a & 1)
        size *= plan.mesh[a].size;
    return size;
  }
  /// Checks that the plan has a mesh (`what` needs one) and that int
  /// `index` is a non-zero mask over its axes; returns the group's size.
  int64_t meshGroupAt(size_t index, const std::string &what) const {
    if (plan.mesh.empty())
      fail("a " + what +
           " needs the plan's mesh, but the plan has none (a "
           "one-rank plan)");
    int64_t axes = inst.ints[index];
    int64_t limit = int64_t(1) << plan.mesh.size();
    if (axes < 1 || axes >= limit)
      fail("int axes = " + std::to_string(axes) +
           " must be a non-zero bit mask over the mesh's " +
           std::to_string(plan.mesh.size()) + " axes (" +
           meshString(plan.mesh) + "), i.e. in [1, " +
           std::to_string(limit - 1) + "]");
    return meshGroupSize(axes);
  }
  /// The global-norm ops: gradients that do not overlap (each is scaled
  /// in place), a scalar norm, and max_norm.
  void normOperands() {
    for (size_t i = 0; i < inst.inputs.size(); ++i)
      for (size_t j = i + 1; j < inst.inputs.size(); ++j)
        if (overlaps(in(i), in(j)))
          fail(inName(j) + " overlaps " + inName(i));
    scalar(out(0), outName(0));
    floatAt(0, "max_norm", 0.0, std::numeric_limits<double>::max());
  }
  /// AdamW's floats: beta1 beta2 eps wd.
  void adamFloats() {
    floatAt(0, "beta1", 0.0, 1.0, /*hiOpen=*/true);
    floatAt(1, "beta2", 0.0, 1.0, /*hiOpen=*/true);
    floatAt(2, "eps", 0.0, 1.0);
    floatAt(3, "wd", 0.0, std::numeric_limits<double>::max());
  }
  [[noreturn]] void fail(const std::string &msg) const {
    throw Error("program '" + prog.name + "' instruction " +
                std::to_string(index) + " '" + inst.name + "' (" +
                opcodeName(inst.opcode) + "): " + msg);
  }
  const Buffer &in(size_t i) const { return plan.buffers[inst.inputs[i]]; }
  const Buffer &out(size_t i) const { return plan.buffers[inst.outputs[i]]; }
  std::string inName(size_t i) const {
    return "input " + std::to_string(i) + " " +
           describeBuffer(plan, inst.inputs[i]);
  }
  std::string outName(size_t i) const {
    return "output " + std::to_string(i) + " " +
           describeBuffer(plan, inst.outputs[i]);
  }
  int64_t n(const Buffer &b) const { return numElements(b.shape); }
  int64_t last(const Buffer &b) const {
    return b.shape.empty() ? 1 : b.shape.back();
  }

  void counts();
  void dtypes();
  void aliasing();
  void shapes();

  // Shape helpers; `what` names the operand in the message.
  void sameShape(const Buffer &a, const std::string &aName, const Buffer &b,
                 const std::string &bName) const {
    if (a.shape != b.shape)
      fail(bName + " must have the shape of " + aName);
  }
  void elements(const Buffer &b, const std::string &name, int64_t want,
                const std::string &why) const {
    if (want < 0)
      fail("the element count " + why + " overflows");
    if (n(b) != want)
      fail(name + " has " + std::to_string(n(b)) + " elements, expected " +
           std::to_string(want) + " (" + why + ")");
  }
  void minRank(const Buffer &b, const std::string &name, size_t r) const {
    if (b.shape.size() < r)
      fail(name + " needs rank >= " + std::to_string(r));
  }
  void scalar(const Buffer &b, const std::string &name) const {
    if (n(b) != 1)
      fail(name + " must be a scalar (one element)");
  }
  void vectorOf(const Buffer &b, const std::string &name, int64_t c,
                const std::string &why) const {
    if (b.shape != std::vector<int64_t>{c})
      fail(name + " must be [" + std::to_string(c) + "] (" + why + ")");
  }
  int64_t intAt(size_t i, const char *what, int64_t lo, int64_t hi) const {
    int64_t v = inst.ints[i];
    if (v < lo || v > hi)
      fail(std::string("int ") + what + " = " + std::to_string(v) +
           " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) +
           "]");
    return v;
  }
  double floatAt(size_t i, const char *what, double lo, double hi,
                 bool hiOpen = false) const {
    double v = inst.floats[i];
    if (!(v >= lo && (hiOpen ? v < hi : v <= hi)))
      fail(std::string("float ") + what + " = " + std::to_string(v) +
           " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) +
           (hiOpen ? ")" : "]"));
    return v;
  }
  void attentionShapes(size_t numIn, size_t numOut);
  /// ": output 1 is buffer 7, input 1 is buffer 9" (AllReduce's message).
  std::string firstDifference() const {
    for (size_t i = 0; i < std::min(inst.inputs.size(), inst.outputs.size());
         ++i)
      if (inst.inputs[i] != inst.outputs[i])
        return "; output " + std::to_string(i) + " is buffer " +
               std::to_string(inst.outputs[i]) + " but input " +
               std::to_string(i) + " is buffer " +
               std::to_string(inst.inputs[i]);
    return "";
  }
  void sliceShapes(const Buffer &whole, const std::string &wholeName,
                   const Buffer &part, const std::string &partName);

  const Plan &plan;
  const Program &prog;
  size_t index;
  const Instruction &inst;
  const OpcodeInfo *info;
};

void InstructionChecker::run() {
  if (!info)
    fail("unknown opcode " + std::to_string(uint32_t(inst.opcode)));
  counts();
  dtypes();
  shapes();
  aliasing();
}

void InstructionChecker::counts() {
  auto count = [&](size_t have, int want, const char *what) {
    if (want >= 0 ? have != size_t(want) : have < 1)
      fail(std::string("expects ") +
           (want >= 0 ? std::to_string(want) : std::string("one or more")) +
           " " + what + " but has " + std::to_string(have) + " (" +
           describeOpcode(inst.opcode) + ")");
  };
  count(inst.inputs.size(), info->numInputs, "inputs");
  count(inst.outputs.size(), info->numOutputs, "outputs");
  for (size_t i = 0; i < inst.inputs.size(); ++i)
    if (inst.inputs[i] >= plan.buffers.size())
      fail("input " + std::to_string(i) + " is buffer " +
           std::to_string(inst.inputs[i]) + " but the plan has " +
           std::to_string(plan.buffers.size()) + " buffers");
  for (size_t i = 0; i < inst.outputs.size(); ++i)
    if (inst.outputs[i] >= plan.buffers.size())
      fail("output " + std::to_string(i) + " is buffer " +
           std::to_string(inst.outputs[i]) + " but the plan has " +
           std::to_string(plan.buffers.size()) + " buffers");
  // Transpose and Slice take one int per dim of their (whole) tensor;
  // GlobalNormClipParts takes the axes and three ints per gradient.
  int wantInts = info->numInts;
  if (wantInts < 0 && inst.opcode == Opcode::GlobalNormClipParts)
    wantInts = 3 * int(inst.inputs.size()) + 1;
  else if (wantInts < 0)
    wantInts = int(inst.opcode == Opcode::SliceGrad ? out(0).shape.size()
                                                    : in(0).shape.size());
  count(inst.ints.size(), wantInts, "ints");
  count(inst.floats.size(), info->numFloats, "floats");
  for (size_t i = 0; i < inst.floats.size(); ++i)
    if (!std::isfinite(inst.floats[i]))
      fail("float " + std::to_string(i) + " is not finite");
}

void InstructionChecker::dtypes() {
  // Operands that hold token ids; every other operand is a float of one
  // dtype (layout ops and Zero accept any dtype, but one per instruction).
  auto isIdSlot = [&](size_t inputIndex) {
    switch (inst.opcode) {
    case Opcode::Embedding:
    case Opcode::EmbeddingGrad:
    case Opcode::CrossEntropy:
    case Opcode::CrossEntropyGrad:
    case Opcode::VocabParallelEmbedding:
    case Opcode::VocabParallelEmbeddingGrad:
    case Opcode::VocabParallelCrossEntropy:
    case Opcode::VocabParallelCrossEntropyGrad:
      return inputIndex == 1;
    default:
      return false;
    }
  };
  bool anyDType = false;
  switch (inst.opcode) {
  case Opcode::Copy:
  case Opcode::Transpose:
  case Opcode::Slice:
  case Opcode::Concat:
  case Opcode::SliceGrad:
  case Opcode::Zero:
    anyDType = true;
    break;
  default:
    break;
  }
  if (inst.opcode == Opcode::Zero)
    return;
  // Mixed precision: a cast converts between float dtypes, and the loss
  // scalar of a cross-entropy (its gradient's seed) may be wider than the
  // logits. Those operands are checked on their own.
  auto ownDType = [&](bool isInput, size_t index) {
    switch (inst.opcode) {
    case Opcode::Cast:
      return true;
    case Opcode::CrossEntropy:
    case Opcode::VocabParallelCrossEntropy:
      return !isInput && index == 0;
    case Opcode::CrossEntropyGrad:
    case Opcode::VocabParallelCrossEntropyGrad:
      return isInput && index == 2;
    default:
      return false;
    }
  };
  const Buffer *first = nullptr;
  std::string firstName;
  auto visit = [&](const Buffer &b, const std::string &name) {
    if (!anyDType && !isFloat(b.dtype))
      fail(name + " must be a float buffer");
    if (!first) {
      first = &b;
      firstName = name;
    } else if (b.dtype != first->dtype) {
      fail(name + " has dtype " + dtypeName(b.dtype) + " but " + firstName +
           " has " + dtypeName(first->dtype) +
           "; the operands of one instruction share one dtype");
    }
  };
  for (size_t i = 0; i < inst.inputs.size(); ++i) {
    if (isIdSlot(i)) {
      if (in(i).dtype != DType::I32)
        fail(inName(i) + " holds token ids and must be i32");
      continue;
    }
    if (ownDType(true, i)) {
      if (!isFloat(in(i).dtype))
        fail(inName(i) + " must be a float buffer");
      continue;
    }
    visit(in(i), inName(i));
  }
  for (size_t i = 0; i < inst.outputs.size(); ++i) {
    if (ownDType(false, i)) {
      if (!isFloat(out(i).dtype))
        fail(outName(i) + " must be a float buffer");
      continue;
    }
    visit(out(i), outName(i));
  }
}

void InstructionChecker::aliasing() {
  // Elementwise kernels read element i before writing element i, so they
  // may run in place on the very same bytes; nothing may overlap partially.
  bool elementwise = false;
  switch (inst.opcode) {
  case Opcode::Add:
  case Opcode::Mul:
  case Opcode::BiasAdd:
  case Opcode::Gelu:
  case Opcode::GeluGrad:
  case Opcode::Dropout:
  case Opcode::Copy:
    elementwise = true;
    break;
  default:
    break;
  }
  for (size_t o = 0; o < inst.outputs.size(); ++o) {
    const Buffer &y = out(o);
    if (y.role == BufferRole::Constant)
      fail(outName(o) + " is a constant; no instruction may write it");
    for (size_t o2 = o + 1; o2 < inst.outputs.size(); ++o2)
      if (overlaps(y, out(o2)))
        fail(outName(o) + " overlaps " + outName(o2));
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      const Buffer &x = in(i);
      if (!overlaps(x, y))
        continue;
      bool same = x.offset == y.offset && x.bytes == y.bytes;
      bool allowed =
          elementwise && same && !(inst.opcode == Opcode::BiasAdd && i == 1);
      // A collective works in place on its own operand (the same id, which
      // shapes() checked).
      if (inst.opcode == Opcode::AllReduce ||
          inst.opcode == Opcode::AllGather ||
          inst.opcode == Opcode::ReduceScatter)
        allowed = i == o;
      if (!allowed)
        fail(outName(o) + " overlaps " + inName(i) +
             (elementwise ? "; only an exact in-place alias is allowed"
                          : "; this op cannot run in place"));
    }
  }
}

void InstructionChecker::attentionShapes(size_t numIn, size_t numOut) {
  const Buffer &q = in(0);
  if (q.shape.size() != 3)
    fail(inName(0) + " must be [batch, seq, hidden]");
  for (size_t i = 1; i < numIn; ++i)
    sameShape(q, inName(0), in(i), inName(i));
  for (size_t i = 0; i < numOut; ++i)
    sameShape(q, inName(0), out(i), outName(i));
  int64_t heads = intAt(0, "heads", 1, q.shape[2] > 0 ? q.shape[2] : 1);
  if (q.shape[2] % heads != 0)
    fail("hidden " + std::to_string(q.shape[2]) +
         " is not divisible by heads " + std::to_string(heads));
  intAt(1, "causal", 0, 1);
  floatAt(0, "dropout", 0.0, 1.0, /*hiOpen=*/true);
  if (inst.ints[3] != 0)
    meshGroupAt(3, "head-split attention");
}

void InstructionChecker::sliceShapes(const Buffer &whole,
                                     const std::string &wholeName,
                                     const Buffer &part,
                                     const std::string &partName) {
  if (part.shape.size() != whole.shape.size())
    fail(partName + " must have the rank of " + wholeName);
  for (size_t d = 0; d < whole.shape.size(); ++d) {
    int64_t off = inst.ints[d];
    if (off < 0 || part.shape[d] > whole.shape[d] ||
        off > whole.shape[d] - part.shape[d])
      fail("offset " + std::to_string(off) + " + size " +
           std::to_string(part.shape[d]) + " in dim " + std::to_string(d) +
           " exceeds " + wholeName);
  }
}

void InstructionChecker::shapes() {
  const std::vector<int64_t> &ints = inst.ints;
  switch (inst.opcode) {
  case Opcode::Embedding:
  case Opcode::EmbeddingGrad:
  case Opcode::VocabParallelEmbedding:
  case Opcode::VocabParallelEmbeddingGrad: {
    bool fwd = inst.opcode == Opcode::Embedding ||
               inst.opcode == Opcode::VocabParallelEmbedding;
    bool parallel = inst.opcode == Opcode::VocabParallelEmbedding ||
                    inst.opcode == Opcode::VocabParallelEmbeddingGrad;
    if (parallel)
      meshGroupAt(0, "vocabulary-parallel embedding");
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
    if (!fwd)
      intAt(parallel ? 1 : 0, "accumulate", 0, 1);
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
    int64_t batch = intAt(0, "batch", 1, INT32_MAX);
    int64_t seq = intAt(1, "seq", 1, table.shape[0]);
    if (last(y) != table.shape[1] || y.shape.empty())
      fail(yName + " must end in hidden " + std::to_string(table.shape[1]));
    elements(y, yName, mulChecked(mulChecked(batch, seq), table.shape[1]),
             "batch x seq x hidden");
    if (!fwd)
      intAt(2, "accumulate", 0, 1);
    break;
  }
  case Opcode::Matmul: {
    int64_t batch = intAt(0, "batch", 1, INT64_MAX);
    int64_t m = intAt(1, "m", 1, INT64_MAX);
    int64_t nn = intAt(2, "n", 1, INT64_MAX);
    int64_t k = intAt(3, "k", 1, INT64_MAX);
    bool ta = intAt(4, "transA", 0, 1), tb = intAt(5, "transB", 0, 1);
    bool bc = intAt(6, "broadcastB", 0, 1);
    intAt(7, "accumulate", 0, 1);
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
  case Opcode::Gelu:
  case Opcode::Dropout:
  case Opcode::Accumulate:
    sameShape(in(0), inName(0), out(0), outName(0));
    if (inst.opcode == Opcode::Dropout)
      floatAt(0, "p", 0.0, 1.0, /*hiOpen=*/true);
    break;
  case Opcode::Softmax:
    minRank(in(0), inName(0), 1);
    sameShape(in(0), inName(0), out(0), outName(0));
    break;
  case Opcode::LayerNorm:
    minRank(in(0), inName(0), 1);
    vectorOf(in(1), inName(1), last(in(0)), "the last dim of x");
    vectorOf(in(2), inName(2), last(in(0)), "the last dim of x");
    sameShape(in(0), inName(0), out(0), outName(0));
    floatAt(0, "eps", 0.0, 1.0);
    break;
  case Opcode::Attention:
    attentionShapes(3, 1);
    break;
  case Opcode::AttentionGrad:
    attentionShapes(4, 3);
    break;
  case Opcode::CrossEntropy:
  case Opcode::CrossEntropyGrad:
  case Opcode::VocabParallelCrossEntropy:
  case Opcode::VocabParallelCrossEntropyGrad: {
    if (inst.opcode == Opcode::VocabParallelCrossEntropy ||
        inst.opcode == Opcode::VocabParallelCrossEntropyGrad)
      meshGroupAt(0, "vocabulary-parallel cross-entropy");
    const Buffer &logits = in(0);
    minRank(logits, inName(0), 1);
    int64_t v = last(logits);
    if (v < 1)
      fail(inName(0) + " has an empty vocab dim");
    elements(in(1), inName(1), n(logits) / v, "one target per logits row");
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
  case Opcode::Cast:
    elements(out(0), outName(0), n(in(0)), "a cast keeps the element count");
    break;
  case Opcode::Transpose: {
    const Buffer &x = in(0), &y = out(0);
    std::vector<bool> seen(x.shape.size());
    for (size_t i = 0; i < ints.size(); ++i) {
      int64_t p = intAt(i, "permutation", 0, int64_t(x.shape.size()) - 1);
      if (seen[p])
        fail("ints are not a permutation: " + std::to_string(p) +
             " appears twice");
      seen[p] = true;
    }
    if (y.shape.size() != x.shape.size())
      fail(outName(0) + " must have the rank of " + inName(0));
    for (size_t i = 0; i < ints.size(); ++i)
      if (y.shape[i] != x.shape[ints[i]])
        fail(outName(0) + " dim " + std::to_string(i) + " must be " +
             std::to_string(x.shape[ints[i]]) + " (input dim " +
             std::to_string(ints[i]) + ")");
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
    int64_t dim = intAt(0, "dim", 0, int64_t(y.shape.size()) - 1);
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
    intAt(0, "accumulate", 0, 1);
    break;
  case Opcode::GeluGrad:
  case Opcode::SoftmaxGrad:
    minRank(in(0), inName(0), 1);
    sameShape(in(0), inName(0), in(1), inName(1));
    sameShape(in(0), inName(0), out(0), outName(0));
    break;
  case Opcode::LayerNormGrad: {
    minRank(in(0), inName(0), 1);
    int64_t c = last(in(0));
    vectorOf(in(1), inName(1), c, "the last dim of x");
    sameShape(in(0), inName(0), in(2), inName(2));
    sameShape(in(0), inName(0), out(0), outName(0));
    vectorOf(out(1), outName(1), c, "the last dim of x");
    vectorOf(out(2), outName(2), c, "the last dim of x");
    intAt(0, "accumulate", 0, 7);
    floatAt(0, "eps", 0.0, 1.0);
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
    meshGroupAt(0, "norm of parts");
    const int64_t axes = inst.ints[0];
    for (size_t i = 0; i < inst.inputs.size(); ++i) {
      const int64_t chunkAxes = inst.ints[3 * i + 1],
                    splitAxes = inst.ints[3 * i + 3];
      intAt(3 * i + 2, "inBuffer", 0, 1);
      // The parts must be parts within the norm's group.
      if ((chunkAxes | splitAxes) & ~axes || (chunkAxes & splitAxes))
        fail(inName(i) + " has chunk axes " + std::to_string(chunkAxes) +
             " and split axes " + std::to_string(splitAxes) +
             ", which must be disjoint masks within the norm's axes " +
             std::to_string(axes));
      const int64_t chunks = meshGroupSize(chunkAxes);
      if (!inst.ints[3 * i + 2] && numElements(in(i).shape) % chunks != 0)
        fail(inName(i) + " has " + std::to_string(numElements(in(i).shape)) +
             " elements, not divisible into " + std::to_string(chunks) +
             " chunks");
    }
    break;
  }
  case Opcode::LearningRate:
    scalar(out(0), outName(0));
    intAt(0, "kind", 0, int64_t(LrScheduleKind::WarmupCosineDecay));
    intAt(1, "warmup", 0, INT64_MAX);
    intAt(2, "total", 0, INT64_MAX);
    intAt(3, "warmupLog", 0, 1);
    floatAt(0, "base", 0.0, std::numeric_limits<double>::max());
    floatAt(1, "warmupStart", 0.0, std::numeric_limits<double>::max());
    floatAt(2, "decayEnd", 0.0, std::numeric_limits<double>::max());
    break;
  case Opcode::AllReduce:
  case Opcode::AllGather:
  case Opcode::ReduceScatter: {
    if (inst.outputs != inst.inputs)
      fail("works in place: its outputs must be its inputs, the same buffer "
           "ids in the same order, but it has " +
           std::to_string(inst.inputs.size()) + " inputs and " +
           std::to_string(inst.outputs.size()) + " outputs" +
           firstDifference());
    int64_t groupSize = meshGroupAt(0, "collective");
    if (inst.opcode != Opcode::AllGather)
      intAt(1, "reduce", 0, 3);
    if (inst.opcode == Opcode::AllReduce)
      break;
    for (size_t i = 0; i < inst.inputs.size(); ++i)
      if (numElements(in(i).shape) % groupSize != 0)
        fail(inName(i) + " has " + std::to_string(numElements(in(i).shape)) +
             " elements, not divisible into the group's " +
             std::to_string(groupSize) + " chunks");
    break;
  }
  case Opcode::ReduceScatterAccumulate: {
    int64_t groupSize = meshGroupAt(0, "collective");
    intAt(1, "reduce", 0, 3);
    if (numElements(out(0).shape) * groupSize != numElements(in(0).shape))
      fail(outName(0) + " has " + std::to_string(numElements(out(0).shape)) +
           " elements; the chunk of " + inName(0) + " over " +
           std::to_string(groupSize) + " ranks has " +
           std::to_string(numElements(in(0).shape) / groupSize));
    break;
  }
  case Opcode::GatherParameter: {
    int64_t groupSize = meshGroupAt(0, "collective");
    const Buffer &chunk = in(0);
    if (chunk.role != BufferRole::Parameter)
      fail(inName(0) + " has role " + roleName(chunk.role) +
           "; only a parameter's chunk is gathered");
    if (chunk.layout.chunkAxes != inst.ints[0])
      fail(inName(0) + " is chunked over mesh axes mask " +
           std::to_string(chunk.layout.chunkAxes) +
           " but the gather runs over mask " + std::to_string(inst.ints[0]));
    if (out(0).role != BufferRole::Temporary)
      fail(outName(0) + " has role " + roleName(out(0).role) +
           "; the gathered parameter must be a temporary");
    if (numElements(out(0).shape) != numElements(chunk.shape) * groupSize)
      fail(outName(0) + " has " + std::to_string(numElements(out(0).shape)) +
           " elements; the " + std::to_string(groupSize) + " chunks of " +
           inName(0) + " (" + std::to_string(numElements(chunk.shape)) +
           " elements each) make " +
           std::to_string(numElements(chunk.shape) * groupSize));
    break;
  }
  case Opcode::AdamWShard: {
    scalar(in(1), inName(1));
    intAt(0, "decay", 0, 1);
    int64_t groupSize = meshGroupAt(1, "sharded update");
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
  case Opcode::AdamW:
  case Opcode::Sgd: {
    scalar(in(1), inName(1));
    for (size_t o = 0; o < inst.outputs.size(); ++o)
      sameShape(in(0), inName(0), out(o), outName(o));
    intAt(0, inst.opcode == Opcode::AdamW ? "decay" : "nesterov", 0, 1);
    if (inst.opcode == Opcode::AdamW) {
      adamFloats();
    } else {
      floatAt(0, "momentum", 0.0, 1.0);
      floatAt(1, "wd", 0.0, std::numeric_limits<double>::max());
    }
    break;
  }
  }
}

} // namespace

void dsc::rt::validatePlan(const Plan &plan) {
  if (plan.version != kPlanFormatVersion)
    throw Error("plan format version " + std::to_string(plan.version) +
                " is not supported: this runtime reads version " +
                std::to_string(kPlanFormatVersion));
  if (plan.vocabSize < 1 || plan.seqLength < 1 || plan.microBatchSize < 1 ||
      plan.microBatches < 1)
    throw Error("model shape must be positive: vocabSize " +
                std::to_string(plan.vocabSize) + ", seqLength " +
                std::to_string(plan.seqLength) + ", microBatchSize " +
                std::to_string(plan.microBatchSize) + ", microBatches " +
                std::to_string(plan.microBatches));
  std::set<std::string> axisNames;
  for (size_t i = 0; i < plan.mesh.size(); ++i) {
    const Plan::MeshAxis &axis = plan.mesh[i];
    std::string what = "mesh axis " + std::to_string(i);
    if (axis.name.empty())
      throw Error(what + " has an empty name");
    what += " '" + axis.name + "'";
    if (!axisNames.insert(axis.name).second)
      throw Error(what + " appears twice in the mesh");
    if (axis.size < 1)
      throw Error(what + " has size " + std::to_string(axis.size) +
                  "; sizes must be >= 1");
  }
  if (int64_t ranks = meshRanks(plan.mesh);
      ranks < 0 || ranks > std::numeric_limits<int>::max())
    throw Error("the mesh " + meshString(plan.mesh) +
                " spans more ranks than an int holds");
  for (size_t a = 0; a < plan.arenas.size(); ++a)
    if (uint32_t(plan.arenas[a].tier) > uint32_t(Tier::Nvme))
      throw Error("arena " + std::to_string(a) + " has unknown tier " +
                  std::to_string(uint32_t(plan.arenas[a].tier)));
  if (!plan.summary.peakBytesPerArena.empty() &&
      plan.summary.peakBytesPerArena.size() != plan.arenas.size())
    throw Error("summary lists " +
                std::to_string(plan.summary.peakBytesPerArena.size()) +
                " arena peaks for " + std::to_string(plan.arenas.size()) +
                " arenas");

  std::unordered_set<std::string> persistentNames;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    checkBuffer(plan, i);
    const Buffer &b = plan.buffers[i];
    if (b.role != BufferRole::Temporary &&
        !persistentNames.insert(b.name).second)
      throw Error("buffer " + std::to_string(i) + " '" + b.name + "' (" +
                  roleName(b.role) +
                  "): another persistent buffer has the same name");
  }
  checkPersistentOverlap(plan);
  checkWellKnown(plan);

  std::set<std::string> programNames;
  for (const Program &prog : plan.programs) {
    if (!programNames.insert(prog.name).second)
      throw Error("program '" + prog.name + "' appears twice");
    for (size_t i = 0; i < prog.instructions.size(); ++i)
      InstructionChecker(plan, prog, i).run();
  }
  checkStages(plan);
}
