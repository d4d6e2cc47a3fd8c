//===- TokenizerReader.cpp - tokenizer.json to a TokenizerImpl ------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Reads the subset of HF's tokenizer.json that dsc implements and refuses
// everything else by name: every object's keys are checked against what
// the component has, every value against what dsc does with it. A key dsc
// does not know could change the ids, so it is an error, not a warning.
//
//===----------------------------------------------------------------------===//

#include "TokenizerImpl.h"

#include "dsc/Text/Tokenizer.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace dsc::text;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
namespace json = llvm::json;

namespace {

/// A value as the error shows it, cut short.
std::string show(const json::Value &v) {
  std::string s = llvm::formatv("{0}", v).str();
  if (s.size() > 60)
    s = s.substr(0, 57) + "...";
  return s;
}

class Reader {
public:
  explicit Reader(StringRef file) : file(file.str()) {}

  Error fail(const llvm::Twine &path, const llvm::Twine &msg) const {
    return llvm::createStringError(
        std::errc::invalid_argument, "%s",
        (file + ": " + path + ": " + msg).str().c_str());
  }
  Error unsupported(const llvm::Twine &path, const json::Value &v,
                    const llvm::Twine &what) const {
    return fail(path, "unsupported value " + show(v) + " (" + what + ")");
  }

  Expected<const json::Object *> object(const json::Value &v,
                                        const llvm::Twine &path) const {
    if (const json::Object *o = v.getAsObject())
      return o;
    return fail(path, "expected an object, got " + show(v));
  }

  /// A step of a pipeline (normalizer, pre-tokenizer, decoder,
  /// post-processor): an object and its "type".
  struct TypedStep {
    const json::Object *object;
    StringRef type;
  };
  Expected<TypedStep> typedStep(const json::Value &v,
                                const llvm::Twine &path) const {
    Expected<const json::Object *> o = object(v, path);
    if (!o)
      return o.takeError();
    Expected<StringRef> type = string(**o, "type", path);
    if (!type)
      return type.takeError();
    return TypedStep{*o, *type};
  }

  /// A "Sequence" step: only `type` and the array `key`, each of whose
  /// elements `item(element, path)` reads in order.
  Error sequence(const json::Object &o, const llvm::Twine &path, StringRef key,
                 llvm::function_ref<Error(const json::Value &,
                                          const llvm::Twine &)>
                     item) const {
    if (Error e = keys(o, path, {"type", key}))
      return e;
    const json::Value *v = o.get(key);
    const json::Array *list = v ? v->getAsArray() : nullptr;
    if (!list)
      return fail(path + "." + key, "expected an array");
    for (size_t i = 0; i < list->size(); ++i)
      if (Error e = item((*list)[i], path + "." + key + "[" + llvm::Twine(i) +
                                         "]"))
        return e;
    return Error::success();
  }

  /// Refuses keys outside `allowed`.
  Error keys(const json::Object &o, const llvm::Twine &path,
             llvm::ArrayRef<StringRef> allowed) const {
    for (const auto &kv : o)
      if (!llvm::is_contained(allowed, StringRef(kv.first)))
        return fail(path + "." + StringRef(kv.first),
                    "unknown field (dsc does not implement it)");
    return Error::success();
  }

  Expected<StringRef> string(const json::Object &o, StringRef key,
                             const llvm::Twine &path) const {
    const json::Value *v = o.get(key);
    if (!v)
      return fail(path + "." + key, "missing");
    if (std::optional<StringRef> s = v->getAsString())
      return *s;
    return fail(path + "." + key, "expected a string, got " + show(*v));
  }

  Expected<bool> boolean(const json::Object &o, StringRef key,
                         const llvm::Twine &path,
                         std::optional<bool> fallback) const {
    const json::Value *v = o.get(key);
    if (!v) {
      if (fallback)
        return *fallback;
      return fail(path + "." + key, "missing");
    }
    if (std::optional<bool> b = v->getAsBoolean())
      return *b;
    return fail(path + "." + key, "expected true or false, got " + show(*v));
  }

