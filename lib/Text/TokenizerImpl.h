//===- TokenizerImpl.h - A tokenizer.json's pipeline, as read ---*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// What TokenizerReader.cpp reads from a tokenizer.json and Tokenizer.cpp
// runs: added tokens, the normalizer, pre-tokenizer and decoder steps
// (Sequences flattened), the BPE model and the post-processor's template.
// Only the components dsc implements have a kind here; the reader refuses
// the rest. Private to lib/Text.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_TEXT_TOKENIZERIMPL_H
#define DSC_LIB_TEXT_TOKENIZERIMPL_H

#include "BytePairModel.h"
#include "Unicode.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"

#include <array>
#include <string>
#include <unordered_map>
#include <vector>

namespace dsc::text {

struct AddedToken {
  std::string content;
  /// What decode shows: HF maps a normalized token's id to its normalized
  /// content.
  std::string shown;
  uint32_t id = 0;
  bool singleWord = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

/// The added tokens one pass matches (HF's split_trie or
/// split_normalized_trie), leftmost-longest.
struct AddedTokenMatcher {
  struct Pattern {
    std::string text; // what is matched (normalized content, if normalized)
    size_t token;     // index into TokenizerImpl::addedTokens
  };
  std::vector<Pattern> patterns;
  /// Pattern indices by first byte, longest first.
  std::array<std::vector<size_t>, 256> byFirstByte;
};

struct NormalizerStep {
  enum Kind { Unicode, Prepend, Replace } kind;
  NormalForm form = NormalForm::NFC;
  std::string pattern; // Prepend: what to prepend; Replace: what to find
  std::string content; // Replace: what to put instead
};

enum class PrependScheme { Always, First, Never };

struct PreTokenizerStep {
  enum Kind { ByteLevel, Metaspace } kind;
  bool addPrefixSpace = false;
  bool useRegex = true;
  char32_t replacement = U'\u2581';
  PrependScheme prependScheme = PrependScheme::Always;
  bool split = true;
};

struct DecoderStep {
  enum Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace } kind;
  std::string pattern, content; // Replace
  char32_t stripContent = U' '; // Strip
  size_t start = 0, stop = 0;   // Strip
  char32_t replacement = U'\u2581';
  PrependScheme prependScheme = PrependScheme::Always;
};

struct TokenizerImpl {
  std::vector<AddedToken> addedTokens;
  // Not a DenseMap: decode looks up untrusted ids, and DenseMap reserves
  // two of them as its empty and tombstone keys.
  std::unordered_map<uint32_t, size_t> addedById;
  llvm::StringSet<> specialContents;
  AddedTokenMatcher rawMatcher, normalizedMatcher;

  std::vector<NormalizerStep> normalizers;
  std::vector<PreTokenizerStep> preTokenizers;
  BytePairModel model;
  /// The single-sequence template: ids before and after the text.
  std::vector<uint32_t> templatePrefix, templateSuffix;
  bool hasDecoder = false;
  std::vector<DecoderStep> decoders;

  std::string normalize(std::string text) const;
};

} // namespace dsc::text

#endif // DSC_LIB_TEXT_TOKENIZERIMPL_H
