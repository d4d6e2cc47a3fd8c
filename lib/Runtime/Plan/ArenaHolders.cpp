//===- ArenaHolders.cpp - Which pipeline ranks allocate each arena --------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/ArenaHolders.h"

#include <algorithm>
#include <map>
#include <string>

using namespace dsc::rt;

std::map<std::string, int64_t>
dsc::rt::pipelineRankOfPrograms(const Plan &plan) {
  std::map<std::string, int64_t> rankOfProgram;
  const int64_t ranks = plan.pipelineRanks();
  if (ranks <= 0)
    return rankOfProgram;
  // The plan's stages and a curriculum's other lengths' (stage k runs on
  // rank k mod P at every length).
  auto add = [&](const std::vector<PipelineStage> &stages) {
    for (size_t k = 0; k < stages.size(); ++k) {
      const PipelineStage &st = stages[k];
      for (const std::string *name :
           {&st.forward, &st.forwardBackward, &st.backwardWeight, &st.optimizer,
            &st.step, &st.compressedOptimizer})
        if (!name->empty())
          rankOfProgram[*name] = int64_t(k) % ranks;
    }
  };
  add(plan.stages);
  for (const CurriculumLength &c : plan.curriculum)
    add(c.stages);
  return rankOfProgram;
}

std::vector<std::vector<bool>> dsc::rt::arenaHolders(const Plan &plan) {
  if (plan.stages.empty())
    return std::vector<std::vector<bool>>(plan.arenas.size(),
                                          std::vector<bool>(1, true));
  const int64_t ranks = std::max<int64_t>(plan.pipelineRanks(), 1);
  std::vector<std::vector<bool>> holders(plan.arenas.size(),
                                         std::vector<bool>(size_t(ranks)));
  for (size_t a = 0; a < plan.arenas.size(); ++a)
    if (plan.arenas[a].pipelineRank >= 0 && plan.arenas[a].pipelineRank < ranks)
      holders[a][size_t(plan.arenas[a].pipelineRank)] = true;
  const std::map<std::string, int64_t> rankOfProgram =
      pipelineRankOfPrograms(plan);
  for (const Program &prog : plan.programs) {
    auto it = rankOfProgram.find(prog.name);
    for (const Instruction &inst : prog.instructions)
      for (const std::vector<uint32_t> *ids : {&inst.inputs, &inst.outputs})
        for (uint32_t id : *ids) {
          if (id >= plan.buffers.size())
            continue; // validatePlan names it
          const uint32_t a = plan.buffers[id].arena;
          if (a >= plan.arenas.size() || plan.arenas[a].pipelineRank >= 0)
            continue;
          if (it != rankOfProgram.end())
            holders[a][size_t(it->second)] = true;
          else
            holders[a].assign(size_t(ranks), true);
        }
  }
  // A shared arena no program uses stays every rank's, as it always was.
  for (size_t a = 0; a < plan.arenas.size(); ++a)
    if (plan.arenas[a].pipelineRank < 0 &&
        std::none_of(holders[a].begin(), holders[a].end(),
                     [](bool h) { return h; }))
      holders[a].assign(size_t(ranks), true);
  return holders;
}
