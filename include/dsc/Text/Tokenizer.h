//===- Tokenizer.h - Hugging Face tokenizer.json encode/decode --*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A tokenizer read from a Hugging Face `tokenizer.json` that encodes text to
// ids and decodes ids to text exactly as the `tokenizers` library does, for
// the two BPE families dsc's models use: byte-level BPE (GPT-2, GPT-NeoX)
// and Llama/Mistral BPE with byte fallback. The goldens in test/Text/Inputs
// (made by scripts/hf-reference/tokenizer-goldens.py) are the contract.
//
// The file is untrusted: anything outside that subset (another model type,
// an unknown normalizer, a field with a value dsc does not implement) is
// refused with an error naming the field and its value, never ignored.
// Plain C++ on LLVM Support and ICU; no MLIR, no exceptions.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TEXT_TOKENIZER_H
#define DSC_TEXT_TOKENIZER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dsc::text {

struct TokenizerImpl;

class Tokenizer {
public:
  /// Reads `path`; errors name the file and the offending field.
  static llvm::Expected<std::unique_ptr<Tokenizer>>
  fromFile(llvm::StringRef path);
  /// Reads a tokenizer.json held in memory; `name` prefixes error messages.
  static llvm::Expected<std::unique_ptr<Tokenizer>>
  fromJSON(llvm::StringRef json, llvm::StringRef name = "tokenizer.json");

  ~Tokenizer();
  Tokenizer(const Tokenizer &) = delete;
  Tokenizer &operator=(const Tokenizer &) = delete;

  /// HF's `encode(text, add_special_tokens=...).ids`. Added tokens (e.g.
  /// <|endoftext|>, <s>) in `text` are matched before normalization, as HF
  /// does; `addSpecialTokens` applies the post-processor's template (Llama's
  /// BOS). Fails only on text that is not valid UTF-8. Thread-safe.
  llvm::Expected<std::vector<uint32_t>> encode(llvm::StringRef text,
                                               bool addSpecialTokens) const;

  /// HF's `decode(ids, skip_special_tokens=...)`: ids that name no token
  /// are dropped, as HF drops them.
  std::string decode(llvm::ArrayRef<uint32_t> ids,
                     bool skipSpecialTokens) const;

  /// One past the largest id of the model's vocabulary and added tokens:
  /// the rows an embedding needs.
  uint32_t vocabSize() const;
  std::optional<uint32_t> tokenToId(llvm::StringRef token) const;
  std::optional<std::string> idToToken(uint32_t id) const;
  /// True for added tokens marked special (what decode may skip).
  bool isSpecial(uint32_t id) const;

private:
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  std::unique_ptr<TokenizerImpl> impl;
};

} // namespace dsc::text

#endif // DSC_TEXT_TOKENIZER_H
