//===- CheckpointTest.cpp - the checkpoint format's unit tests ------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The safetensors reader and writer, the boxes that map a plan's parts to a
// tensor's flat index, the manifest's checks (coverage: no overlap, no gap,
// in range), and fuzzing of both headers with mutated bytes: every parse
// either succeeds or throws dsc::rt::Error, never crashes. Links only
// DscRuntimeCheckpoint (no executor), as the model import will.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Checkpoint.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <unistd.h>

using namespace dsc::rt;

namespace {

std::string tempDir(const std::string &name) {
  std::string dir = ::testing::TempDir() + "/dsc-ckpt-" +
                    std::to_string(::getpid()) + "-" + name;
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

std::vector<uint8_t> twoTensorFile(SafetensorsHeader *layout = nullptr) {
  SafetensorsWriter w;
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint16_t> b = {7, 8, 9};
  w.add("a", DType::F32, {2, 3}, a.data(), a.size() * 4);
  w.add("b", DType::BF16, {3}, b.data(), b.size() * 2);
  w.setMetadata("format", "test");
  return w.serialize(layout);
}

/// The parse of `bytes` as a whole file: "" or the Error's message.
std::string parseError(const std::vector<uint8_t> &bytes) {
  try {
    parseSafetensorsHeader(bytes.data(), bytes.size(), bytes.size(), "f.st");
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

/// A file with header `json` (as given) and `data` bytes after it.
std::vector<uint8_t> withHeader(const std::string &json, size_t data) {
  std::vector<uint8_t> out(8 + json.size() + data, 0);
  for (int i = 0; i < 8; ++i)
    out[i] = uint8_t(uint64_t(json.size()) >> (8 * i));
  std::memcpy(out.data() + 8, json.data(), json.size());
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// Safetensors
//===----------------------------------------------------------------------===//

TEST(Safetensors, RoundTripsAndAlignsTheData) {
  SafetensorsHeader written;
  std::vector<uint8_t> bytes = twoTensorFile(&written);
  EXPECT_EQ(written.dataStart % 8, 0u);
  SafetensorsHeader h =
      parseSafetensorsHeader(bytes.data(), bytes.size(), bytes.size(), "x");
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.dataStart, written.dataStart);
  EXPECT_EQ(h.tensors[0].name, "a");
  EXPECT_EQ(h.tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.tensors[0].end - h.tensors[0].begin, 24u);
  EXPECT_EQ(h.tensors[1].dtype, DType::BF16);
  EXPECT_EQ(h.metadata.at("format"), "test");
  float first;
  std::memcpy(&first, bytes.data() + h.find("a")->begin, 4);
  EXPECT_EQ(first, 1.0f);

  // Through a file, too.
  std::string dir = tempDir("st");
  SafetensorsWriter w;
  std::vector<double> x = {0.5};
  w.add("x", DType::F64, {}, x.data(), 8);
  w.write(dir + "/x.safetensors");
  SafetensorsHeader back = readSafetensorsHeader(dir + "/x.safetensors");
  ASSERT_NE(back.find("x"), nullptr);
  EXPECT_TRUE(back.find("x")->shape.empty());
  EXPECT_THROW(w.add("x", DType::F64, {}, x.data(), 8), Error);
  EXPECT_THROW(w.add("y", DType::F64, {2}, x.data(), 8), Error);
}

TEST(Safetensors, EveryHeaderFieldIsChecked) {
  const std::string tensor = "tensor 'w'";
  struct Case {
    std::string json;
    size_t data;
    std::string expect;
  } cases[] = {
      {R"({"w": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})",
       2, "dtype 'F8_E4M3'"},
      {R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8,
       "is F32 [3] but has 8 bytes"},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4,
       "outside the 4 data bytes (truncated?)"},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
           "v": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}})",
       6, "overlaps"},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8,
       "a gap of 4 bytes before tensor 'w'"},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 6,
       "2 bytes after the last tensor"},
      {R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4,
       "shape dimension"},
      {R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4,
       "data_offsets [4, 0]"},
      {R"({"w": {"dtype": "F32", "shape": [1]}})", 4, "no data_offsets"},
      {R"({"w": [1, 2]})", 0, "is not an object"},
      {R"({"w": )", 0, "not valid JSON"},
      {R"([1, 2])", 0, "not a JSON object"},
      {R"({"__metadata__": {"a": 1}})", 0, "is not a string"},
      {R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4],
           "data_offsets": [0, 4]}})",
       4, "shape dimension"},
      {R"({"w": {"dtype": "F32", "shape": [1125899906842624, 1125899906842624],
           "data_offsets": [0, 4]}})",
       4, "but has 4 bytes"},
  };
  for (const Case &c : cases) {
    std::string msg = parseError(withHeader(c.json, c.data));
    EXPECT_NE(msg.find("safetensors file 'f.st'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos)
        << c.json << "\n  gave: " << msg;
  }
  // Truncated anywhere: an error naming the file.
  std::vector<uint8_t> good = twoTensorFile();
  for (size_t len = 0; len < good.size(); ++len) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + len);
    std::string msg = parseError(cut);
    EXPECT_NE(msg.find("safetensors file 'f.st'"), std::string::npos)
        << len << ": " << msg;
  }
  std::vector<uint8_t> huge = good;
  huge[6] = 1;
  EXPECT_NE(parseError(huge).find("above the 100 MiB limit"),
            std::string::npos);
}

