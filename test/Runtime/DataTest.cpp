//===- DataTest.cpp - Token sources, indexed dataset, batch sampler -------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Round trips through real files in a temp dir, and one test per way a data
// file can be corrupt, each checking that the message names file and fault.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Data.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <stdlib.h>
#include <unistd.h>

using namespace dsc::rt;

namespace {

class TempDir : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "dsc-data-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir = tmpl;
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir + "'";
    (void)std::system(cmd.c_str());
  }
  std::string path(const std::string &name) const { return dir + "/" + name; }

  static std::string slurp(const std::string &p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static void spit(const std::string &p, const std::string &bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
  /// Runs f and returns the Error message it throws ("" if none).
  static std::string errorOf(const std::function<void()> &f) {
    try {
      f();
    } catch (const Error &e) {
      return e.what();
    }
    return "";
  }
  std::string dir;
};

#define EXPECT_MSG(msg, ...)                                                   \
  do {                                                                         \
    std::string m_ = (msg);                                                    \
    for (const char *piece : {__VA_ARGS__})                                    \
      EXPECT_NE(m_.find(piece), std::string::npos)                             \
          << "message \"" << m_ << "\" lacks \"" << piece << "\"";             \
  } while (0)

//===----------------------------------------------------------------------===//
// Byte tokens and the default corpus
//===----------------------------------------------------------------------===//

using ByteTokensTest = TempDir;

TEST_F(ByteTokensTest, ReadsAnyFileAsBytes) {
  spit(path("x.txt"), std::string("ab\0\xff", 4));
  auto t = ByteTokens::fromFile(path("x.txt"));
  ASSERT_EQ(t->size(), 4);
  EXPECT_EQ(t->vocabSize(), 256);
  int32_t out[4];
  t->read(0, 4, out);
  EXPECT_EQ(out[0], 'a');
  EXPECT_EQ(out[2], 0);
  EXPECT_EQ(out[3], 255);
  EXPECT_MSG(errorOf([&] { t->read(2, 3, out); }), "x.txt", "outside");
}

TEST_F(ByteTokensTest, MissingAndEmptyFilesAreErrors) {
  EXPECT_MSG(errorOf([&] { ByteTokens::fromFile(path("nope.txt")); }),
             "nope.txt", "No such file");
  EXPECT_MSG(errorOf([&] { ByteTokens::fromFile(dir); }), "is a directory");
  spit(path("empty.txt"), "");
  EXPECT_MSG(errorOf([&] { ByteTokens::fromFile(path("empty.txt")); }),
             "empty.txt", "empty");
}

TEST(DefaultCorpus, IsRealEnglishProse) {
  std::string_view text = defaultCorpus();
  EXPECT_GT(text.size(), 20000u);
  EXPECT_EQ(text.substr(0, 9), "CHAPTER I");
  std::set<char> chars;
  size_t spaces = 0;
  for (char c : text) {
    ASSERT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << int(c);
    chars.insert(c);
    spaces += c == ' ';
  }
  // Prose, not noise: a small alphabet, words about 5 letters long.
  EXPECT_LT(chars.size(), 90u);
  EXPECT_GT(spaces, text.size() / 8);
  EXPECT_NE(text.find("Alice"), std::string_view::npos);
  auto tokens = defaultCorpusTokens();
  EXPECT_EQ(tokens->size(), int64_t(text.size()));
}

//===----------------------------------------------------------------------===//
// Indexed dataset
//===----------------------------------------------------------------------===//

class IndexedDatasetTest : public TempDir {
protected:
  void SetUp() override {
    TempDir::SetUp();
    prefix = path("corpus_text_document");
    docs = {{1, 2, 3, 4, 5}, {}, {60000, 7}, {8, 9, 10, 11}};
    writeIndexedDataset(prefix, docs, IndexedDType::UInt16);
  }
  /// Overwrites bytes of the .idx at `offset`.
  void patchIdx(size_t offset, const void *bytes, size_t n) {
    std::string idx = slurp(prefix + ".idx");
    ASSERT_LE(offset + n, idx.size());
    std::memcpy(idx.data() + offset, bytes, n);
    spit(prefix + ".idx", idx);
  }
  std::string openError(int64_t vocab = 65536) {
    return errorOf([&] { IndexedDataset::open(prefix, vocab); });
  }
  // Offsets in the .idx for 4 sequences: sizes at 34, pointers at 50,
  // doc_idx at 82.
  static constexpr size_t kSizes = 34, kPointers = 34 + 4 * 4,
                          kDocIdx = 34 + 12 * 4;
  std::string prefix;
  std::vector<std::vector<int64_t>> docs;
};

TEST_F(IndexedDatasetTest, RoundTrip) {
  auto ds = IndexedDataset::open(prefix, 65536);
  EXPECT_EQ(ds->dtype(), IndexedDType::UInt16);
  ASSERT_EQ(ds->numSequences(), 4);
  EXPECT_EQ(ds->numDocuments(), 5); // Megatron: N + 1 entries
  EXPECT_EQ(ds->documentIndex().back(), 4);
  EXPECT_EQ(ds->sequenceLength(1), 0);
  EXPECT_EQ(ds->size(), 11);
  int32_t seq[4];
  ds->readSequence(2, 0, 2, seq);
  EXPECT_EQ(seq[0], 60000);
  EXPECT_EQ(seq[1], 7);
  // The stream view concatenates sequences, skipping the empty one.
  int32_t all[11];
  ds->read(0, 11, all);
  std::vector<int32_t> want = {1, 2, 3, 4, 5, 60000, 7, 8, 9, 10, 11};
  EXPECT_EQ(std::vector<int32_t>(all, all + 11), want);
  int32_t mid[4];
  ds->read(4, 4, mid); // spans three sequences
  EXPECT_EQ(std::vector<int32_t>(mid, mid + 4),
            std::vector<int32_t>({5, 60000, 7, 8}));
}

TEST_F(IndexedDatasetTest, RoundTripEveryIntegerDType) {
  for (IndexedDType t :
       {IndexedDType::UInt8, IndexedDType::Int8, IndexedDType::Int16,
        IndexedDType::Int32, IndexedDType::Int64, IndexedDType::UInt16}) {
    writeIndexedDataset(prefix, {{0, 1, 127}, {5}}, t);
    auto ds = IndexedDataset::open(prefix, 128);
    int32_t out[4];
    ds->read(0, 4, out);
    EXPECT_EQ(out[2], 127) << int(t);
    EXPECT_EQ(out[3], 5) << int(t);
  }
}

TEST_F(IndexedDatasetTest, TokenBeyondModelVocabNamesTheVocab) {
  auto ds = IndexedDataset::open(prefix, 50304);
  int32_t out[11];
  EXPECT_MSG(errorOf([&] { ds->read(0, 11, out); }), "corpus_text_document.bin",
             "60000", "sequence 2, position 0", "vocab of 50304");
}

TEST_F(IndexedDatasetTest, MissingFiles) {
  std::remove((prefix + ".bin").c_str());
  EXPECT_MSG(openError(), "corpus_text_document.bin", "cannot open");
  EXPECT_MSG(errorOf([&] { IndexedDataset::open(path("nothing"), 10); }),
             "nothing.idx", "No such file");
}

TEST_F(IndexedDatasetTest, BadMagic) {
  patchIdx(0, "MMIDIDY", 7);
  EXPECT_MSG(openError(), "corpus_text_document.idx", "bad magic",
             "MMIDIDY\\x00\\x00", "MMapIndexedDataset");
}

TEST_F(IndexedDatasetTest, OldTntIdxFormatIsRecognized) {
  patchIdx(0, "TNTIDX\0\0", 8);
  EXPECT_MSG(openError(), ".idx", "old IndexedDataset format",
             "--dataset-impl mmap");
}

TEST_F(IndexedDatasetTest, BadVersion) {
  uint64_t v = 2;
  patchIdx(9, &v, 8);
  EXPECT_MSG(openError(), ".idx", "version 2");
}

TEST_F(IndexedDatasetTest, BadDTypeCodes) {
  uint8_t code = 6;
  patchIdx(17, &code, 1);
  EXPECT_MSG(openError(), ".idx", "dtype code 6 (float64)",
             "not an integer token type");
  code = 42;
  patchIdx(17, &code, 1);
  EXPECT_MSG(openError(), ".idx", "dtype code 42 (unknown)");
}

TEST_F(IndexedDatasetTest, TruncatedIndex) {
  std::string idx = slurp(prefix + ".idx");
  spit(prefix + ".idx", idx.substr(0, idx.size() - 3));
  EXPECT_MSG(openError(), ".idx", "4 sequences and 5 documents",
             "take 122 bytes", "file has 119 bytes");
  spit(prefix + ".idx", idx.substr(0, 20));
  EXPECT_MSG(openError(), ".idx", "truncated header", "20 bytes");
  // A count so large that 12 * n would overflow is caught, not wrapped.
  uint64_t huge = ~uint64_t(0) / 4;
  spit(prefix + ".idx", idx);
  patchIdx(18, &huge, 8);
  EXPECT_MSG(openError(), ".idx", "more than the file holds");
}

TEST_F(IndexedDatasetTest, TruncatedBin) {
  std::string bin = slurp(prefix + ".bin");
  spit(prefix + ".bin", bin.substr(0, bin.size() - 2));
  // The last sequence (pointer 14, 4 tokens of 2 bytes) now overruns.
  EXPECT_MSG(openError(), "corpus_text_document.bin", "sequence 3",
             "pointer 14", "4 tokens of 2 bytes", "file, which has 20 bytes");
}

TEST_F(IndexedDatasetTest, OutOfRangePointer) {
  int64_t ptr = 1 << 20;
  patchIdx(kPointers + 8 * 2, &ptr, 8);
  EXPECT_MSG(openError(), ".bin", "sequence 2", "pointer 1048576",
             "outside the file");
  ptr = -8;
  patchIdx(kPointers + 8 * 2, &ptr, 8);
  EXPECT_MSG(openError(), ".bin", "sequence 2", "pointer -8");
}

TEST_F(IndexedDatasetTest, NegativeSize) {
  int32_t size = -3;
  patchIdx(kSizes + 4 * 1, &size, 4);
  EXPECT_MSG(openError(), ".idx", "sequence 1 has negative size -3");
}

TEST_F(IndexedDatasetTest, BadDocumentIndex) {
  int64_t d = 9;
  patchIdx(kDocIdx + 8 * 2, &d, 8);
  EXPECT_MSG(openError(), ".idx", "document index entry 2 is 9", "[0, 4]");
  d = 0;
  patchIdx(kDocIdx + 8 * 2, &d, 8);
  EXPECT_MSG(openError(), ".idx", "document index entry 2 is 0",
             "non-decreasing");
}

//===----------------------------------------------------------------------===//
// openTokenSource
//===----------------------------------------------------------------------===//

using OpenTokenSourceTest = TempDir;

TEST_F(OpenTokenSourceTest, EachSpelling) {
  EXPECT_EQ(openTokenSource("", 256)->size(), int64_t(defaultCorpus().size()));
  EXPECT_EQ(openTokenSource("default", 256)->vocabSize(), 256);

  writeIndexedDataset(path("ds"), {{1, 2}, {3}}, IndexedDType::UInt16);
  for (const char *spelling : {"ds", "ds.bin", "ds.idx"}) {
    auto src = openTokenSource(path(spelling), 50304);
    EXPECT_EQ(src->size(), 3) << spelling;
    EXPECT_EQ(src->vocabSize(), 50304) << spelling;
  }

  spit(path("notes.txt"), "hello");
  EXPECT_EQ(openTokenSource(path("notes.txt"), 256)->size(), 5);

  EXPECT_MSG(errorOf([&] { openTokenSource(path("missing"), 256); }), "missing",
             "neither a file");
  spit(path("lonely.bin"), "xx");
  EXPECT_MSG(errorOf([&] { openTokenSource(path("lonely.bin"), 256); }),
             "lonely.bin", "no index", "lonely.idx");
}

//===----------------------------------------------------------------------===//
// Batch sampler
//===----------------------------------------------------------------------===//

TEST(BatchSampler, TargetsAreInputsShiftedByOne) {
  auto src = defaultCorpusTokens();
  BatchSampler s(*src, 4, 64, 1234, 256);
  std::vector<int32_t> in(4 * 64), tg(4 * 64);
  s.batchAt(0, in.data(), tg.data());
  const std::string &text = src->text();
  for (int b = 0; b < 4; ++b) {
    int64_t start = s.windowStart(s.windowOf(b));
    for (int j = 0; j < 64; ++j) {
      ASSERT_EQ(in[b * 64 + j], (unsigned char)text[start + j]);
      ASSERT_EQ(tg[b * 64 + j], (unsigned char)text[start + j + 1]);
    }
  }
}

TEST(BatchSampler, DeterministicForASeed) {
  auto src = defaultCorpusTokens();
  BatchSampler a(*src, 2, 32, 7, 256), b(*src, 2, 32, 7, 256),
      c(*src, 2, 32, 8, 256);
  std::vector<int32_t> ia(64), ta(64), ib(64), tb(64), ic(64), tc(64);
  bool anyDiff = false;
  for (int step = 0; step < 20; ++step) {
    a.batchAt(step, ia.data(), ta.data());
    b.batchAt(step, ib.data(), tb.data());
    c.batchAt(step, ic.data(), tc.data());
    ASSERT_EQ(ia, ib);
    ASSERT_EQ(ta, tb);
    anyDiff |= ia != ic;
  }
  EXPECT_TRUE(anyDiff) << "the seed does not change the order";
}

TEST(BatchSampler, EachEpochVisitsEveryWindowOnce) {
  auto src = ByteTokens::fromText(std::string(1001, 'x'), "test text");
  BatchSampler s(*src, 3, 10, 99, 256);
  ASSERT_EQ(s.numWindows(), 100);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> seen;
    for (int64_t i = 0; i < 100; ++i)
      seen.insert(s.windowOf(epoch * 100 + i));
    EXPECT_EQ(seen.size(), 100u);
    EXPECT_EQ(*seen.rbegin(), 99);
  }
  // Epochs are shuffled differently.
  EXPECT_NE(s.windowOf(0) * 1000 + s.windowOf(1),
            s.windowOf(100) * 1000 + s.windowOf(101));
}

