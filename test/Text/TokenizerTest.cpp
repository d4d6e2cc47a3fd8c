//===- TokenizerTest.cpp - dsc's tokenizer against Hugging Face's ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The goldens are what HF `tokenizers` encodes and decodes for seeded
// strings (scripts/hf-reference/tokenizer-goldens.py); every one must match.
// Then the refusals (each names its field and value), truncated and
// byte-flipped files (errors, never crashes), and encode speed.
//
//===----------------------------------------------------------------------===//

#include "dsc/Text/Tokenizer.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <random>

using namespace dsc::text;
namespace json = llvm::json;

namespace {

std::string inputPath(llvm::StringRef name) {
  return (llvm::Twine(DSC_TOKENIZER_INPUTS) + "/" + name).str();
}

std::string readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  return (*buffer)->getBuffer().str();
}

std::string gunzip(const std::string &path) {
  std::string packed = readFile(path);
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
    return "";
  zs.next_in = reinterpret_cast<Bytef *>(packed.data());
  zs.avail_in = static_cast<uInt>(packed.size());
  std::string out;
  char chunk[1 << 16];
  int rc;
  do {
    zs.next_out = reinterpret_cast<Bytef *>(chunk);
    zs.avail_out = sizeof(chunk);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(chunk, sizeof(chunk) - zs.avail_out);
  } while (rc == Z_OK);
  inflateEnd(&zs);
  EXPECT_EQ(rc, Z_STREAM_END) << path << " is not a complete gzip stream";
  return out;
}

std::unique_ptr<Tokenizer> load(llvm::StringRef name) {
  auto tok = Tokenizer::fromFile(inputPath((name + ".tokenizer.json").str()));
  if (!tok) {
    ADD_FAILURE() << llvm::toString(tok.takeError());
    return nullptr;
  }
  return std::move(*tok);
}

struct Golden {
  std::string text;
  std::vector<uint32_t> ids, specialIds;
  std::string dec, decSkip, decSpecial, decSpecialSkip;
};

std::vector<uint32_t> idsOf(const json::Value &v) {
  std::vector<uint32_t> ids;
  for (const json::Value &i : *v.getAsArray())
    ids.push_back(static_cast<uint32_t>(*i.getAsInteger()));
  return ids;
}

/// Resolves the file's "same as" nulls (see the generator's header).
std::vector<Golden> readGoldens(llvm::StringRef name) {
  std::string text = gunzip(inputPath((name + ".goldens.jsonl.gz").str()));
  std::vector<Golden> out;
  llvm::StringRef rest = text;
  while (!rest.empty()) {
    auto [line, tail] = rest.split('\n');
    rest = tail;
    if (line.empty())
      continue;
    auto value = json::parse(line);
    if (!value) {
      ADD_FAILURE() << llvm::toString(value.takeError());
      break;
    }
    const json::Array &a = *value->getAsArray();
    auto field = [&](size_t i) -> const json::Value * {
      return i < a.size() && a[i].kind() != json::Value::Null ? &a[i] : nullptr;
    };
    Golden g;
    g.text = a[0].getAsString()->str();
    g.ids = idsOf(a[1]);
    g.specialIds = field(2) ? idsOf(*field(2)) : g.ids;
    g.dec = field(3) ? field(3)->getAsString()->str() : g.text;
    g.decSkip = field(4) ? field(4)->getAsString()->str() : g.dec;
    g.decSpecial = field(5) ? field(5)->getAsString()->str() : g.dec;
    g.decSpecialSkip = field(6) ? field(6)->getAsString()->str() : g.decSkip;
    out.push_back(std::move(g));
  }
  return out;
}

std::string show(const std::vector<uint32_t> &ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i)
    s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "]";
}

