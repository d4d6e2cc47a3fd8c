//===- Tokenizer.cpp - HF's encode and decode pipeline --------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// encode follows HF's TokenizerImpl::encode_single_sequence: added tokens
// are cut out of the raw text first (those with normalized=false), each
// remaining piece is normalized and cut again (normalized=true tokens),
// pre-tokenized into words, and each word goes through BPE; the
// post-processor's template wraps the ids. decode maps ids to tokens (added
// tokens first) and runs the decoder chain, joining its output.
//
//===----------------------------------------------------------------------===//

#include "TokenizerImpl.h"

#include "dsc/Text/Tokenizer.h"

#include "llvm/ADT/StringExtras.h"

#include <unicode/uchar.h>

using namespace dsc::text;
using llvm::StringRef;

namespace {

/// GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the
/// rest to U+0100 onwards in byte order.
struct ByteMap {
  std::array<std::string, 256> byteToChar;
  llvm::DenseMap<char32_t, unsigned char> charToByte;
  ByteMap() {
    unsigned next = 0;
    for (unsigned b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                       (b >= 0xAE && b <= 0xFF);
      char32_t cp = printable ? b : 256 + next++;
      appendUtf8(byteToChar[b], cp);
      charToByte[cp] = static_cast<unsigned char>(b);
    }
  }
};

const ByteMap &byteMap() {
  static const ByteMap map;
  return map;
}

/// A piece of the input on its way to the model: text, or an added token
/// already resolved. `atStart` is HF's offsets_original().0 == 0, which
/// Metaspace's "first" scheme asks.
struct Piece {
  std::string text;
  std::optional<uint32_t> id;
  bool atStart = false;
};

/// Rust regex's \w: Alphabetic, marks, decimal digits, connector
/// punctuation, join controls.
bool isWordChar(char32_t c) {
  UChar32 u = static_cast<UChar32>(c);
  return u_hasBinaryProperty(u, UCHAR_ALPHABETIC) ||
         (U_GET_GC_MASK(u) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
         u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL);
}

char32_t lastChar(StringRef s) {
  size_t pos = s.size() - 1;
  while (pos > 0 && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80)
    --pos;
  return decodeUtf8At(s, pos);
}

/// HF's AddedVocabulary::find_matches plus split_with_indices.
void splitAddedTokens(const TokenizerImpl &impl,
                      const AddedTokenMatcher &matcher, const Piece &in,
                      std::vector<Piece> &out) {
  StringRef s = in.text;
  size_t startOffset = 0;
  auto emitText = [&](size_t from, size_t to) {
    if (from < to)
      out.push_back(
          {s.slice(from, to).str(), std::nullopt, in.atStart && from == 0});
  };
  for (size_t pos = 0; pos < s.size();) {
    const AddedTokenMatcher::Pattern *match = nullptr;
    for (size_t i : matcher.byFirstByte[static_cast<unsigned char>(s[pos])])
      if (s.substr(pos).starts_with(matcher.patterns[i].text)) {
        match = &matcher.patterns[i];
        break;
      }
    if (!match) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + match->text.size();
    pos = stop;
    const AddedToken &token = impl.addedTokens[match->token];
    if (token.singleWord) {
      bool startSpace =
          start == 0 || !isWordChar(lastChar(s.take_front(start)));
      bool stopSpace = stop == s.size() || !isWordChar(decodeUtf8At(s, stop));
      if (!startSpace || !stopSpace)
        continue;
    }
    if (token.lstrip) {
      // Rust's \s*$ on the text before: walk back whole White_Space
      // characters.
      size_t newStart = start;
      while (newStart > 0) {
        size_t prev = newStart - 1;
        while (prev > 0 && (static_cast<unsigned char>(s[prev]) & 0xC0) == 0x80)
          --prev;
        if (!u_isUWhiteSpace(static_cast<UChar32>(decodeUtf8At(s, prev))))
          break;
        newStart = prev;
      }
      start = std::max(newStart, startOffset);
    }
    if (token.rstrip) {
      while (stop < s.size() &&
             u_isUWhiteSpace(static_cast<UChar32>(decodeUtf8At(s, stop))))
        stop += utf8Length(static_cast<unsigned char>(s[stop]));
      pos = stop;
    }
    emitText(startOffset, start);
    out.push_back({"", token.id, false});
    startOffset = stop;
  }
  emitText(startOffset, s.size());
}

/// GPT-2's pre-tokenizer regex,
///   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
/// matched by hand: the alternatives in order at each position, each
/// greedy, the lookahead giving back one whitespace character.
void splitGpt2(StringRef s, std::vector<std::pair<size_t, size_t>> &out) {
  std::vector<size_t> offsets; // byte offset of each character, plus end
  std::vector<CharClass> classes;
  for (size_t pos = 0; pos < s.size();
       pos += utf8Length(static_cast<unsigned char>(s[pos]))) {
    offsets.push_back(pos);
    classes.push_back(classify(decodeUtf8At(s, pos)));
  }
  offsets.push_back(s.size());
  size_t n = classes.size();
  auto run = [&](size_t i, CharClass c) {
    while (i < n && classes[i] == c)
      ++i;
    return i;
  };
  for (size_t i = 0; i < n;) {
    size_t j = i;
    char first = s[offsets[i]];
    if (first == '\'' && i + 1 < n) {
      StringRef rest = s.substr(offsets[i + 1]);
      for (StringRef suffix : {"s", "t", "re", "ve", "m", "ll", "d"})
        if (rest.starts_with(suffix)) {
          j = i + 1 + suffix.size(); // ASCII: one byte a character
          break;
        }
    }
    if (j == i) {
      bool space = first == ' ' && i + 1 < n;
      for (CharClass c :
           {CharClass::Letter, CharClass::Number, CharClass::Other}) {
        if (classes[i] == c) {
          j = run(i, c);
          break;
        }
        if (space && classes[i + 1] == c) {
          j = run(i + 1, c);
          break;
        }
      }
    }
    if (j == i) {
      // classes[i] is whitespace here.
      size_t end = run(i, CharClass::Space);
      j = (end == n || end - i == 1) ? end : end - 1;
    }
    out.emplace_back(offsets[i], offsets[j]);
    i = j;
  }
}

void preTokenize(const PreTokenizerStep &step, const Piece &in,
                 std::vector<Piece> &out) {
  if (step.kind == PreTokenizerStep::ByteLevel) {
    std::string text = in.text;
    if (step.addPrefixSpace && !StringRef(text).starts_with(" "))
      text.insert(0, " ");
    std::vector<std::pair<size_t, size_t>> spans;
    if (step.useRegex)
      splitGpt2(text, spans);
    else
      spans.emplace_back(0, text.size());
    const ByteMap &map = byteMap();
    for (auto [from, to] : spans) {
      std::string mapped;
      for (size_t i = from; i < to; ++i)
        mapped += map.byteToChar[static_cast<unsigned char>(text[i])];
      out.push_back({std::move(mapped), std::nullopt, in.atStart && from == 0});
    }
    return;
  }
  // Metaspace.
  std::string rep;
  appendUtf8(rep, step.replacement);
  std::string text;
  for (char c : in.text) {
    if (c == ' ')
      text += rep;
    else
      text += c;
  }
  bool prepend = step.prependScheme == PrependScheme::Always ||
                 (step.prependScheme == PrependScheme::First && in.atStart);
  if (prepend && !text.empty() && !StringRef(text).starts_with(rep))
    text.insert(0, rep);
  if (!step.split) {
    out.push_back({std::move(text), std::nullopt, in.atStart});
    return;
  }
  // MergedWithNext: each replacement starts a new piece.
  size_t from = 0;
  for (size_t pos = StringRef(text).find(rep, 1); pos != StringRef::npos;
       pos = StringRef(text).find(rep, pos + rep.size())) {
    out.push_back(
        {text.substr(from, pos - from), std::nullopt, in.atStart && from == 0});
    from = pos;
  }
  out.push_back({text.substr(from), std::nullopt, in.atStart && from == 0});
}

std::string replaceAll(StringRef s, StringRef pattern, StringRef content) {
  std::string out;
  size_t from = 0;
  for (size_t pos = s.find(pattern); pos != StringRef::npos;
       pos = s.find(pattern, from)) {
    out.append(s.data() + from, pos - from);
    out.append(content.data(), content.size());
    from = pos + pattern.size();
  }
  out.append(s.data() + from, s.size() - from);
  return out;
}

std::vector<std::string> decodeStep(const DecoderStep &step,
                                    std::vector<std::string> tokens) {
  switch (step.kind) {
  case DecoderStep::ByteLevel: {
    const ByteMap &map = byteMap();
    std::string bytes;
    for (const std::string &t : tokens) {
      std::string mapped;
      bool all = true;
      for (size_t pos = 0; pos < t.size() && all;
           pos += utf8Length(static_cast<unsigned char>(t[pos]))) {
        auto it = map.charToByte.find(decodeUtf8At(t, pos));
        if (it == map.charToByte.end())
          all = false;
        else
          mapped += static_cast<char>(it->second);
      }
      bytes += all ? mapped : t;
    }
    return {utf8Lossy(bytes)};
  }
  case DecoderStep::Replace:
    for (std::string &t : tokens)
      t = replaceAll(t, step.pattern, step.content);
    return tokens;
  case DecoderStep::ByteFallback: {
    std::vector<std::string> out;
    std::string bytes;
    size_t count = 0;
    auto flush = [&] {
      if (!count)
        return;
      if (isValidUtf8(bytes))
        out.push_back(bytes);
      else
        for (size_t i = 0; i < count; ++i)
          out.push_back("\xEF\xBF\xBD");
      bytes.clear();
      count = 0;
    };
    for (std::string &t : tokens) {
      // Rust's u8::from_str_radix(&t[3..5], 16), which takes a '+' sign.
      unsigned value = 0;
      bool isByte =
          t.size() == 6 && StringRef(t).starts_with("<0x") && t[5] == '>';
      if (isByte) {
        StringRef digits = StringRef(t).substr(3, 2);
        if (digits[0] == '+')
          digits = digits.drop_front();
        isByte = !digits.empty() && llvm::all_of(digits, llvm::isHexDigit) &&
                 !digits.getAsInteger(16, value);
      }
      if (isByte) {
        bytes += static_cast<char>(value);
        ++count;
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    return out;
  }
  case DecoderStep::Fuse: {
    std::string joined;
    for (const std::string &t : tokens)
      joined += t;
    return {joined};
  }
  case DecoderStep::Strip:
    for (std::string &t : tokens) {
      std::vector<size_t> starts;
      for (size_t pos = 0; pos < t.size();
           pos += utf8Length(static_cast<unsigned char>(t[pos])))
        starts.push_back(pos);
      size_t n = starts.size();
      size_t startCut = 0;
      for (size_t i = 0; i < std::min(step.start, n); ++i) {
        if (decodeUtf8At(t, starts[i]) != step.stripContent)
          break;
        startCut = i + 1;
      }
      size_t stopCut = n;
      for (size_t i = 0; i < step.stop && i < n; ++i) {
        size_t index = n - i - 1;
        if (decodeUtf8At(t, starts[index]) != step.stripContent)
          break;
        stopCut = index;
      }
      if (stopCut <= startCut) {
        t.clear();
        continue;
      }
      size_t from = startCut < n ? starts[startCut] : t.size();
      size_t to = stopCut < n ? starts[stopCut] : t.size();
      t = t.substr(from, to - from);
    }
    return tokens;
  case DecoderStep::Metaspace:
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string &t = tokens[i];
      for (size_t pos = 0; pos < t.size();) {
        size_t len = utf8Length(static_cast<unsigned char>(t[pos]));
        if (decodeUtf8At(t, pos) == step.replacement) {
          if (!(i == 0 && step.prependScheme != PrependScheme::Never))
            out += ' ';
        } else {
          out.append(t, pos, len);
        }
        pos += len;
      }
      tokens[i] = std::move(out);
    }
    return tokens;
  }
  return tokens;
}

} // namespace

std::string TokenizerImpl::normalize(std::string text) const {
  for (const NormalizerStep &step : normalizers) {
    switch (step.kind) {
    case NormalizerStep::Unicode:
      text = dsc::text::normalize(text, step.form);
      break;
    case NormalizerStep::Prepend:
      if (!text.empty())
        text.insert(0, step.pattern);
      break;
    case NormalizerStep::Replace:
      text = replaceAll(text, step.pattern, step.content);
      break;
    }
  }
  return text;
}

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl)
    : impl(std::move(impl)) {}

