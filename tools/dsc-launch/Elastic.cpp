//===- Elastic.cpp - Continuing a job on fewer ranks ----------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Why only dp shrinks: a tensor slice and a pipeline stage are compiled
// into each rank's program (its matmul shapes, its send/recv partners), so
// fewer ranks with the same tp and pp is the only plan whose parameters
// mean what they meant; ZeRO's shards are cut along dp, and the checkpoint
// loader re-chunks them for any dp (docs/checkpoints.md, "the resharding
// rule"). Keeping dp * microbatches fixed keeps the step's global batch, so
// the consumed-sample count, the data each step reads and the schedule go
// on as if no rank had been lost; the sums only change order.
//
//===----------------------------------------------------------------------===//

#include "Elastic.h"
#include "LaunchError.h"

#include "dsc/Support/ParallelPlan.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>

using namespace dsc::launch;
using llvm::StringRef;

llvm::Expected<ElasticRange> dsc::launch::parseElastic(StringRef text,
                                                       int world) {
  auto [minText, maxText] = text.split(':');
  ElasticRange range;
  if (!text.contains(':') || minText.trim().getAsInteger(10, range.min) ||
      maxText.trim().getAsInteger(10, range.max))
    return fail("--elastic '" + text +
                "': expected MIN:MAX rank counts, e.g. --elastic 2:4");
  if (range.min < 1)
    return fail("--elastic " + text + ": MIN must be at least 1, got " +
                llvm::Twine(range.min));
  if (range.min > range.max)
    return fail("--elastic " + text + ": MIN " + llvm::Twine(range.min) +
                " is above MAX " + llvm::Twine(range.max));
  if (range.max > world)
    return fail("--elastic " + text + ": MAX " + llvm::Twine(range.max) +
                " is above the job's world of " + llvm::Twine(world) +
                " ranks (the plan's and the selected slots'); a job never "
                "grows past the ranks it starts on");
  if (range.max < world)
    return fail("--elastic " + text + ": MAX " + llvm::Twine(range.max) +
                " is below the job's world of " + llvm::Twine(world) +
                " ranks: the job starts on all of them; give MAX = " +
                llvm::Twine(world) + " (or select fewer slots)");
  return range;
}

std::string ElasticPlan::describe() const {
  return "dp=" + std::to_string(dp) + " tp=" + std::to_string(tp) +
         " pp=" + std::to_string(pp) +
         (ep > 1 ? " ep=" + std::to_string(ep) : std::string()) + ", " +
         std::to_string(microBatches) + " micro-batch" +
         (microBatches == 1 ? "" : "es") + " per data-parallel rank";
}

llvm::Expected<ElasticPlan> dsc::launch::parsePrintConfig(StringRef text) {
  ElasticPlan plan;
  std::pair<const char *, int64_t *> keys[] = {
      {"dp", &plan.dp},
      {"tp", &plan.tp},
      {"pp", &plan.pp},
      {"ep", &plan.ep},
      {"microbatches", &plan.microBatches}};
  bool seen[std::size(keys)] = {};
  llvm::SmallVector<StringRef> lines;
  text.split(lines, '\n');
  for (StringRef line : lines) {
    // "  dp                     4                  command line: ..."
    if (!line.starts_with("  "))
      continue;
    auto [key, rest] = line.trim().split(' ');
    StringRef value = rest.trim().split(' ').first;
    for (auto [i, entry] : llvm::enumerate(keys))
      if (key == entry.first) {
        if (value.getAsInteger(10, *entry.second) || *entry.second < 1)
          return fail("dsc-run --print-config gave " + key + " '" + value +
                      "', not a count");
        seen[i] = true;
      }
  }
  for (auto [i, entry] : llvm::enumerate(keys))
    if (!seen[i])
      return fail(llvm::Twine("dsc-run --print-config did not report '") +
                  entry.first + "'");
  return plan;
}

std::vector<int64_t> dsc::launch::shrinkableWorlds(const ElasticPlan &plan) {
  std::vector<int64_t> worlds;
  const int64_t batch = plan.dp * plan.microBatches;
  for (int64_t dp = plan.dp; dp >= 1; --dp)
    if (batch % dp == 0 && dp % plan.ep == 0)
      worlds.push_back(dp * plan.tp * plan.pp);
  return worlds;
}

