//===- WeightsCheckpoint.h - model weights in and out -----------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Whole tensors read from safetensors files (a Hugging Face model) and
// written as a step-0 dsc checkpoint of parameters only: any plan of the
// model, sharded or not, starts from them with `dsc-run --load` (its
// optimizer state starts at zero, as at step 0). The entry points are
// noexcept (the compiler's tools are built without exceptions): false and a
// message naming the file and tensor on failure.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_WEIGHTSCHECKPOINT_H
#define DSC_RUNTIME_WEIGHTSCHECKPOINT_H

#include "dsc/Runtime/Plan.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dsc::rt {

/// A whole tensor and its little-endian bytes.
struct WholeTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// Every tensor of the safetensors file `path`, its header checked against
/// the file's size (hostile files are errors), in file order.
bool readSafetensorsTensors(const std::string &path,
                            std::vector<WholeTensor> &out,
                            std::string &error) noexcept;

/// Writes `tensors` (parameters, named as the dsc graph names them) as the
/// one-rank checkpoint `dir`/step-00000000, atomically, with `dir`/latest
/// naming it; `seed` is the run seed it records.
bool writeWeightsCheckpoint(const std::string &dir,
                            const std::vector<WholeTensor> &tensors,
                            uint64_t seed, std::string &error) noexcept;

/// The parameters of the checkpoint `path` (a directory with `latest`, or
/// a step directory), each whole whatever plan saved it, every piece
/// checked against its checksum, in name order.
bool readCheckpointParameters(const std::string &path,
                              std::vector<WholeTensor> &out,
                              std::string &error) noexcept;

/// Writes `tensors` as the safetensors file `path` with the header
/// metadata `metadata` (transformers reads {"format": "pt"}), fsynced.
bool writeSafetensorsTensors(
    const std::string &path, const std::vector<WholeTensor> &tensors,
    const std::vector<std::pair<std::string, std::string>> &metadata,
    std::string &error) noexcept;

} // namespace dsc::rt

#endif // DSC_RUNTIME_WEIGHTSCHECKPOINT_H