  Expected<uint32_t> id(const json::Value &v, const llvm::Twine &path) const {
    std::optional<int64_t> i = v.getAsInteger();
    if (!i || *i < 0 || *i > INT32_MAX)
      return fail(path, "expected a token id (0 to 2^31-1), got " + show(v));
    return static_cast<uint32_t>(*i);
  }

  /// One code point, as HF's `char` fields.
  Expected<char32_t> character(const json::Object &o, StringRef key,
                               const llvm::Twine &path) const {
    Expected<StringRef> s = string(o, key, path);
    if (!s)
      return s.takeError();
    if (s->empty() ||
        utf8Length(static_cast<unsigned char>((*s)[0])) != s->size())
      return fail(path + "." + key,
                  "expected one character, got \"" + *s + "\"");
    return decodeUtf8At(*s, 0);
  }

  Expected<PrependScheme> prependScheme(const json::Object &o,
                                        const llvm::Twine &path) const {
    PrependScheme scheme = PrependScheme::Always;
    if (const json::Value *v = o.get("prepend_scheme")) {
      std::optional<StringRef> s = v->getAsString();
      if (s && *s == "always")
        scheme = PrependScheme::Always;
      else if (s && *s == "first")
        scheme = PrependScheme::First;
      else if (s && *s == "never")
        scheme = PrependScheme::Never;
      else
        return unsupported(path + ".prepend_scheme", *v,
                           "always, first or never");
    }
    // Older files spell the scheme as add_prefix_space; HF refuses false
    // next to a scheme that prepends.
    if (const json::Value *v = o.get("add_prefix_space")) {
      std::optional<bool> b = v->getAsBoolean();
      if (!b && v->kind() != json::Value::Null)
        return unsupported(path + ".add_prefix_space", *v, "true or false");
      if (b && !*b) {
        if (scheme != PrependScheme::Never)
          return fail(path + ".add_prefix_space",
                      "false does not match prepend_scheme");
        scheme = PrependScheme::Never;
      }
    }
    return scheme;
  }

  Error normalizer(const json::Value &v, const llvm::Twine &path,
                   std::vector<NormalizerStep> &out) const;
  Error preTokenizer(const json::Value &v, const llvm::Twine &path,
                     std::vector<PreTokenizerStep> &out) const;
  Error decoder(const json::Value &v, const llvm::Twine &path,
                std::vector<DecoderStep> &out) const;
  Error model(const json::Value &v, BytePairModel &out) const;
  Error postProcessor(const json::Value &v, const llvm::Twine &path,
                      TokenizerImpl &impl, bool &haveTemplate) const;
  Error addedTokens(const json::Value &v, TokenizerImpl &impl) const;

