//===- CurriculumScheduleTest.cpp - DeepSpeed's seqlen curriculum ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The schedule against every step of the goldens DeepSpeed 0.19.8's own
// CurriculumScheduler wrote (Inputs/curriculum, made by
// scripts/ds-reference/curriculum-goldens.py), each built from its golden's
// config through the reader; and each refused config's message, which must
// name the key at fault.
//
//===----------------------------------------------------------------------===//

#include "dsc/Config/CurriculumSchedule.h"
#include "dsc/Runtime/SeqlenReshape.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <string>

using namespace dsc::config;

namespace {

llvm::json::Object parseObject(llvm::StringRef text) {
  llvm::Expected<llvm::json::Value> v = llvm::json::parse(text);
  if (!v) {
    ADD_FAILURE() << llvm::toString(v.takeError()) << "\n" << text.str();
    return {};
  }
  if (llvm::json::Object *o = v->getAsObject())
    return std::move(*o);
  ADD_FAILURE() << "not an object: " << text.str();
  return {};
}

//===----------------------------------------------------------------------===//
// Goldens
//===----------------------------------------------------------------------===//

class CurriculumGolden : public ::testing::TestWithParam<const char *> {};

TEST_P(CurriculumGolden, EveryStepMatchesDeepSpeed) {
  std::string path =
      std::string(DSC_CURRICULUM_GOLDENS_DIR) + "/" + GetParam() + ".json";
  auto buffer = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(buffer) << "cannot read " << path;
  llvm::json::Object golden = parseObject((*buffer)->getBuffer());
  const llvm::json::Object *block = golden.getObject("curriculum_learning");
  const llvm::json::Array *steps = golden.getArray("steps");
  const llvm::json::Array *want = golden.getArray("difficulty");
  ASSERT_TRUE(block && steps && want) << path;
  ASSERT_EQ(steps->size(), want->size()) << path;

  llvm::Expected<CurriculumSchedule> s = readCurriculumSchedule(*block);
  ASSERT_TRUE(static_cast<bool>(s)) << llvm::toString(s.takeError());
  EXPECT_TRUE(s->enabled);
  int64_t maxD = *block->getInteger("max_difficulty");
  for (size_t i = 0; i < steps->size(); ++i) {
    int64_t step = *(*steps)[i].getAsInteger();
    EXPECT_EQ(s->difficultyAt(step), *(*want)[i].getAsInteger())
        << GetParam() << " at step " << step;
  }
  // The golden is worth something only if it climbs the whole way.
  EXPECT_EQ(*want->back().getAsInteger(), maxD) << path;
}

INSTANTIATE_TEST_SUITE_P(
    DeepSpeed, CurriculumGolden,
    ::testing::Values("fixed-linear", "fixed-linear-min-not-multiple",
                      "fixed-linear-min-below-step",
                      "fixed-linear-max-not-multiple",
                      "fixed-linear-min-equals-max", "fixed-root-2",
                      "fixed-root-3", "fixed-discrete"),
    [](const ::testing::TestParamInfo<const char *> &info) {
      std::string name = info.param;
      for (char &c : name)
        if (c == '-')
          c = '_';
      return name;
    });

//===----------------------------------------------------------------------===//
// Hand-checked values
//===----------------------------------------------------------------------===//

CurriculumSchedule mustRead(llvm::StringRef text,
                            std::optional<int64_t> maxSeqLen = std::nullopt) {
  llvm::Expected<CurriculumSchedule> s =
      readCurriculumSchedule(parseObject(text), maxSeqLen);
  if (!s) {
    ADD_FAILURE() << llvm::toString(s.takeError());
    return {};
  }
  return *s;
}

TEST(CurriculumSchedule, LinearRoundsDownToTheStepThenClamps) {
  CurriculumSchedule s = mustRead(R"({"enabled": true,
      "curriculum_type": "seqlen", "min_difficulty": 8,
      "max_difficulty": 64, "schedule_type": "fixed_linear",
      "schedule_config": {"total_curriculum_step": 100,
                          "difficulty_step": 8}})");
  EXPECT_EQ(s.difficultyAt(1), 8);
  // floor(50/100 * 56 + 8) = 36, rounded down to 32.
  EXPECT_EQ(s.difficultyAt(50), 32);
  EXPECT_EQ(s.difficultyAt(100), 64);
  // Far past the end: no overflow, still max.
  EXPECT_EQ(s.difficultyAt(int64_t(1) << 62), 64);
}