/// Every golden of one tokenizer: two encodes, four decodes.
void checkGoldens(llvm::StringRef name, size_t expectedCount) {
  std::unique_ptr<Tokenizer> tok = load(name);
  ASSERT_TRUE(tok);
  std::vector<Golden> goldens = readGoldens(name);
  ASSERT_EQ(goldens.size(), expectedCount);
  size_t failures = 0, checks = 0;
  auto report = [&](const Golden &g, const std::string &what) {
    if (++failures <= 10)
      ADD_FAILURE() << name.str() << ": " << what << " for \"" << g.text
                    << "\"";
  };
  for (const Golden &g : goldens) {
    for (bool special : {false, true}) {
      auto ids = tok->encode(g.text, special);
      ++checks;
      if (!ids) {
        report(g, llvm::toString(ids.takeError()));
        continue;
      }
      const std::vector<uint32_t> &want = special ? g.specialIds : g.ids;
      if (*ids != want)
        report(g, "encode(special=" + std::to_string(special) + ") " +
                      show(*ids) + " != HF " + show(want));
    }
    struct {
      const std::vector<uint32_t> &ids;
      bool skip;
      const std::string &want;
    } decodes[] = {{g.ids, false, g.dec},
                   {g.ids, true, g.decSkip},
                   {g.specialIds, false, g.decSpecial},
                   {g.specialIds, true, g.decSpecialSkip}};
    for (const auto &d : decodes) {
      ++checks;
      std::string got = tok->decode(d.ids, d.skip);
      if (got != d.want)
        report(g, "decode(" + show(d.ids) + ", skip=" + std::to_string(d.skip) +
                      ") \"" + got + "\" != HF \"" + d.want + "\"");
    }
  }
  EXPECT_EQ(failures, 0u) << name.str() << ": " << failures << " of " << checks
                          << " checks differ from HF";
  std::printf("%s: %zu strings, %zu encodes and decodes equal HF's\n",
              name.str().c_str(), goldens.size(), checks - failures);
}

TEST(TokenizerGoldens, NeoXByteLevel) { checkGoldens("neox", 10000); }
TEST(TokenizerGoldens, LlamaNormalizer) { checkGoldens("llama", 10000); }
TEST(TokenizerGoldens, LlamaMetaspaceFirst) {
  checkGoldens("llama-metaspace", 2000);
}
TEST(TokenizerGoldens, LlamaUnkNoByteFallback) {
  checkGoldens("llama-unk", 2000);
}

// NFKC, add_prefix_space, ignore_merges, lstrip / rstrip / single_word /
// normalized added tokens, a Sequence post-processor with a suffix.
TEST(TokenizerGoldens, ByteLevelOptions) { checkGoldens("options", 3000); }

TEST(Tokenizer, Basics) {
  std::unique_ptr<Tokenizer> neox = load("neox");
  std::unique_ptr<Tokenizer> llama = load("llama");
  ASSERT_TRUE(neox && llama);
  EXPECT_EQ(neox->vocabSize(), 2002u);
  EXPECT_EQ(llama->vocabSize(), 2000u);
  EXPECT_EQ(neox->tokenToId("<|endoftext|>"), 0u);
  EXPECT_TRUE(neox->isSpecial(0));
  EXPECT_FALSE(neox->isSpecial(2001)); // "    ", normalized, not special
  EXPECT_EQ(llama->idToToken(1), std::string("<s>"));
  EXPECT_EQ(llama->idToToken(3), std::string("<0x00>"));
  auto withBos = llama->encode("Hello", true);
  ASSERT_TRUE(bool(withBos));
  EXPECT_EQ(withBos->front(), 1u);
  // Not UTF-8: an error, not a guess.
  auto bad = neox->encode("abc\xff", false);
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("UTF-8"), std::string::npos);
  // Ids that name nothing are dropped, as HF drops them.
  EXPECT_EQ(neox->decode({999999u}, false), "");
}

//===----------------------------------------------------------------------===//
// Refusals: each edit of a valid file names its field and value.
//===----------------------------------------------------------------------===//

std::string refuse(llvm::StringRef base,
                   llvm::function_ref<void(json::Object &)> edit) {
  auto value =
      json::parse(readFile(inputPath((base + ".tokenizer.json").str())));
  EXPECT_TRUE(bool(value));
  if (!value)
    return "";
  edit(*value->getAsObject());
  std::string text = llvm::formatv("{0}", *value).str();
  auto tok = Tokenizer::fromJSON(text, "edited.json");
  if (tok) {
    ADD_FAILURE() << "accepted";
    return "";
  }
  return llvm::toString(tok.takeError());
}