  /// A Replace's {"String": ...} pattern (a regex is refused).
  Expected<std::string> stringPattern(const json::Object &o,
                                      const llvm::Twine &path) const {
    const json::Value *p = o.get("pattern");
    if (!p)
      return fail(path + ".pattern", "missing");
    Expected<const json::Object *> po = object(*p, path + ".pattern");
    if (!po)
      return po.takeError();
    if (Error e = keys(**po, path + ".pattern", {"String", "Regex"}))
      return std::move(e);
    if ((*po)->get("Regex"))
      return unsupported(path + ".pattern", *p,
                         "dsc implements string patterns, not Regex");
    Expected<StringRef> s = string(**po, "String", path + ".pattern");
    if (!s)
      return s.takeError();
    if (s->empty())
      return fail(path + ".pattern.String", "empty pattern");
    return s->str();
  }

private:
  std::string file;
};

Error Reader::normalizer(const json::Value &v, const llvm::Twine &path,
                         std::vector<NormalizerStep> &out) const {
  Expected<TypedStep> typed = typedStep(v, path);
  if (!typed)
    return typed.takeError();
  const json::Object &o = *typed->object;
  const StringRef type = typed->type;
  if (type == "Sequence")
    return sequence(o, path, "normalizers",
                    [&](const json::Value &item, const llvm::Twine &at) {
                      return normalizer(item, at, out);
                    });
  NormalizerStep step{NormalizerStep::Unicode};
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    if (Error e = keys(o, path, {"type"}))
      return e;
    step.form = type == "NFC"    ? NormalForm::NFC
                : type == "NFD"  ? NormalForm::NFD
                : type == "NFKC" ? NormalForm::NFKC
                                 : NormalForm::NFKD;
  } else if (type == "Prepend") {
    if (Error e = keys(o, path, {"type", "prepend"}))
      return e;
    Expected<StringRef> p = string(o, "prepend", path);
    if (!p)
      return p.takeError();
    step.kind = NormalizerStep::Prepend;
    step.pattern = p->str();
  } else if (type == "Replace") {
    if (Error e = keys(o, path, {"type", "pattern", "content"}))
      return e;
    Expected<std::string> p = stringPattern(o, path);
    if (!p)
      return p.takeError();
    Expected<StringRef> c = string(o, "content", path);
    if (!c)
      return c.takeError();
    step.kind = NormalizerStep::Replace;
    step.pattern = *p;
    step.content = c->str();
  } else {
    return unsupported(path + ".type", *o.get("type"),
                       "dsc implements NFC, NFD, NFKC, NFKD, Prepend, "
                       "Replace and Sequence");
  }
  out.push_back(std::move(step));
  return Error::success();
}

Error Reader::preTokenizer(const json::Value &v, const llvm::Twine &path,
                           std::vector<PreTokenizerStep> &out) const {
  Expected<TypedStep> typed = typedStep(v, path);
  if (!typed)
    return typed.takeError();
  const json::Object &o = *typed->object;
  const StringRef type = typed->type;
  if (type == "Sequence")
    return sequence(o, path, "pretokenizers",
                    [&](const json::Value &item, const llvm::Twine &at) {
                      return preTokenizer(item, at, out);
                    });
  PreTokenizerStep step{PreTokenizerStep::ByteLevel};
  if (type == "ByteLevel") {
    if (Error e = keys(
            o, path, {"type", "add_prefix_space", "trim_offsets", "use_regex"}))
      return e;
    Expected<bool> prefix = boolean(o, "add_prefix_space", path, true);
    if (!prefix)
      return prefix.takeError();
    Expected<bool> regex = boolean(o, "use_regex", path, true);
    if (!regex)
      return regex.takeError();
    // trim_offsets moves offsets only, never ids.
    Expected<bool> trim = boolean(o, "trim_offsets", path, true);
    if (!trim)
      return trim.takeError();
    step.addPrefixSpace = *prefix;
    step.useRegex = *regex;
  } else if (type == "Metaspace") {
    if (Error e = keys(o, path,
                       {"type", "replacement", "add_prefix_space",
                        "prepend_scheme", "split", "str_rep"}))
      return e;
    step.kind = PreTokenizerStep::Metaspace;
    Expected<char32_t> r = character(o, "replacement", path);
    if (!r)
      return r.takeError();
    step.replacement = *r;
    Expected<PrependScheme> scheme = prependScheme(o, path);
    if (!scheme)
      return scheme.takeError();
    step.prependScheme = *scheme;
    Expected<bool> split = boolean(o, "split", path, true);
    if (!split)
      return split.takeError();
    step.split = *split;
  } else {
    return unsupported(path + ".type", *o.get("type"),
                       "dsc implements ByteLevel, Metaspace and Sequence");
  }
  out.push_back(step);
  return Error::success();
}

