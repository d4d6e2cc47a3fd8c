//===- Unicode.cpp - UTF-8 and Unicode properties for tokenizers ----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// UTF-8 by hand (the validity table of Unicode 3.9, table 3-7, which Rust
// follows too) and ICU for properties and normalization.
//
//===----------------------------------------------------------------------===//

#include "Unicode.h"

#include "llvm/Support/ErrorHandling.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

using namespace dsc::text;

namespace {

/// Bytes of the longest well-formed prefix of a UTF-8 sequence at
/// `s[pos]`, and whether that prefix is a whole character.
struct Utf8Step {
  size_t length;
  bool complete;
};

Utf8Step stepUtf8(llvm::StringRef s, size_t pos) {
  auto at = [&](size_t i) -> int {
    return pos + i < s.size() ? static_cast<unsigned char>(s[pos + i]) : -1;
  };
  int b0 = at(0);
  if (b0 < 0x80)
    return {1, true};
  int need;
  int lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0)
      lo = 0xA0;
    else if (b0 == 0xED)
      hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0)
      lo = 0x90;
    else if (b0 == 0xF4)
      hi = 0x8F;
  } else {
    return {1, false};
  }
  int b1 = at(1);
  if (b1 < lo || b1 > hi)
    return {1, false};
  for (int i = 2; i <= need; ++i) {
    int b = at(i);
    if (b < 0x80 || b > 0xBF)
      return {static_cast<size_t>(i), false};
  }
  return {static_cast<size_t>(need) + 1, true};
}

} // namespace

bool dsc::text::isValidUtf8(llvm::StringRef s) {
  for (size_t pos = 0; pos < s.size();) {
    Utf8Step step = stepUtf8(s, pos);
    if (!step.complete)
      return false;
    pos += step.length;
  }
  return true;
}

char32_t dsc::text::decodeUtf8At(llvm::StringRef s, size_t pos) {
  auto b = [&](size_t i) {
    return static_cast<char32_t>(static_cast<unsigned char>(s[pos + i]));
  };
  switch (utf8Length(static_cast<unsigned char>(s[pos]))) {
  case 1:
    return b(0);
  case 2:
    return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
  case 3:
    return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  default:
    return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) |
           ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void dsc::text::appendUtf8(std::string &out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string dsc::text::utf8Lossy(llvm::StringRef bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t pos = 0; pos < bytes.size();) {
    Utf8Step step = stepUtf8(bytes, pos);
    if (step.complete)
      out.append(bytes.data() + pos, step.length);
    else
      out += "\xEF\xBF\xBD";
    pos += step.length;
  }
  return out;
}

CharClass dsc::text::classify(char32_t cp) {
  // Oniguruma's \s in Unicode mode is the White_Space property.
  if (u_isUWhiteSpace(static_cast<UChar32>(cp)))
    return CharClass::Space;
  uint32_t mask = U_GET_GC_MASK(static_cast<UChar32>(cp));
  if (mask & U_GC_L_MASK)
    return CharClass::Letter;
  if (mask & U_GC_N_MASK)
    return CharClass::Number;
  return CharClass::Other;
}

std::string dsc::text::normalize(llvm::StringRef s, NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2 *normalizer = nullptr;
  switch (form) {
  case NormalForm::NFC:
    normalizer = icu::Normalizer2::getNFCInstance(status);
    break;
  case NormalForm::NFD:
    normalizer = icu::Normalizer2::getNFDInstance(status);
    break;
  case NormalForm::NFKC:
    normalizer = icu::Normalizer2::getNFKCInstance(status);
    break;
  case NormalForm::NFKD:
    normalizer = icu::Normalizer2::getNFKDInstance(status);
    break;
  }
  // ICU's normalization data ships inside libicudata; failing to load it is
  // a broken installation, not bad input.
  if (U_FAILURE(status) || !normalizer)
    llvm::report_fatal_error("ICU normalization data is unavailable");
  icu::UnicodeString in = icu::UnicodeString::fromUTF8(
      icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  // Most text is already normalized; skip the copy when it is.
  if (normalizer->isNormalized(in, status) && U_SUCCESS(status))
    return s.str();
  status = U_ZERO_ERROR;
  icu::UnicodeString out = normalizer->normalize(in, status);
  if (U_FAILURE(status))
    llvm::report_fatal_error("ICU normalization failed");
  std::string result;
  out.toUTF8String(result);
  return result;
}