TEST(BatchSampler, TrainAndValidRangesNeverShareATokenWindow) {
  auto src = defaultCorpusTokens();
  auto [train, valid] = splitTrainValid(src->size(), 0.1);
  EXPECT_EQ(train.end, valid.begin);
  EXPECT_EQ(valid.end, src->size());
  const int64_t seq = 32;
  BatchSampler t(*src, 4, seq, 1, 256, train), v(*src, 4, seq, 1, 256, valid);
  EXPECT_EQ(v.numWindows(), (valid.end - valid.begin - 1) / seq);
  for (int64_t i = 0; i < 2 * t.numWindows(); ++i) {
    int64_t start = t.windowStart(t.windowOf(i));
    ASSERT_GE(start, 0);
    ASSERT_LE(start + seq + 1, train.end);
  }
  for (int64_t i = 0; i < 2 * v.numWindows(); ++i) {
    int64_t start = v.windowStart(v.windowOf(i));
    ASSERT_GE(start, valid.begin);
    ASSERT_LE(start + seq + 1, valid.end);
  }
  // The validation batch reads the validation text.
  std::vector<int32_t> in(4 * seq), tg(4 * seq);
  v.batchAt(0, in.data(), tg.data());
  EXPECT_EQ(in[0], (unsigned char)src->text()[v.windowStart(v.windowOf(0))]);
}

TEST(BatchSampler, RejectsBadConfigurations) {
  auto src = ByteTokens::fromText("short", "five bytes");
  auto err = [](const std::function<void()> &f) -> std::string {
    try {
      f();
    } catch (const Error &e) {
      return e.what();
    }
    return "";
  };
  EXPECT_MSG(err([&] { BatchSampler(*src, 1, 8, 0, 256); }), "five bytes",
             "has 5 tokens", "sequence length 8");
  EXPECT_MSG(err([&] { BatchSampler(*src, 1, 2, 0, 100); }), "five bytes",
             "up to 255", "vocab is 100");
  EXPECT_MSG(err([&] { BatchSampler(*src, 0, 2, 0, 256); }), "batch 0");
  EXPECT_MSG(err([&] {
               BatchSampler(*src, 1, 2, 0, 256, TokenRange{2, 9});
             }),
             "token range [2, 9)", "not inside", "5 tokens");
  EXPECT_MSG(err([&] {
               BatchSampler(*src, 1, 2, 0, 256, TokenRange{3, 5});
             }),
             "2 tokens in its range", "sequence length 2");
  EXPECT_MSG(err([&] { splitTrainValid(100, 1.5); }), "[0, 1)", "1.5");
}

} // namespace