Error Reader::decoder(const json::Value &v, const llvm::Twine &path,
                      std::vector<DecoderStep> &out) const {
  Expected<TypedStep> typed = typedStep(v, path);
  if (!typed)
    return typed.takeError();
  const json::Object &o = *typed->object;
  const StringRef type = typed->type;
  if (type == "Sequence")
    return sequence(o, path, "decoders",
                    [&](const json::Value &item, const llvm::Twine &at) {
                      return decoder(item, at, out);
                    });
  DecoderStep step{DecoderStep::ByteLevel};
  if (type == "ByteLevel") {
    if (Error e = keys(
            o, path, {"type", "add_prefix_space", "trim_offsets", "use_regex"}))
      return e;
    for (StringRef key : {"add_prefix_space", "trim_offsets", "use_regex"})
      if (Expected<bool> b = boolean(o, key, path, true); !b)
        return b.takeError();
  } else if (type == "Replace") {
    if (Error e = keys(o, path, {"type", "pattern", "content"}))
      return e;
    Expected<std::string> p = stringPattern(o, path);
    if (!p)
      return p.takeError();
    Expected<StringRef> c = string(o, "content", path);
    if (!c)
      return c.takeError();
    step.kind = DecoderStep::Replace;
    step.pattern = *p;
    step.content = c->str();
  } else if (type == "ByteFallback" || type == "Fuse") {
    if (Error e = keys(o, path, {"type"}))
      return e;
    step.kind = type == "Fuse" ? DecoderStep::Fuse : DecoderStep::ByteFallback;
  } else if (type == "Strip") {
    if (Error e = keys(o, path, {"type", "content", "start", "stop"}))
      return e;
    step.kind = DecoderStep::Strip;
    Expected<char32_t> c = character(o, "content", path);
    if (!c)
      return c.takeError();
    step.stripContent = *c;
    for (StringRef key : {"start", "stop"}) {
      const json::Value *n = o.get(key);
      int64_t count = n ? n->getAsInteger().value_or(-1) : -1;
      if (count < 0)
        return fail(path + "." + key,
                    "expected a count, got " + (n ? show(*n) : "nothing"));
      (key == "start" ? step.start : step.stop) = static_cast<size_t>(count);
    }
  } else if (type == "Metaspace") {
    if (Error e = keys(o, path,
                       {"type", "replacement", "add_prefix_space",
                        "prepend_scheme", "split", "str_rep"}))
      return e;
    step.kind = DecoderStep::Metaspace;
    Expected<char32_t> r = character(o, "replacement", path);
    if (!r)
      return r.takeError();
    step.replacement = *r;
    Expected<PrependScheme> scheme = prependScheme(o, path);
    if (!scheme)
      return scheme.takeError();
    step.prependScheme = *scheme;
    if (Expected<bool> b = boolean(o, "split", path, true); !b)
      return b.takeError();
  } else {
    return unsupported(path + ".type", *o.get("type"),
                       "dsc implements ByteLevel, Replace, ByteFallback, "
                       "Fuse, Strip, Metaspace and Sequence");
  }
  out.push_back(std::move(step));
  return Error::success();
}

