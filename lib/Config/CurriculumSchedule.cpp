//===- CurriculumSchedule.cpp - DeepSpeed's sequence-length curriculum ----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The `curriculum_learning` reader and DeepSpeed's difficulty schedule
// (deepspeed/runtime/data_pipeline/curriculum_scheduler.py, 0.19.8), checked
// step by step against that code's output in
// test/Runtime/CurriculumScheduleTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "dsc/Config/CurriculumSchedule.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>
#include <cmath>

using namespace dsc::config;
using llvm::json::Object;
using llvm::json::Value;

namespace {

/// Reads one block; every error names the key by its full path.
class Reader {
public:
  explicit Reader(llvm::StringRef prefix) : prefix(prefix.str()) {}

  llvm::Expected<CurriculumSchedule> read(const Object &block,
                                          std::optional<int64_t> maxSeqLen);

private:
  std::string path(llvm::StringRef key) const {
    return prefix + "." + key.str();
  }
  llvm::Error fail(llvm::StringRef key, const llvm::Twine &why) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path(key) + ": " + why);
  }

  llvm::Error onlyKnown(const Object &o, llvm::ArrayRef<llvm::StringRef> known,
                        llvm::ArrayRef<llvm::StringRef> notHere,
                        llvm::StringRef notHereWhy) const;
  llvm::Expected<const Value *> required(const Object &o, llvm::StringRef key,
                                         llvm::StringRef why) const;
  llvm::Expected<int64_t> integer(const Object &o, llvm::StringRef key,
                                  llvm::StringRef why) const;
  llvm::Expected<std::vector<int64_t>> integers(const Object &o,
                                                llvm::StringRef key) const;

  std::string prefix;
};

} // namespace

/// An unknown key is named with the nearest known one; a key DeepSpeed
/// knows but this schedule_type never reads is refused too, because the
/// user who wrote it expected it to do something.
llvm::Error Reader::onlyKnown(const Object &o,
                              llvm::ArrayRef<llvm::StringRef> known,
                              llvm::ArrayRef<llvm::StringRef> notHere,
                              llvm::StringRef notHereWhy) const {
  for (const auto &entry : o) {
    llvm::StringRef key = entry.first;
    if (llvm::is_contained(known, key))
      continue;
    if (llvm::is_contained(notHere, key))
      return fail(key, notHereWhy);
    std::string msg = "unknown key";
    llvm::StringRef best;
    unsigned bestDistance = 3;
    for (llvm::StringRef k : known)
      if (unsigned d = key.edit_distance(k); d < bestDistance)
        bestDistance = d, best = k;
    if (!best.empty())
      msg += "; did you mean '" + best.str() + "'?";
    msg += " (known here: " + llvm::join(known, ", ") + ")";
    return fail(key, msg);
  }
  return llvm::Error::success();
}

llvm::Expected<const Value *> Reader::required(const Object &o,
                                               llvm::StringRef key,
                                               llvm::StringRef why) const {
  if (const Value *v = o.get(key))
    return v;
  return fail(key, "missing: " + why);
}

llvm::Expected<int64_t> Reader::integer(const Object &o, llvm::StringRef key,
                                        llvm::StringRef why) const {
  auto v = required(o, key, why);
  if (!v)
    return v.takeError();
  if (std::optional<int64_t> i = (*v)->getAsInteger())
    return *i;
  return fail(key, "must be an integer");
}

llvm::Expected<std::vector<int64_t>>
Reader::integers(const Object &o, llvm::StringRef key) const {
  auto v = required(o, key,
                    "fixed_discrete needs both difficulty and "
                    "max_step");
  if (!v)
    return v.takeError();
  const llvm::json::Array *a = (*v)->getAsArray();
  if (!a || a->empty())
    return fail(key, "must be a non-empty list of integers");
  std::vector<int64_t> out;
  for (const Value &e : *a) {
    std::optional<int64_t> i = e.getAsInteger();
    if (!i)
      return fail(key, "must be a non-empty list of integers");
    out.push_back(*i);
  }
  return out;
}

