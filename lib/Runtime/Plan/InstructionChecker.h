//===- InstructionChecker.h - validatePlan's per-instruction checks -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Private to the verifier. An instruction is checked in two parts: its
// signature, everything the opcode table (Instructions.def) says about it
// (InstructionSignature.cpp), and its shapes, the rules of each opcode's
// kernel (InstructionShapes.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_CORE_INSTRUCTIONCHECKER_H
#define DSC_RUNTIME_CORE_INSTRUCTIONCHECKER_H

#include "dsc/Runtime/Instructions.h"
#include "dsc/Runtime/ShardLayout.h"
#include "dsc/Runtime/PlanIO.h"

#include <cstdint>
#include <limits>
#include <string>

namespace dsc::rt::verifier {

inline bool isFloat(DType t) { return t != DType::I32; }

/// a * b, or -1 on overflow or a negative factor.
inline int64_t mulChecked(int64_t a, int64_t b) {
  if (a < 0 || b < 0 || (b != 0 && a > std::numeric_limits<int64_t>::max() / b))
    return -1;
  return a * b;
}

inline std::string describeBuffer(const Plan &plan, uint32_t id) {
  const Buffer &b = plan.buffers[id];
  return "buffer " + std::to_string(id) + " '" + b.name + "' (" +
         dtypeName(b.dtype) + " " + shapeString(b.shape) + ")";
}

inline bool overlaps(const Buffer &a, const Buffer &b) {
  return a.arena == b.arena && a.bytes && b.bytes &&
         a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

class InstructionChecker {
public:
  /// Checks instruction `index` of `prog` against `info` (its opcode's
  /// entry in the table unless a test gives its own).
  InstructionChecker(const Plan &plan, const Program &prog, size_t index,
                     const OpcodeInfo *info)
      : plan(plan), prog(prog), index(index), inst(prog.instructions[index]),
        info(info) {}

  /// Everything: the signature (from the table), then the shapes.
  void run();
  /// What the table says alone: operand counts, attribute ranges, dtypes,
  /// aliasing.
  void signature();

private:
  /// Ranks in the group of mesh axes `mask` (already checked in range).
  int64_t meshGroupSize(int64_t mask) const {
    return groupSize(plan.mesh, mask);
  }
  /// Checks that the plan has a mesh (`what` needs one) and that the int
  /// attribute `attr` is a non-zero mask over its axes; returns the group's
  /// size.
  int64_t meshGroupAt(const char *attr, const std::string &what) const {
    if (plan.mesh.empty())
      fail("a " + what +
           " needs the plan's mesh, but the plan has none (a "
           "one-rank plan)");
    int64_t axes = intNamed(attr);
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
    floatAt("maxNorm", 0.0, std::numeric_limits<double>::max());
  }
  /// AdamW's floats: beta1 beta2 eps wd.
  void adamFloats() {
    floatAt("beta1", 0.0, 1.0, /*hiOpen=*/true);
    floatAt("beta2", 0.0, 1.0, /*hiOpen=*/true);
    floatAt("eps", 0.0, 1.0);
    floatAt("wd", 0.0, std::numeric_limits<double>::max());
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
  void attributes();
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
  /// The position of the int or float attribute `name` in the table
  /// (Instructions.def); a name the opcode lacks is a bug here.
  size_t intIndex(const char *name) const {
    for (size_t i = 0; i < info->ints.size(); ++i)
      if (std::string(info->ints[i].name) == name)
        return i;
    fail(std::string("the verifier reads an int '") + name +
         "' this opcode does not have");
  }
  size_t floatIndex(const char *name) const {
    for (size_t i = 0; i < info->floats.size(); ++i)
      if (std::string(info->floats[i]) == name)
        return i;
    fail(std::string("the verifier reads a float '") + name +
         "' this opcode does not have");
  }
  int64_t intNamed(const char *name) const {
    return inst.ints[intIndex(name)];
  }
  /// Element `i` of the INT_LIST attribute `name`.
  int64_t listAt(const char *name, size_t i) const {
    return inst.ints[intIndex(name) + i];
  }
  size_t listSize(const char *name) const {
    return inst.ints.size() - intIndex(name);
  }
  void checkRange(int64_t v, const std::string &what, int64_t lo,
                  int64_t hi) const {
    if (v < lo || v > hi)
      fail("int " + what + " = " + std::to_string(v) + " is outside [" +
           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  int64_t intAt(const char *name, int64_t lo, int64_t hi) const {
    int64_t v = intNamed(name);
    checkRange(v, name, lo, hi);
    return v;
  }
  double floatAt(const char *name, double lo, double hi,
                 bool hiOpen = false) const {
    double v = inst.floats[floatIndex(name)];
    if (!(v >= lo && (hiOpen ? v < hi : v <= hi)))
      fail(std::string("float ") + name + " = " + std::to_string(v) +
           " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) +
           (hiOpen ? ")" : "]"));
    return v;
  }
  void attentionShapes(size_t numIn, size_t numOut);
  /// The logsumexp of AttentionLse / AttentionGradLse: [batch, heads, seq]
  /// of q's batch and sequence, f32 (f64 for f64 q).
  void lseShape(const Buffer &lse, const std::string &name);
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


} // namespace dsc::rt::verifier

#endif // DSC_RUNTIME_CORE_INSTRUCTIONCHECKER_H