TEST(Safetensors, MutatedHeadersNeverCrash) {
  std::vector<uint8_t> good = twoTensorFile();
  std::mt19937 rng(12);
  int accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    std::vector<uint8_t> bytes = good;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      // Mostly inside the header, where the parser looks.
      const size_t headerEnd = std::min<size_t>(bytes.size(), 8 + 200);
      const size_t at = rng() % std::max<size_t>(1, headerEnd);
      switch (rng() % 4) {
      case 0:
        if (at < bytes.size())
          bytes[at] ^= uint8_t(1u << (rng() % 8));
        break;
      case 1:
        if (at < bytes.size())
          bytes[at] = uint8_t("0123456789[]{}\",:-e."[rng() % 20]);
        break;
      case 2:
        if (at < bytes.size())
          bytes.erase(bytes.begin() + long(at));
        break;
      default:
        bytes.insert(bytes.begin() + long(std::min(at, bytes.size())),
                     uint8_t(rng()));
      }
    }
    try {
      parseSafetensorsHeader(bytes.data(), bytes.size(), bytes.size(), "m");
      ++accepted;
    } catch (const Error &) {
    }
  }
  EXPECT_LT(accepted, 4000);
}

//===----------------------------------------------------------------------===//
// Boxes
//===----------------------------------------------------------------------===//

TEST(TensorBox, MapsPartsToTheFlatIndexAndBack) {
  // [4, 6] as [4, 2, 3]: the box rows 1..2, all of dim 1, columns 1..2, and
  // of that 2x2x2 box's 8 elements the chunk [3, 3+4).
  TensorBox box{{4, 2, 3}, {1, 0, 1}, {2, 2, 2}, 3, 4};
  ASSERT_EQ(checkTensorBox(box, 24), "");
  BoxIndexer ix(box);
  ASSERT_EQ(ix.count(), 4);
  // Box element b = (i, j, k) -> whole (1+i)*6 + j*3 + (1+k).
  const int64_t expect[] = {1 * 6 + 3 + 2, 2 * 6 + 0 + 1, 2 * 6 + 0 + 2,
                            2 * 6 + 3 + 1};
  for (int64_t j = 0; j < 4; ++j) {
    EXPECT_EQ(ix.whole(j), expect[j]) << j;
    EXPECT_EQ(ix.local(expect[j]), j);
  }
  EXPECT_EQ(ix.local(0), -1);
  EXPECT_EQ(ix.local(1 * 6 + 1), -1); // in the box, before the chunk
  EXPECT_EQ(ix.runFrom(0), 1);
  EXPECT_EQ(ix.runFrom(1), 2);
  // Whole trailing dims make longer runs.
  BoxIndexer rows(TensorBox{{4, 6}, {1, 0}, {2, 6}, 0, -1});
  EXPECT_EQ(rows.runFrom(0), 12);
  EXPECT_EQ(rows.whole(7), 13);

  EXPECT_NE(checkTensorBox({{4, 6}, {3, 0}, {2, 6}, 0, -1}, 24)
                .find("outside view dimension 0"),
            std::string::npos);
  EXPECT_NE(checkTensorBox({{4, 6}, {0, 0}, {4, 6}, 0, -1}, 25)
                .find("has 24 elements but the tensor has 25"),
            std::string::npos);
  EXPECT_NE(
      checkTensorBox({{4, 6}, {0, 0}, {4, 6}, 20, 5}, 24).find("flat range"),
      std::string::npos);
  EXPECT_NE(checkTensorBox({{4, 6}, {0}, {4, 6}, 0, -1}, 24).find("offsets"),
            std::string::npos);
}