Error Reader::model(const json::Value &v, BytePairModel &out) const {
  Expected<const json::Object *> o = object(v, "model");
  if (!o)
    return o.takeError();
  Expected<StringRef> type = string(**o, "type", "model");
  if (!type)
    return type.takeError();
  if (*type != "BPE")
    return unsupported("model.type", *(*o)->get("type"), "dsc implements BPE");
  if (Error e =
          keys(**o, "model",
               {"type", "dropout", "unk_token", "continuing_subword_prefix",
                "end_of_word_suffix", "fuse_unk", "byte_fallback",
                "ignore_merges", "vocab", "merges"}))
    return e;
  // Dropout 0 is no dropout in HF too; anything else is random.
  if (const json::Value *d = (*o)->get("dropout")) {
    std::optional<double> p = d->getAsNumber();
    if (d->kind() != json::Value::Null && !(p && *p == 0.0))
      return unsupported("model.dropout", *d, "dsc implements null");
  }
  // GPT-2's own file spells "no prefix" as "", which HF treats as null.
  for (StringRef key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const json::Value *p = (*o)->get(key);
        p && p->kind() != json::Value::Null &&
        p->getAsString() != std::optional<StringRef>(""))
      return unsupported("model." + key, *p, "dsc implements null or \"\"");
  Expected<bool> fuse = boolean(**o, "fuse_unk", "model", false);
  if (!fuse)
    return fuse.takeError();
  Expected<bool> fallback = boolean(**o, "byte_fallback", "model", false);
  if (!fallback)
    return fallback.takeError();
  Expected<bool> ignore = boolean(**o, "ignore_merges", "model", false);
  if (!ignore)
    return ignore.takeError();
  out.fuseUnk = *fuse;
  out.byteFallback = *fallback;
  out.ignoreMerges = *ignore;

  const json::Value *vocabValue = (*o)->get("vocab");
  const json::Object *vocab = vocabValue ? vocabValue->getAsObject() : nullptr;
  if (!vocab)
    return fail("model.vocab", "expected an object of token to id");
  for (const auto &kv : *vocab) {
    Expected<uint32_t> i =
        id(kv.second, "model.vocab[\"" + StringRef(kv.first) + "\"]");
    if (!i)
      return i.takeError();
    if (*i >= out.tokens.size()) {
      // Ids are untrusted: refuse a vocabulary far sparser than its size.
      if (*i > 16 * vocab->size() + 1024)
        return fail("model.vocab[\"" + StringRef(kv.first) + "\"]",
                    "id " + llvm::Twine(*i) + " is far past the " +
                        llvm::Twine(vocab->size()) + " tokens");
      out.tokens.resize(*i + 1);
    }
    if (out.tokens[*i])
      return fail("model.vocab", "id " + llvm::Twine(*i) + " names both \"" +
                                     *out.tokens[*i] + "\" and \"" +
                                     StringRef(kv.first) + "\"");
    out.tokens[*i] = kv.first.str();
    out.vocab[kv.first] = *i;
  }
  for (unsigned b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = out.vocab.find(name);
    if (it != out.vocab.end())
      out.byteIds[b] = it->second;
  }

  if (const json::Value *unk = (*o)->get("unk_token");
      unk && unk->kind() != json::Value::Null) {
    std::optional<StringRef> s = unk->getAsString();
    if (!s)
      return fail("model.unk_token", "expected a string, got " + show(*unk));
    auto it = out.vocab.find(*s);
    if (it == out.vocab.end())
      return fail("model.unk_token", "\"" + *s + "\" is not in the vocabulary");
    out.unkId = it->second;
  }

  const json::Value *mergesValue = (*o)->get("merges");
  const json::Array *merges = mergesValue ? mergesValue->getAsArray() : nullptr;
  if (!merges)
    return fail("model.merges", "expected an array");
  auto lookup = [&](StringRef token,
                    const llvm::Twine &path) -> Expected<uint32_t> {
    auto it = out.vocab.find(token);
    if (it == out.vocab.end())
      return fail(path, "\"" + token + "\" is not in the vocabulary");
    return it->second;
  };
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    std::string path = llvm::formatv("model.merges[{0}]", rank).str();
    const json::Value &m = (*merges)[rank];
    StringRef left, right;
    if (std::optional<StringRef> s = m.getAsString()) {
      // The legacy "a b" spelling: exactly one space.
      llvm::SmallVector<StringRef, 3> parts;
      s->split(parts, ' ');
      if (parts.size() != 2)
        return fail(path, "expected \"left right\", got " + show(m));
      left = parts[0];
      right = parts[1];
    } else if (const json::Array *pair = m.getAsArray();
               pair && pair->size() == 2 && (*pair)[0].getAsString() &&
               (*pair)[1].getAsString()) {
      left = *(*pair)[0].getAsString();
      right = *(*pair)[1].getAsString();
    } else {
      return fail(path, "expected [left, right], got " + show(m));
    }
    Expected<uint32_t> a = lookup(left, path);
    if (!a)
      return a.takeError();
    Expected<uint32_t> b = lookup(right, path);
    if (!b)
      return b.takeError();
    Expected<uint32_t> merged = lookup((left + right).str(), path);
    if (!merged)
      return merged.takeError();
    // A repeated pair takes the later rank, as HF's map insertion does.
    out.merges[BytePairModel::pairKey(*a, *b)] = {static_cast<uint32_t>(rank),
                                                  *merged};
  }
  return Error::success();
}