Tokenizer::~Tokenizer() = default;

llvm::Expected<std::vector<uint32_t>>
Tokenizer::encode(StringRef text, bool addSpecialTokens) const {
  if (!isValidUtf8(text))
    return llvm::createStringError(std::errc::invalid_argument,
                                   "tokenizer: the text is not valid UTF-8");
  std::vector<Piece> raw;
  splitAddedTokens(*impl, impl->rawMatcher, {text.str(), std::nullopt, true},
                   raw);
  std::vector<Piece> pieces;
  for (Piece &p : raw) {
    if (p.id) {
      pieces.push_back(std::move(p));
      continue;
    }
    p.text = impl->normalize(std::move(p.text));
    if (!p.text.empty())
      splitAddedTokens(*impl, impl->normalizedMatcher, p, pieces);
  }
  std::vector<uint32_t> ids;
  if (addSpecialTokens)
    ids = impl->templatePrefix;
  std::vector<Piece> words, next;
  for (Piece &p : pieces) {
    if (p.id) {
      ids.push_back(*p.id);
      continue;
    }
    words.clear();
    words.push_back(std::move(p));
    for (const PreTokenizerStep &step : impl->preTokenizers) {
      next.clear();
      for (const Piece &w : words)
        if (!w.text.empty())
          preTokenize(step, w, next);
      std::swap(words, next);
    }
    for (const Piece &w : words)
      impl->model.tokenize(w.text, ids);
  }
  if (addSpecialTokens)
    ids.insert(ids.end(), impl->templateSuffix.begin(),
               impl->templateSuffix.end());
  return ids;
}