template <typename... Parts>
void expectRefused(llvm::StringRef base,
                   llvm::function_ref<void(json::Object &)> edit,
                   Parts... parts) {
  std::string msg = refuse(base, edit);
  for (llvm::StringRef part : {llvm::StringRef(parts)...})
    EXPECT_NE(msg.find(part.str()), std::string::npos)
        << "\"" << msg << "\" lacks \"" << part.str() << "\"";
}

json::Object &model(json::Object &o) { return *o.getObject("model"); }

TEST(TokenizerRefusals, ModelAndFields) {
  expectRefused(
      "neox", [](json::Object &o) { model(o)["type"] = "WordPiece"; },
      "model.type", "WordPiece");
  expectRefused(
      "neox", [](json::Object &o) { model(o)["type"] = "Unigram"; },
      "model.type", "Unigram");
  expectRefused(
      "neox", [](json::Object &o) { model(o)["dropout"] = 0.1; },
      "model.dropout", "0.1");
  expectRefused(
      "neox",
      [](json::Object &o) { model(o)["continuing_subword_prefix"] = "##"; },
      "model.continuing_subword_prefix", "##");
  expectRefused(
      "neox", [](json::Object &o) { model(o)["end_of_word_suffix"] = "</w>"; },
      "model.end_of_word_suffix", "</w>");
  expectRefused(
      "neox", [](json::Object &o) { model(o)["novel"] = true; }, "model.novel",
      "unknown field");
  expectRefused(
      "neox", [](json::Object &o) { o["extra"] = 1; }, "extra",
      "unknown field");
  expectRefused(
      "neox",
      [](json::Object &o) {
        o["truncation"] = json::Object{{"max_length", 8}};
      },
      "truncation", "max_length");
  expectRefused(
      "neox", [](json::Object &o) { model(o)["unk_token"] = "<nope>"; },
      "model.unk_token", "<nope>");
  expectRefused(
      "neox",
      [](json::Object &o) {
        (*model(o).getArray("merges"))[5] = json::Array{"zzzq", "x"};
      },
      "model.merges[5]", "zzzq");
  expectRefused(
      "neox",
      [](json::Object &o) {
        (*(*o.getArray("added_tokens"))[0].getAsObject())["id"] = 7;
      },
      "added_tokens[0]", "<|endoftext|>");
}

// GPT-2's own tokenizer.json says "" for no prefix or suffix; HF reads it
// as null (checked with tokenizers 0.23), so dsc accepts it.
TEST(TokenizerRefusals, EmptyPrefixIsNull) {
  auto value = json::parse(readFile(inputPath("neox.tokenizer.json")));
  ASSERT_TRUE(bool(value));
  json::Object &m = *value->getAsObject()->getObject("model");
  m["continuing_subword_prefix"] = "";
  m["end_of_word_suffix"] = "";
  auto edited = Tokenizer::fromJSON(llvm::formatv("{0}", *value).str());
  ASSERT_TRUE(bool(edited)) << llvm::toString(edited.takeError());
  for (const Golden &g : readGoldens("neox"))
    ASSERT_EQ(*(*edited)->encode(g.text, false), g.ids) << g.text;
}