TEST(CurriculumSchedule, EqualMinAndMaxNeverMoves) {
  // DeepSpeed never updates a scheduler already at max_difficulty, so a
  // 60 that difficulty_step 8 would round to 56 stays 60.
  CurriculumSchedule s = mustRead(R"({"enabled": true,
      "curriculum_type": "seqlen", "min_difficulty": 60,
      "max_difficulty": 60, "schedule_type": "fixed_linear",
      "schedule_config": {"total_curriculum_step": 10,
                          "difficulty_step": 8}})");
  for (int64_t t : {0, 1, 5, 10, 1000})
    EXPECT_EQ(s.difficultyAt(t), 60) << t;
}

TEST(CurriculumSchedule, DiscreteHoldsEachDifficultyThroughItsMaxStep) {
  CurriculumSchedule s = mustRead(R"({"enabled": true,
      "curriculum_type": "seqlen", "min_difficulty": 16,
      "max_difficulty": 64, "schedule_type": "fixed_discrete",
      "schedule_config": {"difficulty": [16, 32, 64],
                          "max_step": [30, 60]}})");
  EXPECT_EQ(s.difficultyAt(30), 16);
  EXPECT_EQ(s.difficultyAt(31), 32);
  EXPECT_EQ(s.difficultyAt(60), 32);
  EXPECT_EQ(s.difficultyAt(61), 64);
}

TEST(CurriculumSchedule, DisabledBlockAloneIsAccepted) {
  CurriculumSchedule s = mustRead(R"({"enabled": false})");
  EXPECT_FALSE(s.enabled);
}

TEST(CurriculumSchedule, MaxDifficultyAtTheModelLengthIsAccepted) {
  CurriculumSchedule s = mustRead(R"({"enabled": true,
      "curriculum_type": "seqlen", "min_difficulty": 8,
      "max_difficulty": 64, "schedule_type": "fixed_root",
      "schedule_config": {"total_curriculum_step": 100,
                          "difficulty_step": 8, "root_degree": 2}})",
                                  64);
  EXPECT_EQ(s.rootDegree, 2.0);
}

//===----------------------------------------------------------------------===//
// Refused configs
//===----------------------------------------------------------------------===//

struct BadCase {
  const char *name;
  std::string block;
  /// Substrings the message must hold: the key's path first.
  std::vector<std::string> says;
  std::optional<int64_t> maxSeqLen = std::nullopt;
};

/// An enabled seqlen block with `top` spliced into its top level and
/// `config` as its schedule_config.
std::string linearWith(const std::string &top, const std::string &config) {
  return R"({"enabled": true, "curriculum_type": "seqlen", )" + top +
         R"(, "schedule_config": )" + config + "}";
}

class CurriculumRefuses : public ::testing::TestWithParam<BadCase> {};

TEST_P(CurriculumRefuses, NamingTheKey) {
  const BadCase &c = GetParam();
  llvm::Expected<CurriculumSchedule> s =
      readCurriculumSchedule(parseObject(c.block), c.maxSeqLen);
  ASSERT_FALSE(static_cast<bool>(s)) << c.name << " was accepted";
  std::string msg = llvm::toString(s.takeError());
  for (const std::string &part : c.says)
    EXPECT_NE(msg.find(part), std::string::npos)
        << c.name << ": '" << msg << "' does not say '" << part << "'";
}

const char *kLinear =
    R"("min_difficulty": 8, "max_difficulty": 64, "schedule_type": "fixed_linear")";
const char *kRoot =
    R"("min_difficulty": 8, "max_difficulty": 64, "schedule_type": "fixed_root")";
const char *kDiscrete =
    R"("min_difficulty": 8, "max_difficulty": 64, "schedule_type": "fixed_discrete")";
const char *kLinearConfig =
    R"({"total_curriculum_step": 100, "difficulty_step": 8})";

