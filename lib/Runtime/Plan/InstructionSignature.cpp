//===- InstructionSignature.cpp - An instruction against its table entry --===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The checks every instruction gets from its opcode's entry in the table
// generated from Instructions.def, with no code of its own: operand and
// attribute counts (lists by their count rule), the ranges an attribute's
// kind implies (BOOL, ENUM, ACCUMULATE, AXES), the dtype rules of its
// operand kinds, and which outputs may alias which inputs.
//
//===----------------------------------------------------------------------===//

#include "InstructionChecker.h"

#include <cmath>

using namespace dsc::rt;
using namespace dsc::rt::verifier;

void InstructionChecker::run() {
  if (!info)
    fail("unknown opcode " + std::to_string(uint32_t(inst.opcode)));
  // Shapes before aliasing: a wrong shape is the likelier fault.
  counts();
  attributes();
  dtypes();
  shapes();
  aliasing();
}

void InstructionChecker::signature() {
  if (!info)
    fail("unknown opcode " + std::to_string(uint32_t(inst.opcode)));
  counts();
  attributes();
  dtypes();
  aliasing();
}

void InstructionChecker::counts() {
  auto count = [&](size_t have, size_t want, bool orMore, const char *what) {
    if (orMore ? have < want : have != want)
      fail(std::string("expects ") +
           (orMore ? (want == 1 ? std::string("one")
                                : std::to_string(want)) +
                         " or more"
                   : std::to_string(want)) +
           " " + what + " but has " + std::to_string(have) + " (" +
           describeOpcode(*info) + ")");
  };
  count(inst.inputs.size(), info->inputs.size(), info->variadicInputs,
        "inputs");
  count(inst.outputs.size(), info->outputs.size(), info->variadicOutputs,
        "outputs");
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
  // A list attribute's length follows the operands (Instructions.def).
  size_t wantInts = info->ints.size();
  if (!info->ints.empty() && info->ints.back().kind == IntKind::List) {
    --wantInts;
    switch (info->ints.back().count) {
    case ListCount::PerDimOfInput0:
      wantInts += in(0).shape.size();
      break;
    case ListCount::PerDimOfOutput0:
      wantInts += out(0).shape.size();
      break;
    case ListCount::ThreePerInput:
      wantInts += 3 * inst.inputs.size();
      break;
    case ListCount::None:
      break;
    }
  }
  count(inst.ints.size(), wantInts, false, "ints");
  count(inst.floats.size(), info->floats.size(), false, "floats");
  for (size_t i = 0; i < inst.floats.size(); ++i)
    if (!std::isfinite(inst.floats[i]))
      fail("float " + std::to_string(i) + " is not finite");
}

void InstructionChecker::attributes() {
  // The ranges an attribute's kind implies; the rest are shapes().
  for (size_t i = 0; i < info->ints.size(); ++i) {
    const IntInfo &attr = info->ints[i];
    switch (attr.kind) {
    case IntKind::Any:
    case IntKind::List:
      break;
    case IntKind::Bool:
      checkRange(inst.ints[i], attr.name, 0, 1);
      break;
    case IntKind::Enum:
      checkRange(inst.ints[i], attr.name, 0, attr.enumSize - 1);
      break;
    case IntKind::Accumulate:
      checkRange(inst.ints[i], attr.name, 0,
                 (int64_t(1) << inst.outputs.size()) - 1);
      break;
    case IntKind::OptAxes:
      if (inst.ints[i] == 0)
        break;
      [[fallthrough]];
    case IntKind::Axes:
      meshGroupAt(attr.name, info->has(kCollective)
                                 ? std::string("collective")
                                 : std::string(info->name) + " over int " +
                                       attr.name);
      break;
    }
  }
  if (info->inPlace && inst.outputs != inst.inputs)
    fail("works in place: its outputs must be its inputs, the same buffer "
         "ids in the same order, but it has " +
         std::to_string(inst.inputs.size()) + " inputs and " +
         std::to_string(inst.outputs.size()) + " outputs" + firstDifference());
}

void InstructionChecker::dtypes() {
  // Token ids are i32; a float operand of its own dtype (a cast's, the
  // loss of bf16 logits) is checked alone; the rest share one dtype, a
  // float unless the op moves any dtype (kAnyDType).
  if (inst.opcode == Opcode::Zero)
    return; // each buffer is zeroed in its own dtype
  const bool anyDType = info->has(kAnyDType);
  const Buffer *first = nullptr;
  std::string firstName;
  auto visit = [&](OperandKind kind, const Buffer &b, const std::string &name) {
    if (kind == OperandKind::Ids) {
      if (b.dtype != DType::I32)
        fail(name + " holds token ids and must be i32");
      return;
    }
    if ((kind == OperandKind::OwnFloat || !anyDType) && !isFloat(b.dtype))
      fail(name + " must be a float buffer");
    if (kind == OperandKind::OwnFloat)
      return;
    if (!first) {
      first = &b;
      firstName = name;
    } else if (b.dtype != first->dtype) {
      fail(name + " has dtype " + dtypeName(b.dtype) + " but " + firstName +
           " has " + dtypeName(first->dtype) +
           "; the operands of one instruction share one dtype");
    }
  };
  for (size_t i = 0; i < inst.inputs.size(); ++i)
    visit(info->inputKind(i), in(i), inName(i));
  for (size_t i = 0; i < inst.outputs.size(); ++i)
    visit(info->outputKind(i), out(i), outName(i));
}

void InstructionChecker::aliasing() {
  // Elementwise kernels read element i before writing element i, so they
  // may run in place on the very same bytes; nothing may overlap partially.
  const bool elementwise = info->has(kElementwise);
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
      if (info->inPlace)
        allowed = i == o;
      if (!allowed)
        fail(outName(o) + " overlaps " + inName(i) +
             (elementwise ? "; only an exact in-place alias is allowed"
                          : "; this op cannot run in place"));
    }
  }
}

void dsc::rt::checkInstructionSignature(const Plan &plan, const Program &prog,
                                        size_t index, const OpcodeInfo &info) {
  InstructionChecker(plan, prog, index, &info).signature();
}
