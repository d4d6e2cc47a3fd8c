//===- Unicode.h - UTF-8 and Unicode properties for tokenizers --*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The Unicode the tokenizer needs: UTF-8 walking, Rust's lossy UTF-8
// decoding (HF decoders end in String::from_utf8_lossy), the character
// classes of GPT-2's pre-tokenizer regex, and NFC/NFD/NFKC/NFKD through
// ICU. Private to lib/Text.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_TEXT_UNICODE_H
#define DSC_LIB_TEXT_UNICODE_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace dsc::text {

/// True when `s` is well-formed UTF-8 (no surrogates, no overlongs).
bool isValidUtf8(llvm::StringRef s);

/// Length in bytes of the UTF-8 sequence that starts with `lead`, for
/// well-formed input.
inline unsigned utf8Length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

/// Decodes the code point at `s[pos]` of well-formed UTF-8.
char32_t decodeUtf8At(llvm::StringRef s, size_t pos);

void appendUtf8(std::string &out, char32_t cp);

/// Rust's String::from_utf8_lossy: each maximal invalid subpart becomes one
/// U+FFFD.
std::string utf8Lossy(llvm::StringRef bytes);

/// The classes of GPT-2's regex with Oniguruma's Unicode semantics.
enum class CharClass { Space, Letter, Number, Other };
CharClass classify(char32_t cp);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
/// Normalizes well-formed UTF-8.
std::string normalize(llvm::StringRef s, NormalForm form);

} // namespace dsc::text

#endif // DSC_LIB_TEXT_UNICODE_H