std::vector<BadCase> badCases() {
  return {
      {"UnknownTopKey",
       R"({"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8,
           "max_dificulty": 64, "schedule_type": "fixed_linear",
           "schedule_config": {"total_curriculum_step": 1,
                               "difficulty_step": 8}})",
       {"curriculum_learning.max_dificulty: unknown key",
        "did you mean 'max_difficulty'"}},
      {"UnknownScheduleConfigKey",
       linearWith(kLinear, R"({"total_curriculum_step": 100,
                               "difficulty_step": 8, "warmup": 3})"),
       {"curriculum_learning.schedule_config.warmup: unknown key"}},
      {"MinAboveMax",
       linearWith(R"("min_difficulty": 128, "max_difficulty": 64,
                     "schedule_type": "fixed_linear")",
                  kLinearConfig),
       {"curriculum_learning.min_difficulty",
        "128 is above max_difficulty 64"}},
      {"MaxAboveModelLength",
       linearWith(kLinear, kLinearConfig),
       {"curriculum_learning.max_difficulty",
        "above the model's sequence length 32"},
       32},
      {"MinNotPositive",
       linearWith(R"("min_difficulty": 0, "max_difficulty": 64,
                     "schedule_type": "fixed_linear")",
                  kLinearConfig),
       {"curriculum_learning.min_difficulty", "at least 1"}},
      {"MissingMin",
       linearWith(R"("max_difficulty": 64, "schedule_type": "fixed_linear")",
                  kLinearConfig),
       {"curriculum_learning.min_difficulty: missing"}},
      {"MinNotInteger",
       linearWith(R"("min_difficulty": "8", "max_difficulty": 64,
                     "schedule_type": "fixed_linear")",
                  kLinearConfig),
       {"curriculum_learning.min_difficulty: must be an integer"}},
      {"OtherCurriculumType",
       R"({"enabled": true, "curriculum_type": "vocab_rarity"})",
       {"curriculum_learning.curriculum_type", "\"seqlen\""}},
      {"MissingCurriculumType",
       R"({"enabled": true, "min_difficulty": 8})",
       {"curriculum_learning.curriculum_type: missing"}},
      {"CustomSchedule",
       linearWith(R"("min_difficulty": 8, "max_difficulty": 64,
                     "schedule_type": "custom")",
                  "{}"),
       {"curriculum_learning.schedule_type", "Python function"}},
      {"UnknownScheduleType",
       linearWith(R"("min_difficulty": 8, "max_difficulty": 64,
                     "schedule_type": "fixed_cosine")",
                  "{}"),
       {"curriculum_learning.schedule_type", "\"fixed_cosine\" is not one of"}},
      {"DifficultyStepZero",
       linearWith(kLinear,
                  R"({"total_curriculum_step": 100, "difficulty_step": 0})"),
       {"curriculum_learning.schedule_config.difficulty_step",
        "must be positive, got 0"}},
      {"DifficultyStepNegative",
       linearWith(kLinear,
                  R"({"total_curriculum_step": 100, "difficulty_step": -8})"),
       {"curriculum_learning.schedule_config.difficulty_step",
        "must be positive, got -8"}},
      {"TotalStepZero",
       linearWith(kLinear,
                  R"({"total_curriculum_step": 0, "difficulty_step": 8})"),
       {"curriculum_learning.schedule_config.total_curriculum_step",
        "must be positive, got 0"}},
      {"TotalStepMissing",
       linearWith(kLinear, R"({"difficulty_step": 8})"),
       {"curriculum_learning.schedule_config.total_curriculum_step: missing"}},
      {"RootDegreeMissing",
       linearWith(kRoot, kLinearConfig),
       {"curriculum_learning.schedule_config.root_degree: missing",
        "fixed_root"}},
      {"RootDegreeZero",
       linearWith(kRoot, R"({"total_curriculum_step": 100,
                             "difficulty_step": 8, "root_degree": 0})"),
       {"curriculum_learning.schedule_config.root_degree", "positive number"}},
      {"RootDegreeOnLinear",
       linearWith(kLinear, R"({"total_curriculum_step": 100,
                               "difficulty_step": 8, "root_degree": 2})"),
       {"curriculum_learning.schedule_config.root_degree",
        "not read by fixed_linear"}},
      {"DiscreteKeysOnRoot",
       linearWith(kRoot, R"({"total_curriculum_step": 100,
                             "difficulty_step": 8, "root_degree": 2,
                             "max_step": [3]})"),
       {"curriculum_learning.schedule_config.max_step",
        "read only by fixed_discrete"}},
      {"DiscreteLengthsDisagree",
       linearWith(kDiscrete,
                  R"({"difficulty": [16, 32, 64], "max_step": [30, 60, 90]})"),
       {"curriculum_learning.schedule_config.difficulty",
        "has 3 entries and max_step 3", "one more difficulty"}},
      {"DiscreteMissingMaxStep",
       linearWith(kDiscrete, R"({"difficulty": [16]})"),
       {"curriculum_learning.schedule_config.max_step: missing"}},
      {"DiscreteEmptyDifficulty",
       linearWith(kDiscrete, R"({"difficulty": [], "max_step": []})"),
       {"curriculum_learning.schedule_config.difficulty",
        "non-empty list of integers"}},
      {"DiscreteDecreasing",
       linearWith(kDiscrete,
                  R"({"difficulty": [16, 64, 32], "max_step": [30, 60]})"),
       {"curriculum_learning.schedule_config.difficulty",
        "must not decrease: entry 2 (32) is below entry 1 (64)"}},
      {"DiscreteMaxStepOutOfOrder",
       linearWith(kDiscrete,
                  R"({"difficulty": [16, 32, 64], "max_step": [60, 30]})"),
       {"curriculum_learning.schedule_config.max_step", "must increase"}},
      {"DiscreteAboveMax",
       linearWith(kDiscrete,
                  R"({"difficulty": [16, 32, 128], "max_step": [30, 60]})"),
       {"curriculum_learning.schedule_config.difficulty",
        "entry 2 (128) is above max_difficulty 64"}},
      {"DiscreteLinearKeys",
       linearWith(kDiscrete, R"({"difficulty": [16, 64], "max_step": [30],
                                 "difficulty_step": 8})"),
       {"curriculum_learning.schedule_config.difficulty_step",
        "read only by fixed_linear and fixed_root"}},
      {"EnabledNotBoolean",
       R"({"enabled": "yes"})",
       {"curriculum_learning.enabled: must be true or false"}},
      {"DisabledButBroken",
       R"({"enabled": false, "curriculum_type": "seqlen",
           "min_difficulty": 8})",
       {"curriculum_learning.max_difficulty: missing"}},
  };
}

