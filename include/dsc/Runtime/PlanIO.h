//===- PlanIO.h - Plan files and plan validation ----------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The binary plan file the compiler writes and dsc-run reads, and the
// semantic checks that every plan passes before it runs: a plan file is
// untrusted input, so nothing in it is used before it has been checked.
//
// Layout (little-endian throughout):
//   header  magic "DSCPLAN\0" (8 bytes), u32 format version, u32 reserved (0),
//           u64 body length, u64 FNV-1a 64 of the body
//   body    model   i64 vocabSize seqLength microBatchSize microBatches
//           wellknown u32 tokens targets loss, i64 gradNorm learningRate
//                   gradientSeed compressionFromStep compressedGradNorm
//                   compressedLearningRate (format version 12)
//                   i64 beta1 (format version 13)
//           zeroOneAdam i64 enabled (0 or 1) varFreezeStep varUpdateScaler
//                   localStepScaler localStepClipper, then for onebit,
//                   local and sync i64 gradNorm learningRate, u64
//                   collective bytes (format version 13)
//           strings u32 count, then per string u32 length + bytes
//           mesh    u32 count, then per axis u32 name (string index),
//                   i64 size (format version 2)
//           arenas  u32 count, then per arena u32 tier, u64 bytes
//           buffers u32 count, then per buffer u32 name (string index),
//                   u32 arena, u64 offset, u64 bytes, u32 dtype, u32 role,
//                   u32 init kind, f64 init std, f64 init value, u32 rank,
//                   i64 dims[rank]
//           programs u32 count, then per program u32 name, u32 instruction
//                   count, then per instruction u32 opcode, u32 name,
//                   u32 n + u32 inputs[n], u32 n + u32 outputs[n],
//                   u32 n + i64 ints[n], u32 n + f64 floats[n]
//           pipeline u32 schedule, u32 stage count, then per stage u32
//                   forward forwardBackward optimizer step (string
//                   indices), i64 input output outputGrad inputGrad loss
//                   gradNorm learningRate, u32 n + n pairs of i64 residual
//                   out and in (format version 8), u32 backwardWeight
//                   (string index, "" unless split), u32 n + n pairs of
//                   i64 weight stash out and in (format version 9),
//                   three slot banks (i64 slots, u64 offset stride), u32
//                   compressedOptimizer (string index, "" unless 1-bit),
//                   i64 compressedGradNorm compressedLearningRate (format
//                   version 12)
//           summary u32 n + u64 peakBytesPerArena[n], u64 flopsPerMicroBatch,
//                   u64 collectiveBytesPerStep,
//                   collectiveBytesPerCompressedStep (format version 12),
//                   f64 pipelineBubble
//   Nothing may follow the summary.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_PLANIO_H
#define DSC_RUNTIME_PLANIO_H

#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Fnv1a.h"
#include "dsc/Runtime/Plan.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::rt {

/// The file's first 8 bytes.
constexpr char kPlanMagic[8] = {'D', 'S', 'C', 'P', 'L', 'A', 'N', '\0'};
/// Bytes before the body: magic, version, reserved, length, checksum.
constexpr size_t kPlanHeaderSize = 32;

/// Serializes `plan` (at kPlanFormatVersion; plan.version is not consulted).
/// Does not validate: call validatePlan first to catch a compiler bug before
/// it reaches a file.
std::vector<uint8_t> writePlan(const Plan &plan);
/// writePlan to a file. Throws Error naming the path if it cannot be written.
void writePlanFile(const Plan &plan, const std::string &path);

/// Parses and validates a plan. Throws Error naming the section, field,
/// buffer or instruction at fault on a wrong magic, another format version,
/// a checksum mismatch, truncation, trailing bytes, a count larger than the
/// remaining bytes can hold, an unknown enum value, or anything validatePlan
/// refuses. `what` names the source in messages ("plan file 'x.plan'").
Plan readPlan(const uint8_t *data, size_t size,
              const std::string &what = "plan");
/// readPlan of a whole file; a missing or unreadable file is an Error too.
Plan readPlanFile(const std::string &path);

/// The semantic checks on a plan, in order: the model shape; the mesh (axis
/// names non-empty and unique, sizes >= 1, at most INT_MAX ranks); arenas;
/// each buffer (known enums, arena index, offset aligned to its element size,
/// offset + bytes within its arena, bytes == elements * dtype size);
/// persistent buffers (every role but Temporary) overlap no other buffer;
/// the well-known buffers (tokens/targets I32 [microBatchSize, seqLength],
/// loss/gradNorm/learningRate float scalars of their role, gradientSeed a
/// Constant float scalar); no instruction writes a Constant buffer;
/// program names unique; and every instruction against its opcode
/// (operand/result/int/float counts, ids in range, dtypes, shapes, its
/// results overlapping none of its operands unless it works in place;
/// a collective's axes within the mesh).
/// Throws Error naming the program, the instruction's index and its name.
void validatePlan(const Plan &plan);
/// The part of validatePlan that comes from the opcode table alone, for
/// instruction `index` of `prog` against `info` (operand and attribute
/// counts, the ranges of attribute kinds, dtypes, aliasing); the unit tests
/// call it with a table entry of their own definition.
void checkInstructionSignature(const Plan &plan, const Program &prog,
                               size_t index, const OpcodeInfo &info);

/// The plan as text, one line per arena, buffer and instruction
/// ("  3 Matmul 'h.0.mlp.fc' in(%12 'x', %4 'h.0.mlp.fc.weight') out(%13)
/// ints(1 256 1024 256 0 0 0 0)"), for dsc-run --print-plan and FileCheck.
std::string formatPlan(const Plan &plan);

} // namespace dsc::rt

#endif // DSC_RUNTIME_PLANIO_H
