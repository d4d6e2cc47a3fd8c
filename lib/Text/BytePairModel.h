//===- BytePairModel.h - HF's BPE model: vocabulary and merges --*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The `model` of a tokenizer.json of type BPE: a word (one pre-tokenized
// piece) becomes its characters, then pairs merge lowest rank first,
// leftmost among equals, with HF's priority queue and its stale-entry rule,
// so ties and odd merge tables give HF's ids. Byte fallback (<0xNN>) and
// fused <unk> as in HF's BPE::merge_word. Private to lib/Text.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_TEXT_BYTEPAIRMODEL_H
#define DSC_LIB_TEXT_BYTEPAIRMODEL_H

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace dsc::text {

class BytePairModel {
public:
  struct Merge {
    uint32_t rank;
    uint32_t newId;
  };

  llvm::StringMap<uint32_t> vocab;
  /// id -> token; ids the vocabulary skips hold std::nullopt.
  std::vector<std::optional<std::string>> tokens;
  /// (left id, right id) -> rank and merged id.
  llvm::DenseMap<uint64_t, Merge> merges;
  std::optional<uint32_t> unkId;
  bool fuseUnk = false;
  bool byteFallback = false;
  bool ignoreMerges = false;
  /// Ids of <0x00>..<0xFF>, where the vocabulary has them.
  std::vector<std::optional<uint32_t>> byteIds =
      std::vector<std::optional<uint32_t>>(256);

  static uint64_t pairKey(uint32_t a, uint32_t b) {
    return (static_cast<uint64_t>(a) << 32) | b;
  }

  /// Appends the ids of one word (well-formed UTF-8) to `out`.
  void tokenize(llvm::StringRef word, std::vector<uint32_t> &out) const;

private:
  std::vector<uint32_t> mergeWord(llvm::StringRef word) const;

  // Words seen before, as HF caches them (short words, bounded count).
  mutable std::mutex cacheMutex;
  mutable llvm::StringMap<std::vector<uint32_t>> cache;
};

} // namespace dsc::text

#endif // DSC_LIB_TEXT_BYTEPAIRMODEL_H