ElasticPlan dsc::launch::shrinkPlan(const ElasticPlan &plan, int64_t world) {
  ElasticPlan out = plan;
  out.dp = world / (plan.tp * plan.pp);
  out.microBatches = plan.dp * plan.microBatches / out.dp;
  return out;
}

llvm::Expected<Shrunk> dsc::launch::shrinkTo(const ElasticPlan &plan,
                                             const Allocation &alive,
                                             ElasticRange range,
                                             llvm::ArrayRef<int64_t> worlds) {
  // A tensor-parallel group stays inside a host (checkPlan's rule).
  int64_t capacity = 0;
  for (const Host &host : alive)
    capacity += int64_t(host.slots.size()) / plan.tp * plan.tp;
  for (int64_t world : worlds) {
    if (world > range.max || world > capacity)
      continue;
    if (world < range.min)
      break;
    Shrunk out;
    out.plan = shrinkPlan(plan, world);
    int64_t left = world;
    for (const Host &host : alive) {
      const int64_t take =
          std::min(left, int64_t(host.slots.size()) / plan.tp * plan.tp);
      if (take == 0)
        continue;
      Host used = host;
      used.slots.resize(size_t(take));
      out.hosts.push_back(std::move(used));
      left -= take;
    }
    return out;
  }
  std::string sizes;
  for (int64_t world : worlds)
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(world);
  return fail("--elastic " + llvm::Twine(range.min) + ":" +
              llvm::Twine(range.max) + ": the surviving slots (" +
              (alive.empty() ? std::string("none") : slotSummary(alive)) +
              ") hold " + llvm::Twine(capacity) + " rank" +
              (capacity == 1 ? "" : "s") +
              " in whole tensor-parallel groups (tp=" + llvm::Twine(plan.tp) +
              "), and the plan " + plan.describe() + " runs on " + sizes +
              " ranks (dp' dividing dp*microbatches = " +
              llvm::Twine(plan.dp * plan.microBatches) +
              ", tp and pp kept): no world of at least " +
              llvm::Twine(range.min) + " fits");
}

Allocation dsc::launch::dropRankSlot(const Allocation &alive,
                                     const Allocation &used, int rank) {
  std::string hostName;
  int slot = -1;
  int r = 0;
  for (const Host &host : used)
    for (int s : host.slots)
      if (r++ == rank) {
        hostName = host.name;
        slot = s;
      }
  Allocation out;
  for (const Host &host : alive) {
    Host kept = host;
    if (host.name == hostName)
      llvm::erase(kept.slots, slot);
    if (!kept.slots.empty())
      out.push_back(std::move(kept));
  }
  return out;
}

llvm::Expected<std::vector<std::string>>
dsc::launch::shrinkRunArgs(llvm::ArrayRef<std::string> runArgs,
                           const ElasticPlan &plan) {
  std::vector<std::string> out;
  std::string compile;
  for (size_t i = 0; i < runArgs.size(); ++i) {
    StringRef arg = runArgs[i];
    auto [flag, value] = arg.split('=');
    // --np (threads, or a check of the process count) would name the old
    // world; the shrunk one is the launcher's.
    if (i == 0 ||
        (flag != "--compile" && flag != "--microbatches" && flag != "--np")) {
      out.push_back(arg.str());
      continue;
    }
    if (!arg.contains('=')) {
      if (i + 1 >= runArgs.size())
        return fail("dsc-run's " + flag + " has no value");
      value = runArgs[++i];
    }
    if (flag == "--compile")
      compile = value.str();
  }
  std::vector<std::string> words;
  std::string error;
  if (!::dsc::splitPlanWords(compile, words, error))
    return fail("dsc-run's --compile \"" + compile + "\": " + error);
  std::string text;
  for (const std::string &word : words) {
    std::optional<::dsc::PlanKey> key =
        ::dsc::lookupPlanKey(StringRef(word).split('=').first);
    if (key == ::dsc::PlanKey::dp || key == ::dsc::PlanKey::numMicroBatches)
      continue;
    text += word + " ";
  }
  text += "dp=" + std::to_string(plan.dp);
  out.push_back("--compile");
  out.push_back(text);
  out.push_back("--microbatches");
  out.push_back(std::to_string(plan.microBatches));
  return out;
}