std::string Tokenizer::decode(llvm::ArrayRef<uint32_t> ids,
                              bool skipSpecialTokens) const {
  std::vector<std::string> tokens;
  for (uint32_t id : ids) {
    std::optional<std::string> token = idToToken(id);
    if (!token)
      continue;
    if (skipSpecialTokens && impl->specialContents.contains(*token))
      continue;
    tokens.push_back(std::move(*token));
  }
  if (!impl->hasDecoder)
    return llvm::join(tokens, " ");
  for (const DecoderStep &step : impl->decoders)
    tokens = decodeStep(step, std::move(tokens));
  return llvm::join(tokens, "");
}

uint32_t Tokenizer::vocabSize() const {
  uint32_t size = static_cast<uint32_t>(impl->model.tokens.size());
  for (const AddedToken &t : impl->addedTokens)
    size = std::max(size, t.id + 1);
  return size;
}

std::optional<uint32_t> Tokenizer::tokenToId(StringRef token) const {
  for (const AddedToken &t : impl->addedTokens)
    if (t.content == token)
      return t.id;
  auto it = impl->model.vocab.find(token);
  if (it != impl->model.vocab.end())
    return it->second;
  return std::nullopt;
}

std::optional<std::string> Tokenizer::idToToken(uint32_t id) const {
  auto it = impl->addedById.find(id);
  if (it != impl->addedById.end())
    return impl->addedTokens[it->second].shown;
  if (id < impl->model.tokens.size() && impl->model.tokens[id])
    return *impl->model.tokens[id];
  return std::nullopt;
}

bool Tokenizer::isSpecial(uint32_t id) const {
  auto it = impl->addedById.find(id);
  return it != impl->addedById.end() && impl->addedTokens[it->second].special;
}