TEST(TokenizerRefusals, Components) {
  expectRefused(
      "neox",
      [](json::Object &o) {
        o["normalizer"] = json::Object{{"type", "Lowercase"}};
      },
      "normalizer.type", "Lowercase");
  expectRefused(
      "llama",
      [](json::Object &o) {
        auto &seq = *o.getObject("normalizer")->getArray("normalizers");
        (*seq[1].getAsObject())["pattern"] = json::Object{{"Regex", "\\s"}};
      },
      "normalizer.normalizers[1].pattern", "Regex");
  expectRefused(
      "neox",
      [](json::Object &o) {
        o["pre_tokenizer"] = json::Object{{"type", "Whitespace"}};
      },
      "pre_tokenizer.type", "Whitespace");
  expectRefused(
      "llama-metaspace",
      [](json::Object &o) {
        (*o.getObject("pre_tokenizer"))["prepend_scheme"] = "later";
      },
      "pre_tokenizer.prepend_scheme", "later");
  expectRefused(
      "neox",
      [](json::Object &o) {
        o["decoder"] = json::Object{{"type", "WordPiece"}};
      },
      "decoder.type", "WordPiece");
  expectRefused(
      "neox",
      [](json::Object &o) {
        o["post_processor"] = json::Object{{"type", "RobertaProcessing"}};
      },
      "post_processor.type", "RobertaProcessing");
  expectRefused(
      "llama",
      [](json::Object &o) {
        auto &single = *o.getObject("post_processor")->getArray("single");
        single.erase(single.begin() + 1);
      },
      "post_processor.single", "sequence A");
}

//===----------------------------------------------------------------------===//
// Untrusted files: truncations and byte flips give errors or tokenizers
// that work, never a crash.
//===----------------------------------------------------------------------===//

void exercise(const Tokenizer &tok) {
  for (const char *s : {"Hello <s> world", "e\xcc\x81 <|endoftext|> 42",
                        "\xe7\x88\xb1 \xf0\x9f\x98\x80", ""}) {
    auto ids = tok.encode(s, true);
    ASSERT_TRUE(bool(ids));
    (void)tok.decode(*ids, false);
  }
  (void)tok.decode({0, 1, 2, 3, 100000, 4294967295u}, true);
}

TEST(TokenizerFuzz, TruncatedAndFlipped) {
  for (const char *name : {"neox", "llama"}) {
    std::string text =
        readFile(inputPath((llvm::Twine(name) + ".tokenizer.json").str()));
    ASSERT_FALSE(text.empty());
    size_t truncatedErrors = 0, flipErrors = 0, flips = 0;
    for (size_t cut = 0; cut < text.size(); cut += 97) {
      auto tok = Tokenizer::fromJSON(llvm::StringRef(text).take_front(cut));
      if (!tok) {
        ++truncatedErrors;
        llvm::consumeError(tok.takeError());
      } else {
        exercise(**tok);
      }
    }
    // Every truncation of a JSON object is malformed.
    EXPECT_EQ(truncatedErrors, (text.size() + 96) / 97);
    std::mt19937 rng(20261203);
    for (int i = 0; i < 300; ++i) {
      std::string copy = text;
      int n = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < n; ++k)
        copy[rng() % copy.size()] = static_cast<char>(rng() & 0xFF);
      ++flips;
      auto tok = Tokenizer::fromJSON(copy);
      if (!tok) {
        ++flipErrors;
        llvm::consumeError(tok.takeError());
      } else {
        exercise(**tok);
      }
    }
    std::printf("%s: %zu truncations refused, %zu of %zu flipped files "
                "refused, the rest encode\n",
                name, truncatedErrors, flipErrors, flips);
  }
}

TEST(TokenizerFuzz, DeepNesting) {
  std::string deep(1000000, '[');
  auto tok = Tokenizer::fromJSON(deep);
  ASSERT_FALSE(bool(tok));
  EXPECT_NE(llvm::toString(tok.takeError()).find("nested"), std::string::npos);
}