INSTANTIATE_TEST_SUITE_P(Config, CurriculumRefuses,
                         ::testing::ValuesIn(badCases()),
                         [](const ::testing::TestParamInfo<BadCase> &info) {
                           return std::string(info.param.name);
                         });

//===----------------------------------------------------------------------===//
// Samples cut to a length: Megatron-DeepSpeed's data_post_process run as is
// (Inputs/curriculum/seqlen-reshape-goldens.json, from
// scripts/ds-reference/seqlen-reshape-goldens.py), sample r's text being
// 1000 r + j at position j.
//===----------------------------------------------------------------------===//

TEST(SeqlenReshape, EveryCaseMatchesMegatronDeepSpeed) {
  const std::string path =
      std::string(DSC_CURRICULUM_GOLDENS_DIR) + "/seqlen-reshape-goldens.json";
  auto buffer = llvm::MemoryBuffer::getFile(path);
  ASSERT_TRUE(buffer) << "cannot read " << path;
  llvm::json::Object golden = parseObject((*buffer)->getBuffer());
  const llvm::json::Array *cases = golden.getArray("cases");
  ASSERT_TRUE(cases && !cases->empty()) << path;
  int reshaped = 0;
  for (const llvm::json::Value &value : *cases) {
    const llvm::json::Object *c = value.getAsObject();
    ASSERT_TRUE(c);
    const int64_t b = *c->getInteger("micro_batch");
    const int64_t S = *c->getInteger("seq_length");
    const int64_t L = *c->getInteger("length");
    const bool reshape = *c->getString("type") == "seqlen_reshape";
    const llvm::json::Array &text = *c->getArray("text");
    const std::string what = std::string(reshape ? "reshape" : "truncate") +
                             " b=" + std::to_string(b) +
                             " S=" + std::to_string(S) +
                             " L=" + std::to_string(L);
    std::vector<int32_t> ids(size_t(b * S)), next(size_t(b * S));
    for (int64_t r = 0; r < b; ++r)
      for (int64_t j = 0; j < S; ++j) {
        ids[size_t(r * S + j)] = int32_t(1000 * r + j);
        next[size_t(r * S + j)] = int32_t(1000 * r + j + 1);
      }
    std::vector<int32_t> tokens, targets;
    dsc::rt::cutSamples(ids.data(), next.data(), b, S, L, reshape, tokens,
                        targets);
    const int64_t rows = int64_t(text.size());
    EXPECT_EQ(rows, *c->getInteger("rows")) << what;
    if (reshape) {
      EXPECT_EQ(dsc::rt::seqlenReshapeRows(b, S, L), rows) << what;
      reshaped += rows != b;
    }
    ASSERT_EQ(int64_t(tokens.size()), rows * L) << what;
    for (int64_t i = 0; i < rows; ++i) {
      const llvm::json::Array &row = *text[size_t(i)].getAsArray();
      ASSERT_EQ(int64_t(row.size()), L + 1) << what;
      for (int64_t j = 0; j < L; ++j) {
        EXPECT_EQ(tokens[size_t(i * L + j)], *row[size_t(j)].getAsInteger())
            << what << " row " << i << " position " << j;
        EXPECT_EQ(targets[size_t(i * L + j)],
                  *row[size_t(j + 1)].getAsInteger())
            << what << " row " << i << " position " << j;
      }
    }
  }
  EXPECT_GT(reshaped, 5); // the cases that change the rows
}

} // namespace