Error Reader::postProcessor(const json::Value &v, const llvm::Twine &path,
                            TokenizerImpl &impl, bool &haveTemplate) const {
  Expected<TypedStep> typed = typedStep(v, path);
  if (!typed)
    return typed.takeError();
  const json::Object &o = *typed->object;
  const StringRef type = typed->type;
  if (type == "Sequence")
    return sequence(o, path, "processors",
                    [&](const json::Value &item, const llvm::Twine &at) {
                      return postProcessor(item, at, impl, haveTemplate);
                    });
  if (type == "ByteLevel") {
    // Offsets only; the ids pass through.
    if (Error e = keys(
            o, path, {"type", "add_prefix_space", "trim_offsets", "use_regex"}))
      return e;
    for (StringRef key : {"add_prefix_space", "trim_offsets", "use_regex"})
      if (Expected<bool> b = boolean(o, key, path, true); !b)
        return b.takeError();
    return Error::success();
  }
  if (type != "TemplateProcessing")
    return unsupported(path + ".type", *o.get("type"),
                       "dsc implements ByteLevel, TemplateProcessing and "
                       "Sequence");
  if (Error e = keys(o, path, {"type", "single", "pair", "special_tokens"}))
    return e;
  if (haveTemplate)
    return fail(path, "a second TemplateProcessing");
  haveTemplate = true;
  // special_tokens: name -> {id, ids, tokens}.
  llvm::StringMap<std::vector<uint32_t>> specials;
  if (const json::Value *s = o.get("special_tokens")) {
    const json::Object *so = s->getAsObject();
    if (!so)
      return fail(path + ".special_tokens", "expected an object");
    for (const auto &kv : *so) {
      std::string sp = (path + ".special_tokens." + StringRef(kv.first)).str();
      Expected<const json::Object *> entry = object(kv.second, sp);
      if (!entry)
        return entry.takeError();
      if (Error e = keys(**entry, sp, {"id", "ids", "tokens"}))
        return e;
      const json::Value *ids = (*entry)->get("ids");
      const json::Array *list = ids ? ids->getAsArray() : nullptr;
      if (!list)
        return fail(sp + ".ids", "expected an array of ids");
      std::vector<uint32_t> values;
      for (const json::Value &i : *list) {
        Expected<uint32_t> n = id(i, sp + ".ids");
        if (!n)
          return n.takeError();
        values.push_back(*n);
      }
      specials[kv.first] = std::move(values);
    }
  }
  // Both templates are checked; dsc encodes single sequences only.
  for (StringRef key : {"single", "pair"}) {
    const json::Value *t = o.get(key);
    const json::Array *pieces = t ? t->getAsArray() : nullptr;
    if (!pieces)
      return fail(path + "." + key, "expected an array of template pieces");
    bool seenA = false;
    for (size_t i = 0; i < pieces->size(); ++i) {
      std::string pp = (path + "." + key + "[" + llvm::Twine(i) + "]").str();
      Expected<const json::Object *> piece = object((*pieces)[i], pp);
      if (!piece)
        return piece.takeError();
      if ((*piece)->size() != 1)
        return fail(pp, "expected {\"SpecialToken\": ...} or "
                        "{\"Sequence\": ...}, got " +
                            show((*pieces)[i]));
      const auto &kv = *(*piece)->begin();
      Expected<const json::Object *> body = object(kv.second, pp);
      if (!body)
        return body.takeError();
      if (Error e = keys(**body, pp, {"id", "type_id"}))
        return e;
      Expected<StringRef> name = string(**body, "id", pp);
      if (!name)
        return name.takeError();
      if (StringRef(kv.first) == "Sequence") {
        if (*name != "A" && *name != "B")
          return unsupported(pp + ".id", *(*body)->get("id"), "A or B");
        if (key == "single" && (*name == "B" || seenA))
          return fail(pp, "the single template takes sequence A once");
        seenA = seenA || *name == "A";
        continue;
      }
      if (StringRef(kv.first) != "SpecialToken")
        return fail(pp,
                    "unknown template piece \"" + StringRef(kv.first) + "\"");
      auto it = specials.find(*name);
      if (it == specials.end())
        return fail(pp + ".id", "\"" + *name + "\" is not in special_tokens");
      if (key == "single") {
        std::vector<uint32_t> &dst =
            seenA ? impl.templateSuffix : impl.templatePrefix;
        dst.insert(dst.end(), it->second.begin(), it->second.end());
      }
    }
    if (key == "single" && !seenA)
      return fail(path + ".single", "the template never places sequence A");
  }
  return Error::success();
}