llvm::Expected<CurriculumSchedule>
Reader::read(const Object &block, std::optional<int64_t> maxSeqLen) {
  CurriculumSchedule s;
  if (const Value *e = block.get("enabled")) {
    std::optional<bool> b = e->getAsBoolean();
    if (!b)
      return fail("enabled", "must be true or false");
    s.enabled = *b;
  }
  // A switched-off block may keep nothing else, as DeepSpeed's examples
  // write it; anything more is checked as if enabled, since a later edit
  // will switch it on.
  if (!s.enabled && block.size() == (block.get("enabled") ? 1u : 0u))
    return s;

  if (llvm::Error err =
          onlyKnown(block,
                    {"enabled", "curriculum_type", "min_difficulty",
                     "max_difficulty", "schedule_type", "schedule_config"},
                    {}, ""))
    return std::move(err);

  auto type = required(block, "curriculum_type",
                       "DeepSpeed's engine reads it on every step; dsc "
                       "implements \"seqlen\"");
  if (!type)
    return type.takeError();
  std::optional<llvm::StringRef> typeName = (*type)->getAsString();
  if (!typeName || *typeName != "seqlen")
    return fail("curriculum_type",
                "dsc implements only \"seqlen\" (the sequence length as "
                "difficulty)");
  s.curriculumType = typeName->str();

  auto minD = integer(block, "min_difficulty", "the first sequence length");
  if (!minD)
    return minD.takeError();
  auto maxD = integer(block, "max_difficulty", "the last sequence length");
  if (!maxD)
    return maxD.takeError();
  s.minDifficulty = *minD;
  s.maxDifficulty = *maxD;
  if (s.minDifficulty < 1)
    return fail("min_difficulty", llvm::formatv("must be a sequence length of "
                                                "at least 1 token, got {0}",
                                                s.minDifficulty));
  if (s.minDifficulty > s.maxDifficulty)
    return fail("min_difficulty",
                llvm::formatv("{0} is above max_difficulty {1}",
                              s.minDifficulty, s.maxDifficulty));
  if (maxSeqLen && s.maxDifficulty > *maxSeqLen)
    return fail("max_difficulty",
                llvm::formatv("{0} is above the model's sequence length {1}; "
                              "the curriculum can only shorten sequences",
                              s.maxDifficulty, *maxSeqLen));

  auto schedType = required(block, "schedule_type",
                            "one of fixed_linear, fixed_root, fixed_discrete");
  if (!schedType)
    return schedType.takeError();
  std::optional<llvm::StringRef> schedName = (*schedType)->getAsString();
  if (!schedName)
    return fail("schedule_type", "must be a string");
  if (*schedName == "fixed_linear")
    s.scheduleType = CurriculumScheduleType::FixedLinear;
  else if (*schedName == "fixed_root")
    s.scheduleType = CurriculumScheduleType::FixedRoot;
  else if (*schedName == "fixed_discrete")
    s.scheduleType = CurriculumScheduleType::FixedDiscrete;
  else if (*schedName == "custom")
    return fail("schedule_type",
                "\"custom\" takes a Python function "
                "(set_custom_curriculum_learning_schedule), which a config "
                "cannot carry; use fixed_linear, fixed_root or "
                "fixed_discrete");
  else
    return fail("schedule_type",
                "\"" + *schedName +
                    "\" is not one of fixed_linear, fixed_root, "
                    "fixed_discrete");

  auto cfgValue =
      required(block, "schedule_config", "the schedule's parameters");
  if (!cfgValue)
    return cfgValue.takeError();
  const Object *cfg = (*cfgValue)->getAsObject();
  if (!cfg)
    return fail("schedule_config", "must be an object");
  Reader sub(path("schedule_config"));

  if (s.scheduleType == CurriculumScheduleType::FixedDiscrete) {
    if (llvm::Error err = sub.onlyKnown(
            *cfg, {"difficulty", "max_step"},
            {"total_curriculum_step", "difficulty_step", "root_degree"},
            "read only by fixed_linear and fixed_root; fixed_discrete "
            "takes difficulty and max_step"))
      return std::move(err);
    auto diff = sub.integers(*cfg, "difficulty");
    if (!diff)
      return diff.takeError();
    auto steps = sub.integers(*cfg, "max_step");
    if (!steps)
      return steps.takeError();
    s.difficulty = std::move(*diff);
    s.maxStep = std::move(*steps);
    // DeepSpeed asserts this: the last difficulty holds after the last
    // max_step, so it has no max_step of its own.
    if (s.difficulty.size() != s.maxStep.size() + 1)
      return sub.fail("difficulty",
                      llvm::formatv("has {0} entries and max_step {1}; "
                                    "DeepSpeed needs one more difficulty "
                                    "than max_step (the last holds after "
                                    "the last max_step)",
                                    s.difficulty.size(), s.maxStep.size()));
    // DeepSpeed does not check the rest. A max_step out of order makes
    // some difficulty unreachable. A difficulty above max_difficulty
    // escapes the model-length check, and a decreasing one gives a run
    // that depends on its history: the scheduler stops updating once it
    // reaches max_difficulty, and a resumed run starts afresh.
    for (size_t i = 0; i < s.maxStep.size(); ++i) {
      if (s.maxStep[i] < 1)
        return sub.fail("max_step", llvm::formatv("entry {0} is {1}; steps "
                                                  "count from 1",
                                                  i, s.maxStep[i]));
      if (i > 0 && s.maxStep[i] <= s.maxStep[i - 1])
        return sub.fail("max_step",
                        llvm::formatv("must increase: entry {0} ({1}) is not "
                                      "above entry {2} ({3})",
                                      i, s.maxStep[i], i - 1,
                                      s.maxStep[i - 1]));
    }
    for (size_t i = 0; i < s.difficulty.size(); ++i) {
      if (s.difficulty[i] < 1)
        return sub.fail("difficulty",
                        llvm::formatv("entry {0} is {1}; a sequence length "
                                      "is at least 1 token",
                                      i, s.difficulty[i]));
      if (s.difficulty[i] > s.maxDifficulty)
        return sub.fail("difficulty",
                        llvm::formatv("entry {0} ({1}) is above "
                                      "max_difficulty {2}",
                                      i, s.difficulty[i], s.maxDifficulty));
      if (i > 0 && s.difficulty[i] < s.difficulty[i - 1])
        return sub.fail("difficulty",
                        llvm::formatv("must not decrease: entry {0} ({1}) "
                                      "is below entry {2} ({3}); DeepSpeed "
                                      "would give a resumed run other "
                                      "lengths than an uninterrupted one",
                                      i, s.difficulty[i], i - 1,
                                      s.difficulty[i - 1]));
    }
    return s;
  }

  bool root = s.scheduleType == CurriculumScheduleType::FixedRoot;
  llvm::SmallVector<llvm::StringRef, 3> known = {"total_curriculum_step",
                                                 "difficulty_step"};
  llvm::SmallVector<llvm::StringRef, 3> notHere = {"difficulty", "max_step"};
  if (root)
    known.push_back("root_degree");
  else
    notHere.push_back("root_degree");
  if (llvm::Error err = sub.onlyKnown(
          *cfg, known, notHere,
          root ? "read only by fixed_discrete; fixed_root takes "
                 "total_curriculum_step, difficulty_step and root_degree"
               : "not read by fixed_linear (DeepSpeed ignores it there: "
                 "root_degree is fixed_root's, difficulty and max_step "
                 "fixed_discrete's)"))
    return std::move(err);
  const char *name = root ? "fixed_root" : "fixed_linear";
  auto total = sub.integer(*cfg, "total_curriculum_step",
                           (llvm::Twine(name) + " needs the steps from "
                                                "min_difficulty to "
                                                "max_difficulty")
                               .str());
  if (!total)
    return total.takeError();
  // DeepSpeed divides by both: 0 raises ZeroDivisionError mid-run.
  if (*total < 1)
    return sub.fail("total_curriculum_step",
                    llvm::formatv("must be positive, got {0}", *total));
  auto step = sub.integer(*cfg, "difficulty_step",
                          (llvm::Twine(name) + " needs the multiple every "
                                               "length is rounded to")
                              .str());
  if (!step)
    return step.takeError();
  if (*step < 1)
    return sub.fail("difficulty_step",
                    llvm::formatv("must be positive, got {0}", *step));
  s.totalCurriculumStep = *total;
  s.difficultyStep = *step;
  if (root) {
    auto degree = sub.required(*cfg, "root_degree",
                               "fixed_root needs the root's degree (2 is a "
                               "square root)");
    if (!degree)
      return degree.takeError();
    std::optional<double> d = (*degree)->getAsNumber();
    if (!d || !std::isfinite(*d) || *d <= 0)
      return sub.fail("root_degree", "must be a positive number");
    s.rootDegree = *d;
  }
  return s;
}

