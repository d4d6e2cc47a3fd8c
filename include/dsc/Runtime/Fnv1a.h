//===- Fnv1a.h - the FNV-1a 64 hash -----------------------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// FNV-1a, 64-bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3):
// the plan file's body checksum, a checkpoint's model fingerprint, the seeds
// of parameter streams and the host ids of the rank watch. Byte at a time,
// so for short or rare inputs only (checkpoint data uses XXH3).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_FNV1A_H
#define DSC_RUNTIME_FNV1A_H

#include <cstddef>
#include <cstdint>

namespace dsc::rt {

inline uint64_t fnv1a64(const uint8_t *data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i)
    h = (h ^ data[i]) * 0x100000001b3ull;
  return h;
}

} // namespace dsc::rt

#endif // DSC_RUNTIME_FNV1A_H