Error Reader::addedTokens(const json::Value &v, TokenizerImpl &impl) const {
  const json::Array *list = v.getAsArray();
  if (!list)
    return fail("added_tokens", "expected an array");
  for (size_t i = 0; i < list->size(); ++i) {
    std::string path = llvm::formatv("added_tokens[{0}]", i).str();
    Expected<const json::Object *> o = object((*list)[i], path);
    if (!o)
      return o.takeError();
    if (Error e = keys(**o, path,
                       {"id", "content", "single_word", "lstrip", "rstrip",
                        "normalized", "special"}))
      return e;
    AddedToken token;
    const json::Value *idValue = (*o)->get("id");
    if (!idValue)
      return fail(path + ".id", "missing");
    Expected<uint32_t> tokenId = id(*idValue, path + ".id");
    if (!tokenId)
      return tokenId.takeError();
    token.id = *tokenId;
    Expected<StringRef> content = string(**o, "content", path);
    if (!content)
      return content.takeError();
    if (content->empty())
      return fail(path + ".content", "empty");
    token.content = content->str();
    Expected<bool> special = boolean(**o, "special", path, false);
    if (!special)
      return special.takeError();
    token.special = *special;
    bool *flags[] = {&token.singleWord, &token.lstrip, &token.rstrip,
                     &token.normalized};
    StringRef names[] = {"single_word", "lstrip", "rstrip", "normalized"};
    for (int f = 0; f < 4; ++f) {
      // HF's default: normalized unless special.
      Expected<bool> b =
          boolean(**o, names[f], path, f == 3 ? !token.special : false);
      if (!b)
        return b.takeError();
      *flags[f] = *b;
    }
    if (impl.addedById.count(token.id))
      return fail(path + ".id",
                  "id " + llvm::Twine(token.id) + " is already an added token");
    impl.addedById[token.id] = impl.addedTokens.size();
    if (token.special)
      impl.specialContents.insert(token.content);
    impl.addedTokens.push_back(std::move(token));
  }
  return Error::success();
}

void addPattern(AddedTokenMatcher &matcher, std::string text, size_t token) {
  matcher.patterns.push_back({std::move(text), token});
}

void indexPatterns(AddedTokenMatcher &matcher) {
  for (size_t i = 0; i < matcher.patterns.size(); ++i)
    matcher.byFirstByte[static_cast<unsigned char>(matcher.patterns[i].text[0])]
        .push_back(i);
  for (auto &bucket : matcher.byFirstByte)
    llvm::stable_sort(bucket, [&](size_t a, size_t b) {
      return matcher.patterns[a].text.size() > matcher.patterns[b].text.size();
    });
}

} // namespace

/// LLVM's JSON parser recurses once a nesting level; a hostile file of a
/// million '[' would overflow the stack. tokenizer.json nests about six.
static bool nestsTooDeep(StringRef text) {
  constexpr int kMaxDepth = 64;
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth)
        return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