/// Edits that keep the file well-formed JSON but make odd tokenizers:
/// moved ids, dropped or swapped merges, toggled flags, odd templates.
TEST(TokenizerFuzz, StructuralEdits) {
  std::mt19937 rng(7);
  size_t accepted = 0, refused = 0;
  for (int i = 0; i < 200; ++i) {
    const char *base = i % 2 ? "llama" : "options";
    auto value = json::parse(
        readFile(inputPath((llvm::Twine(base) + ".tokenizer.json").str())));
    ASSERT_TRUE(bool(value));
    json::Object &o = *value->getAsObject();
    json::Object &m = *o.getObject("model");
    json::Array &merges = *m.getArray("merges");
    json::Object &vocab = *m.getObject("vocab");
    for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; ++k) {
      switch (rng() % 7) {
      case 0: { // move a token to another id
        auto it = vocab.begin();
        std::advance(it, rng() % vocab.size());
        it->second = static_cast<int64_t>(rng() % 2100);
        break;
      }
      case 1: // drop a merge
        merges.erase(merges.begin() + rng() % merges.size());
        break;
      case 2: // swap two merges' ranks
        std::swap(merges[rng() % merges.size()], merges[rng() % merges.size()]);
        break;
      case 3:
        for (const char *flag : {"fuse_unk", "byte_fallback", "ignore_merges"})
          if (rng() % 2)
            m[flag] = !*m.getBoolean(flag);
        break;
      case 4: { // an added token with another id or flags
        json::Array &added = *o.getArray("added_tokens");
        json::Object &t = *added[rng() % added.size()].getAsObject();
        if (rng() % 2)
          t["id"] = static_cast<int64_t>(rng() % 2100);
        for (const char *flag :
             {"lstrip", "rstrip", "single_word", "normalized", "special"})
          if (rng() % 3 == 0)
            t[flag] = !*t.getBoolean(flag);
        break;
      }
      case 5: // a template naming ids nobody has
        if (json::Object *pp = o.getObject("post_processor"))
          if (json::Object *sp = pp->getObject("special_tokens"))
            for (auto &kv : *sp)
              (*kv.second.getAsObject())["ids"] =
                  json::Array{static_cast<int64_t>(rng() % 100000)};
        break;
      case 6: // a one-character decoder/pre-tokenizer replacement
        if (json::Object *pt = o.getObject("pre_tokenizer"))
          if (pt->get("replacement"))
            (*pt)["replacement"] = rng() % 2 ? "x" : " ";
        break;
      }
    }
    auto tok =
        Tokenizer::fromJSON(llvm::formatv("{0}", *value).str(), "edited.json");
    if (!tok) {
      ++refused;
      llvm::consumeError(tok.takeError());
      continue;
    }
    ++accepted;
    exercise(**tok);
  }
  std::printf("structural edits: %zu accepted and exercised, %zu refused\n",
              accepted, refused);
  EXPECT_GT(accepted, 0u);
}

/// Random code points outside the special-token and "▁" alphabet: Llama's
/// decode(encode(x)) is x (byte fallback loses nothing); encode never fails.
TEST(TokenizerFuzz, LlamaRoundTrip) {
  std::unique_ptr<Tokenizer> tok = load("llama");
  ASSERT_TRUE(tok);
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    for (int k = 0, n = static_cast<int>(rng() % 20); k < n; ++k) {
      uint32_t cp = rng() % 4 ? 0x20 + rng() % 0x5f : rng() % 0x110000;
      if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0x2581 || cp == '<')
        continue;
      if (cp < 0x80) {
        text += static_cast<char>(cp);
      } else if (cp < 0x800) {
        text += static_cast<char>(0xC0 | (cp >> 6));
        text += static_cast<char>(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        text += static_cast<char>(0xE0 | (cp >> 12));
        text += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        text += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        text += static_cast<char>(0xF0 | (cp >> 18));
        text += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        text += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        text += static_cast<char>(0x80 | (cp & 0x3F));
      }
    }
    auto ids = tok->encode(text, true);
    ASSERT_TRUE(bool(ids));
    ASSERT_EQ(tok->decode(*ids, true), text);
  }
}

TEST(TokenizerSpeed, TenThousandStrings) {
  std::vector<Golden> goldens = readGoldens("neox");
  for (const char *name : {"neox", "llama"}) {
    std::unique_ptr<Tokenizer> tok = load(name); // a cold cache
    ASSERT_TRUE(tok);
    auto start = std::chrono::steady_clock::now();
    size_t ids = 0;
    for (const Golden &g : goldens)
      ids += tok->encode(g.text, true)->size();
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    std::printf("%s: %zu strings, %zu ids in %.3f s\n", name, goldens.size(),
                ids, seconds);
    EXPECT_LT(seconds, 1.0);
  }
}

} // namespace