llvm::Expected<CurriculumSchedule>
dsc::config::readCurriculumSchedule(const Object &block,
                                    std::optional<int64_t> maxSeqLen,
                                    llvm::StringRef keyPrefix) {
  return Reader(keyPrefix).read(block, maxSeqLen);
}

/// DeepSpeed's CurriculumScheduler keeps the current difficulty and stops
/// updating it once it reaches max_difficulty; before its first update it
/// holds min_difficulty. With a checked schedule that state never shows:
/// every schedule below is non-decreasing in the step and never above
/// max_difficulty, so once it reaches max_difficulty it stays there, and
/// the stateless value is the stateful one. With min_difficulty ==
/// max_difficulty DeepSpeed never updates at all; that is answered first,
/// so the result does not lean on the 0.19.8 floor agreeing with it.
int64_t CurriculumSchedule::difficultyAt(int64_t globalStep) const {
  assert(globalStep >= 0 && "DeepSpeed evaluates steps from 1");
  if (minDifficulty >= maxDifficulty)
    return minDifficulty;

  if (scheduleType == CurriculumScheduleType::FixedDiscrete) {
    for (size_t i = 0; i < maxStep.size(); ++i)
      if (globalStep <= maxStep[i])
        return difficulty[i];
    return difficulty.back();
  }

  // DeepSpeed's arithmetic in its order, in doubles as Python's floats:
  // (t / T) ** (1 / r) with r = 1 for fixed_linear (pow(x, 1.0) is x).
  double degree =
      scheduleType == CurriculumScheduleType::FixedRoot ? rootDegree : 1.0;
  double progress = std::pow(static_cast<double>(globalStep) /
                                 static_cast<double>(totalCurriculumStep),
                             1.0 / degree);
  double raw =
      std::floor(progress * static_cast<double>(maxDifficulty - minDifficulty) +
                 static_cast<double>(minDifficulty));
  // Far past total_curriculum_step the value would overflow an int64; any
  // value a whole difficulty_step above max rounds to at least max anyway.
  if (raw >=
      static_cast<double>(maxDifficulty) + static_cast<double>(difficultyStep))
    return maxDifficulty;
  auto d = static_cast<int64_t>(raw);
  d -= d % difficultyStep;
  // 0.19.8: rounding down may fall below min_difficulty (to 0 when
  // min_difficulty < difficulty_step), so the floor is the first multiple
  // of difficulty_step at or above min_difficulty.
  int64_t floorD =
      (minDifficulty + difficultyStep - 1) / difficultyStep * difficultyStep;
  return std::min(std::max(d, floorD), maxDifficulty);
}
