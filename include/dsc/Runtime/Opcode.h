//===- Opcode.h - The plan's opcodes and their table ------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The Opcode enum and the table of what each opcode takes, both generated
// from Instructions.def, the one definition of the instruction set. The
// verifier checks every instruction of a plan file against the table, and
// messages and --print-plan name opcodes, operands and attributes from it.
// The typed per-opcode structs the lowering and the backends use are in
// Instructions.h.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_OPCODE_H
#define DSC_RUNTIME_OPCODE_H

#include <cstdint>
#include <string>
#include <vector>

namespace dsc::rt {

/// Instructions.def's Flags.
enum : unsigned {
  kNoFlags = 0,
  kElementwise = 1,
  kAnyDType = 2,
  kCollective = 4,
  kGroupKernel = 8,
  kPipelineStep = 16,
};

/// Every instruction the executor knows; see Instructions.def.
enum class Opcode : uint32_t {
#define DSC_INSTRUCTION(Name, Value, Flags, Operands, Ints, Floats) Name = Value,
#include "dsc/Runtime/Instructions.def"
};

/// What an operand holds: a float of the instruction's one float dtype,
/// i32 token ids, or a float of its own dtype.
enum class OperandKind : uint8_t { Float, Ids, OwnFloat };

struct OperandInfo {
  const char *name;
  OperandKind kind;
};

/// Instructions.def's integer attribute kinds.
enum class IntKind : uint8_t { Any, Bool, Axes, OptAxes, Accumulate, Enum, List };
/// How many ints an INT_LIST holds.
enum class ListCount : uint8_t {
  None,
  PerDimOfInput0,
  PerDimOfOutput0,
  ThreePerInput
};

struct IntInfo {
  const char *name;
  IntKind kind = IntKind::Any;
  /// ENUM's number of values.
  int64_t enumSize = 0;
  /// INT_LIST's count rule.
  ListCount count = ListCount::None;
};

/// One opcode of Instructions.def, as data.
struct OpcodeInfo {
  Opcode opcode;
  const char *name; // "Matmul"
  unsigned flags = kNoFlags;
  /// The operands; the last of a list (IN_LIST, OUT_LIST, INPLACE) stands
  /// for one or more.
  std::vector<OperandInfo> inputs, outputs;
  bool variadicInputs = false, variadicOutputs = false;
  /// INPLACE: the outputs are the inputs, in the same order.
  bool inPlace = false;
  std::vector<IntInfo> ints;
  std::vector<const char *> floats;

  bool has(unsigned flag) const { return (flags & flag) != 0; }
  /// The index of the AXES attribute naming the group the instruction runs
  /// over, or -1.
  int groupAxesIndex() const;
  /// The kind of input/output `i` (the list's kind past the fixed ones).
  OperandKind inputKind(size_t i) const;
  OperandKind outputKind(size_t i) const;
  /// "a, b" / "x..." for messages.
  std::string inputNames() const;
  std::string outputNames() const;
};

/// The table entry of a raw opcode value, or null for an unknown one.
const OpcodeInfo *lookupOpcode(uint32_t raw);
/// The whole table, in Instructions.def's order.
const std::vector<OpcodeInfo> &opcodeTable();
/// "Matmul", or "opcode 99" for an unknown value.
std::string opcodeName(Opcode op);
/// "Matmul: in(a, b) out(c) ints(batch m n k ...)"; the ints and floats
/// parts only when the opcode has them.
std::string describeOpcode(Opcode op);
std::string describeOpcode(const OpcodeInfo &info);
/// The executor's collectives (kCollective), over the group of their AXES.
bool isCollective(Opcode op);
/// The ops whose kernel calls the group of their AXES (kGroupKernel).
bool isVocabParallel(Opcode op);

} // namespace dsc::rt

#endif // DSC_RUNTIME_OPCODE_H