TEST(TensorBox, ShapesCompatibleWhenOneRefinesTheOther) {
  EXPECT_TRUE(shapesCompatible({128, 384}, {128, 3, 128}));
  EXPECT_TRUE(shapesCompatible({128, 3, 128}, {128, 384}));
  EXPECT_TRUE(shapesCompatible({8}, {8}));
  EXPECT_FALSE(shapesCompatible({384, 128}, {128, 384}));
  EXPECT_FALSE(shapesCompatible({16, 12}, {16, 8}));
  EXPECT_FALSE(shapesCompatible({4, 6}, {6, 4}));
}

//===----------------------------------------------------------------------===//
// The manifest
//===----------------------------------------------------------------------===//

namespace {

/// A [4, 6] tensor in two pieces: rows 0-1 whole, rows 2-3 as two chunks of
/// the [2, 6] box.
CheckpointManifest sampleManifest() {
  CheckpointManifest m;
  m.iteration = 10;
  m.optimizerSteps = 9;
  m.consumedSamples = 80;
  m.seed = 1234;
  m.mesh = "dp=2";
  m.ranks = 2;
  m.files = {"rank-00000.safetensors", "rank-00001.safetensors"};
  CheckpointTensor t;
  t.name = "w";
  t.role = "parameter";
  t.shape = {4, 6};
  auto piece = [](TensorBox box, const char *file, uint64_t offset) {
    CheckpointPiece p;
    p.box = std::move(box);
    p.file = file;
    p.key = "w";
    p.byteOffset = offset;
    p.byteLength = uint64_t(p.box.count()) * 4;
    p.checksum = 0x0123456789abcdefull;
    return p;
  };
  t.pieces.push_back(
      piece({{4, 6}, {0, 0}, {2, 6}, 0, -1}, "rank-00000.safetensors", 64));
  t.pieces.push_back(
      piece({{4, 6}, {2, 0}, {2, 6}, 0, 5}, "rank-00001.safetensors", 64));
  t.pieces[1].key = "w.0";
  t.pieces.push_back(
      piece({{4, 6}, {2, 0}, {2, 6}, 5, 7}, "rank-00001.safetensors", 84));
  m.tensors.push_back(t);
  m.fingerprint = modelFingerprint(m.tensors);
  return m;
}

std::string manifestError(const std::string &text) {
  try {
    parseManifest(text, "m.json");
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

std::string replaced(std::string s, const std::string &from,
                     const std::string &to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    s.replace(at, from.size(), to);
  return s;
}

} // namespace

TEST(CheckpointManifest, RoundTrips) {
  CheckpointManifest m = sampleManifest();
  m.lossScaler = LossScalerState{65536.0, 2, 7, -1, 0};
  CheckpointManifest back = parseManifest(formatManifest(m), "m.json");
  EXPECT_EQ(back.iteration, 10);
  EXPECT_EQ(back.optimizerSteps, 9);
  EXPECT_EQ(back.consumedSamples, 80);
  EXPECT_EQ(back.seed, 1234u);
  EXPECT_EQ(back.mesh, "dp=2");
  EXPECT_EQ(back.fingerprint, m.fingerprint);
  ASSERT_TRUE(back.lossScaler);
  EXPECT_EQ(back.lossScaler->scale, 65536.0);
  ASSERT_EQ(back.tensors.size(), 1u);
  ASSERT_EQ(back.tensors[0].pieces.size(), 3u);
  EXPECT_EQ(back.tensors[0].pieces[2].box, m.tensors[0].pieces[2].box);
  EXPECT_EQ(back.tensors[0].pieces[2].checksum, 0x0123456789abcdefull);
  EXPECT_EQ(formatManifest(back), formatManifest(m));
}

TEST(CheckpointManifest, TokenCountsRoundTripAndAreChecked) {
  CheckpointManifest m = sampleManifest();
  EXPECT_FALSE(parseManifest(formatManifest(m), "m.json").tokens);
  m.tokens = TokenCounts{640, 544, 96};
  CheckpointManifest back = parseManifest(formatManifest(m), "m.json");
  ASSERT_TRUE(back.tokens);
  EXPECT_EQ(back.tokens->consumed, 640);
  EXPECT_EQ(back.tokens->scheduler, 544);
  EXPECT_EQ(back.tokens->warmupEnd, 96);
  EXPECT_EQ(formatManifest(back), formatManifest(m));
  // The scheduler reads the tokens before the last step's: never more.
  m.tokens = TokenCounts{544, 640, -1};
  EXPECT_NE(manifestError(formatManifest(m))
                .find("tokens: consumed 544, scheduler 640, warmup_end -1 "
                      "are not in order"),
            std::string::npos)
      << manifestError(formatManifest(m));
}

TEST(CheckpointManifest, CoverageAndFieldsAreChecked) {
  const std::string good = formatManifest(sampleManifest());
  ASSERT_EQ(manifestError(good), "");
  struct Case {
    std::string from, to, expect;
  } cases[] = {
      // The second chunk starts one element late: a gap.
      {"\"flat\":[5,7],\"byte_offset\":84,\"byte_length\":28",
       "\"flat\":[6,6],\"byte_offset\":84,\"byte_length\":24", "a gap"},
      {"\"flat\":[5,7],\"byte_offset\":84,\"byte_length\":28",
       "\"flat\":[4,8],\"byte_offset\":84,\"byte_length\":32", "overlap"},
      {"\"offsets\":[2,0]", "\"offsets\":[3,0]", "outside view dimension 0"},
      {"\"view\":[4,6],\"offsets\":[0,0]", "\"view\":[4,7],\"offsets\":[0,0]",
       "has 28 elements but the tensor has 24"},
      {"\"byte_length\":48", "\"byte_length\":40", "has 40 bytes"},
      {"\"file\":\"rank-00000.safetensors\",\"key\"",
       "\"file\":\"../rank-00000.safetensors\",\"key\"", "not in \"files\""},
      {"\"rank-00000.safetensors\",\"rank-00001", "\"../x\",\"rank-00001",
       "plain file name"},
      {"\"version\": 2", "\"version\": 1", "format version 1"},
      {"\"dtype\":\"F32\"", "\"dtype\":\"Q4\"", "dtype 'Q4'"},
      {"\"role\":\"parameter\"", "\"role\":\"gradient\"", "role 'gradient'"},
      {"\"iteration\": 10", "\"iteration\": -1", "\"iteration\""},
      {"\"xxh3_64\":\"0123456789abcdef\"", "\"xxh3_64\":\"xyz\"",
       "16 hex digits"},
      {"\"optimizer_steps\": 9", "\"optimizer_steps\": 11", "exceeds"},
      {"\"shape\":[4,6]", "\"shape\":[4,5]", "has 24 elements but the tensor"},
  };
  for (const Case &c : cases) {
    std::string msg = manifestError(replaced(good, c.from, c.to));
    EXPECT_NE(msg.find("checkpoint manifest 'm.json'"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos)
        << c.from << " -> " << c.to << "\n  gave: " << msg;
  }
  // A saved scaler's skipped steps are iterations without an optimizer
  // step: iteration 10 with 9 optimizer steps holds at most 1.
  CheckpointManifest scaled = sampleManifest();
  scaled.lossScaler = LossScalerState{65536.0, 2, 10, 6, 1};
  EXPECT_EQ(manifestError(formatManifest(scaled)), "");
  scaled.lossScaler->skippedSteps = 2;
  EXPECT_NE(manifestError(formatManifest(scaled))
                .find("iteration 10 is less than optimizer_steps 9 + the "
                      "loss scaler's 2 skipped steps"),
            std::string::npos);
  // A piece removed: the tensor's last rows have no piece.
  CheckpointManifest m = sampleManifest();
  m.tensors[0].pieces.pop_back();
  EXPECT_NE(manifestError(formatManifest(m))
                .find("tensor 'w': no piece holds "
                      "elements 17 to 23"),
            std::string::npos);
}

TEST(CheckpointManifest, ItsOwnNumbersAreHashed) {
  const std::string good = formatManifest(sampleManifest());
  ASSERT_NE(good.find("\"manifest_xxh3_64\": \""), std::string::npos);
  // One character changed in a number that is still in range: the resumed
  // step, the data position, the seed.
  for (auto [from, to] :
       {std::make_pair("\"optimizer_steps\": 9", "\"optimizer_steps\": 8"),
        std::make_pair("\"consumed_samples\": 80", "\"consumed_samples\": 88"),
        std::make_pair("\"seed\": 1234", "\"seed\": 1235")}) {
    std::string msg = manifestError(replaced(good, from, to));
    EXPECT_NE(msg.find("it was changed or damaged after it was written"),
              std::string::npos)
        << from << " -> " << to << "\n  gave: " << msg;
  }
  // A manifest written before manifests were hashed is read unchecked.
  const size_t at = good.find(" \"manifest_xxh3_64\"");
  const size_t end = good.find('\n', at);
  std::string old = good;
  old.erase(at, end - at + 1);
  EXPECT_EQ(manifestError(old), "");
}

TEST(CheckpointManifest, PiecesAreStoredUnderTheirTensorsNames) {
  // Two tensors of one shape with their pieces swapped would load swapped.
  CheckpointManifest m = sampleManifest();
  CheckpointTensor other = m.tensors[0];
  other.name = "v";
  for (CheckpointPiece &p : other.pieces)
    p.key = "v" + p.key.substr(1);
  m.tensors.push_back(other);
  m.fingerprint = modelFingerprint(m.tensors);
  ASSERT_EQ(manifestError(formatManifest(m)), "");
  std::swap(m.tensors[0].pieces, m.tensors[1].pieces);
  EXPECT_NE(manifestError(formatManifest(m))
                .find("tensor 'w' piece in 'rank-00000.safetensors' is "
                      "stored under key 'v', which is not the tensor's name"),
            std::string::npos)
      << manifestError(formatManifest(m));
}

TEST(CheckpointManifest, MutatedManifestsNeverCrash) {
  const std::string good = formatManifest(sampleManifest());
  std::mt19937 rng(7);
  const char alphabet[] = "0123456789[]{}\",:-e.x ";
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = good;
    const int edits = 1 + int(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % text.size();
      switch (rng() % 3) {
      case 0:
        text[at] = alphabet[rng() % (sizeof alphabet - 1)];
        break;
      case 1:
        text.erase(at, 1 + rng() % 4);
        break;
      default:
        text.insert(at, 1, alphabet[rng() % (sizeof alphabet - 1)]);
      }
    }
    try {
      parseManifest(text, "m.json");
      ++accepted;
    } catch (const Error &) {
    }
  }
  EXPECT_LT(accepted, 3000);
}

TEST(CheckpointManifest, StepDirectoriesAreCommittedAndFound) {
  std::string dir = tempDir("steps");
  CheckpointManifest m = sampleManifest();
  // Two data files with the pieces the manifest names.
  std::vector<float> rows(12, 1.0f), chunkA(5, 2.0f), chunkB(7, 3.0f);
  for (int s = 1; s <= 3; ++s) {
    m.iteration = m.optimizerSteps = 10 * s;
    std::string tmp = beginCheckpointStep(dir, m.iteration, 42);
    SafetensorsWriter w0, w1;
    w0.add("w", DType::F32, {2, 6}, rows.data(), 48);
    w1.add("w.0", DType::F32, {5}, chunkA.data(), 20);
    w1.add("w", DType::F32, {7}, chunkB.data(), 28);
    SafetensorsHeader h0 = w0.write(tmp + "/rank-00000.safetensors");
    SafetensorsHeader h1 = w1.write(tmp + "/rank-00001.safetensors");
    CheckpointTensor &t = m.tensors[0];
    t.pieces[0].byteOffset = h0.find("w")->begin;
    t.pieces[0].checksum =
        checkpointChecksum(reinterpret_cast<const uint8_t *>(rows.data()), 48);
    t.pieces[1].byteOffset = h1.find("w.0")->begin;
    t.pieces[1].checksum = checkpointChecksum(
        reinterpret_cast<const uint8_t *>(chunkA.data()), 20);
    t.pieces[2].byteOffset = h1.find("w")->begin;
    t.pieces[2].checksum = checkpointChecksum(
        reinterpret_cast<const uint8_t *>(chunkB.data()), 28);
    EXPECT_EQ(commitCheckpointStep(dir, tmp, m, /*keep=*/2),
              dir + "/" + checkpointStepName(10 * s));
  }
  // keep=2: step 10 is gone; latest is step 30; nothing temporary is left.
  EXPECT_EQ(resolveCheckpointStep(dir), dir + "/step-00000030");
  EXPECT_EQ(resolveCheckpointStep(dir + "/step-00000020"),
            dir + "/step-00000020");
  EXPECT_THROW(resolveCheckpointStep(dir + "/step-00000010"), Error);
  CheckpointReader reader(dir);
  EXPECT_EQ(reader.manifest().iteration, 30);
  std::vector<uint8_t> whole =
      readWholeTensor(reader, reader.manifest().tensors[0]);
  std::vector<float> values(24);
  std::memcpy(values.data(), whole.data(), 96);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[11], 1.0f);
  EXPECT_EQ(values[12], 2.0f);
  EXPECT_EQ(values[16], 2.0f);
  EXPECT_EQ(values[17], 3.0f);
  EXPECT_EQ(values[23], 3.0f);

  // A corrupt byte: the checksum names the file and the tensor.
  {
    std::fstream f(dir + "/step-00000030/rank-00001.safetensors",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  try {
    readWholeTensor(reader, reader.manifest().tensors[0]);
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("rank-00001.safetensors': tensor "
                                         "'w': checksum mismatch"),
              std::string::npos)
        << e.what();
  }
}