static Expected<std::unique_ptr<TokenizerImpl>> readTokenizer(StringRef text,
                                                              StringRef name) {
  Reader r(name);
  if (nestsTooDeep(text))
    return r.fail("JSON", "nested more than 64 deep");
  Expected<json::Value> root = json::parse(text);
  if (!root)
    return r.fail("JSON", llvm::toString(root.takeError()));
  Expected<const json::Object *> top = r.object(*root, "top level");
  if (!top)
    return top.takeError();
  const json::Object &o = **top;
  if (Error e = r.keys(o, "tokenizer",
                       {"version", "truncation", "padding", "added_tokens",
                        "normalizer", "pre_tokenizer", "model",
                        "post_processor", "decoder"}))
    return std::move(e);
  auto impl = std::make_unique<TokenizerImpl>();
  if (const json::Value *v = o.get("version");
      v && v->getAsString() != std::optional<StringRef>("1.0"))
    return r.unsupported("version", *v, "dsc reads \"1.0\"");
  // Truncation and padding change what encode returns; dsc's callers do
  // their own, so a file that asks for either is refused.
  for (StringRef key : {"truncation", "padding"})
    if (const json::Value *v = o.get(key); v && v->kind() != json::Value::Null)
      return r.unsupported(key, *v, "dsc implements null");

  const json::Value *model = o.get("model");
  if (!model)
    return r.fail("model", "missing");
  if (Error e = r.model(*model, impl->model))
    return std::move(e);
  auto present = [&](StringRef key) -> const json::Value * {
    const json::Value *v = o.get(key);
    return v && v->kind() != json::Value::Null ? v : nullptr;
  };
  if (const json::Value *v = present("normalizer"))
    if (Error e = r.normalizer(*v, "normalizer", impl->normalizers))
      return std::move(e);
  if (const json::Value *v = present("pre_tokenizer"))
    if (Error e = r.preTokenizer(*v, "pre_tokenizer", impl->preTokenizers))
      return std::move(e);
  if (const json::Value *v = present("decoder")) {
    impl->hasDecoder = true;
    if (Error e = r.decoder(*v, "decoder", impl->decoders))
      return std::move(e);
  }
  bool haveTemplate = false;
  if (const json::Value *v = present("post_processor"))
    if (Error e = r.postProcessor(*v, "post_processor", *impl, haveTemplate))
      return std::move(e);
  if (const json::Value *v = present("added_tokens"))
    if (Error e = r.addedTokens(*v, *impl))
      return std::move(e);

  for (size_t i = 0; i < impl->addedTokens.size(); ++i) {
    AddedToken &t = impl->addedTokens[i];
    // A token the model also has under another id would decode ambiguously.
    auto it = impl->model.vocab.find(t.content);
    if (it != impl->model.vocab.end() && it->second != t.id)
      return r.fail(llvm::formatv("added_tokens[{0}]", i).str(),
                    "\"" + t.content + "\" has id " + llvm::Twine(t.id) +
                        " but the model's vocabulary says " +
                        llvm::Twine(it->second));
    t.shown = t.content;
    if (t.normalized) {
      // HF matches a normalized token by its normalized content, and
      // decodes its id to that too.
      std::string pattern = impl->normalize(t.content);
      t.shown = pattern;
      if (!pattern.empty())
        addPattern(impl->normalizedMatcher, std::move(pattern), i);
    } else {
      addPattern(impl->rawMatcher, t.content, i);
    }
  }
  indexPatterns(impl->rawMatcher);
  indexPatterns(impl->normalizedMatcher);
  return std::move(impl);
}

Expected<std::unique_ptr<Tokenizer>> Tokenizer::fromJSON(StringRef json,
                                                         StringRef name) {
  Expected<std::unique_ptr<TokenizerImpl>> impl = readTokenizer(json, name);
  if (!impl)
    return impl.takeError();
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(*impl)));
}

Expected<std::unique_ptr<Tokenizer>> Tokenizer::fromFile(StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                  /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), "%s: cannot read: %s",
                                   path.str().c_str(),
                                   buffer.getError().message().c_str());
  return fromJSON((*buffer)->getBuffer(), path);
}
