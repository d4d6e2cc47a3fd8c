//===- Launcher.cpp - Ranks on hosts and their launch commands ------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The mesh is read with the plan's own parser (dsc/Support/ParallelPlan.h),
// so "dp=2 tp=2" means here what it means to dsc-run; the words it does
// not know (warmup=1, lr schedules) are compile options and are skipped.
// The rank order is the plan's (Megatron-LM's: tp innermost, then dp, then
// pp), so consecutive ranks form a tensor-parallel group and a host whose
// slot count is a multiple of tp holds whole groups: their all-reduces,
// four per layer per micro-batch, never cross the network.
//
//===----------------------------------------------------------------------===//

#include "Launcher.h"
#include "LaunchError.h"

#include "dsc/Support/ParallelPlan.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <cstdlib>
#include <tuple>
#include <unistd.h>

using namespace dsc::launch;
using llvm::StringRef;

llvm::Expected<PlanMesh>
dsc::launch::readPlanMesh(llvm::ArrayRef<std::string> runArgs) {
  PlanMesh mesh;
  std::optional<std::string> compile;
  // dsc-run takes "--flag value" and "--flag=value"; the last one counts.
  for (size_t i = 1; i < runArgs.size(); ++i) {
    StringRef arg = runArgs[i];
    auto [flag, value] = arg.split('=');
    const bool inlineValue = arg.contains('=');
    if (flag != "--compile" && flag != "--np")
      continue;
    if (!inlineValue) {
      if (i + 1 >= runArgs.size())
        return fail("dsc-run's " + flag + " has no value");
      value = runArgs[++i];
    }
    if (flag == "--compile") {
      compile = value.str();
      continue;
    }
    int64_t np = 0;
    if (value.getAsInteger(10, np) || np < 1)
      return fail("dsc-run's --np '" + value + "' is not a rank count");
    mesh.np = np;
  }
  // dsc-run's MODEL comes first (its usage: dsc-run MODEL [options]).
  StringRef model;
  if (runArgs.size() > 1 && !StringRef(runArgs[1]).starts_with("-"))
    model = runArgs[1];
  if (model.ends_with(".plan")) {
    mesh.note = "'" + model.str() +
                "' is a compiled plan: its mesh is not read here; dsc-run "
                "checks it against the ranks at start";
    return mesh;
  }
  const bool config = model.ends_with(".yml") || model.ends_with(".yaml") ||
                      model.ends_with(".json");
  if (!compile && !config) {
    mesh.note = "no --compile among dsc-run's arguments and no config as "
                "its MODEL (a module that carries its own mesh): the mesh is "
                "not checked here; dsc-run checks it against the ranks at "
                "start";
    return mesh;
  }
  ::dsc::ParallelPlan plan;
  std::string error, rest;
  ::dsc::PlanKeySet given;
  if (compile &&
      !::dsc::parseParallelPlan(*compile, plan, error, &given, &rest))
    return fail("dsc-run's --compile \"" + *compile + "\": " + error);
  // plan=auto (a --dsc-compile option, not a plan key) lets the search
  // pick the mesh when dsc-run compiles: nothing to check before.
  std::vector<std::string> words;
  if (::dsc::splitPlanWords(rest, words, error))
    for (const std::string &word : words)
      if (StringRef(word).starts_with("plan=")) {
        mesh.note = "--compile's " + word +
                    " chooses the mesh when dsc-run compiles: it is not "
                    "checked here";
        return mesh;
      }
  // A GPT-NeoX config's parallel sizes are dsc-run's tp, pp and ep where
  // --compile does not give them (NeoXTrainingConfig.cpp; the command line
  // is the last layer and wins).
  if (config)
    if (auto buffer = llvm::MemoryBuffer::getFile(model, /*IsText=*/true))
      for (auto [key, planKey, axis] :
           {std::tuple<const char *, ::dsc::PlanKey, int64_t *>{
                "model[-_]parallel[-_]size", ::dsc::PlanKey::tp, &plan.tp},
            {"pipe[-_]parallel[-_]size", ::dsc::PlanKey::pp, &plan.pp},
            {"moe[-_]expert[-_]parallel[-_]size", ::dsc::PlanKey::ep,
             &plan.ep}}) {
        if (given.test(size_t(planKey)))
          continue;
        llvm::Regex pattern(std::string("[\"']?(") + key +
                            ")[\"']?[ \t]*:[ \t]*([0-9]+)");
        llvm::SmallVector<StringRef, 3> match;
        unsigned long long value = 0;
        if (!pattern.match((*buffer)->getBuffer(), &match) ||
            match[2].getAsInteger(10, value) || value > 1u << 20)
          continue;
        // pipe_parallel_size 0 is GPT-NeoX's "no pipeline engine": pp=1.
        *axis = std::max<int64_t>(int64_t(value), 1);
        if (*axis == 1)
          continue;
        mesh.sources += (mesh.sources.empty() ? "" : ", ") +
                        std::string(::dsc::planKeyInfo(planKey).name) + "=" +
                        std::to_string(*axis) + " from " + model.str() + "'s " +
                        match[1].str();
      }
  mesh.known = true;
  mesh.dp = plan.dp;
  mesh.tp = plan.tp;
  mesh.pp = plan.pp;
  mesh.ep = plan.ep;
  for (auto [name, size] : {std::pair<const char *, int64_t>{"dp", plan.dp},
                            {"tp", plan.tp},
                            {"pp", plan.pp},
                            {"ep", plan.ep}})
    if (size != 1)
      mesh.text += (mesh.text.empty() ? "" : " ") + std::string(name) + "=" +
                   std::to_string(size);
  if (mesh.text.empty())
    mesh.text = "dp=1";
  return mesh;
}

llvm::Error dsc::launch::checkPlan(const PlanMesh &mesh,
                                   const Allocation &hosts) {
  const int world = worldSize(hosts);
  const std::string slots = std::to_string(world) + " slot" +
                            (world == 1 ? "" : "s") + " (" +
                            slotSummary(hosts) + ")";
  if (mesh.np && *mesh.np != world)
    return fail("dsc-run's --np " + llvm::Twine(*mesh.np) + " asks for " +
                llvm::Twine(*mesh.np) + " ranks, but the allocation has " +
                slots);
  if (!mesh.known)
    return llvm::Error::success();
  if (mesh.dp % mesh.ep != 0)
    return fail("the plan's ep=" + llvm::Twine(mesh.ep) +
                " does not divide dp=" + llvm::Twine(mesh.dp) +
                " (expert parallelism splits the data-parallel group)");
  if (mesh.ranks() != world)
    return fail(
        "the plan " + mesh.text + " needs dp*tp*pp = " + llvm::Twine(mesh.dp) +
        "*" + llvm::Twine(mesh.tp) + "*" + llvm::Twine(mesh.pp) + " = " +
        llvm::Twine(mesh.ranks()) + " ranks, but the allocation has " + slots +
        "; change the plan or the slots (--num_gpus, --num_nodes, "
        "--include, the hostfile)");
  for (const Host &host : hosts) {
    const int64_t n = int64_t(host.slots.size());
    if (n % mesh.tp == 0)
      continue;
    if (n < mesh.tp)
      return fail("tensor parallelism (tp=" + llvm::Twine(mesh.tp) +
                  ") must stay inside a host, but host '" + host.name +
                  "' has " + llvm::Twine(n) + " slot" + (n == 1 ? "" : "s"));
    return fail("tensor parallelism (tp=" + llvm::Twine(mesh.tp) +
                ") must stay inside a host, but host '" + host.name + "' has " +
                llvm::Twine(n) + " slots, not a multiple of " +
                llvm::Twine(mesh.tp) +
                ": a tensor-parallel group would span two hosts");
  }
  return llvm::Error::success();
}

std::vector<RankPlace> dsc::launch::placeRanks(const PlanMesh &mesh,
                                               const Allocation &hosts) {
  std::vector<RankPlace> ranks;
  for (auto [h, host] : llvm::enumerate(hosts))
    for (auto [local, slot] : llvm::enumerate(host.slots)) {
      RankPlace place;
      place.rank = int(ranks.size());
      place.host = int(h);
      place.localRank = int(local);
      place.slot = slot;
      const ::dsc::RankCoordinates at =
          ::dsc::rankCoordinates(place.rank, mesh.dp, mesh.tp);
      place.tp = at.tp;
      place.dp = at.dp;
      place.pp = at.pp;
      ranks.push_back(place);
    }
  return ranks;
}

void dsc::launch::printRankTable(llvm::raw_ostream &os, const PlanMesh &mesh,
                                 const Allocation &hosts,
                                 llvm::ArrayRef<RankPlace> ranks) {
  size_t hostWidth = 4;
  for (const Host &host : hosts)
    hostWidth = std::max(hostWidth, host.name.size());
  const bool experts = mesh.known && mesh.ep > 1;
  os << "dsc-launch: " << ranks.size() << " rank"
     << (ranks.size() == 1 ? "" : "s") << " on " << hosts.size() << " host"
     << (hosts.size() == 1 ? "" : "s") << " (" << slotSummary(hosts) << ")";
  if (mesh.known)
    os << ", plan " << mesh.text
       << "; rank = tp + tp*(dp + dp*pp), tp innermost";
  os << "\n";
  os << llvm::format("%5s  %-*s  %5s  %4s", "rank", int(hostWidth), "host",
                     "local", "slot");
  if (mesh.known)
    os << "  " << llvm::format("%3s %3s %3s", "dp", "tp", "pp");
  if (experts)
    os << llvm::format(" %3s", "ep");
  os << "\n";
  for (const RankPlace &r : ranks) {
    os << llvm::format("%5d  %-*s  %5d  %4d", r.rank, int(hostWidth),
                       hosts[r.host].name.c_str(), r.localRank, r.slot);
    if (mesh.known)
      os << "  "
         << llvm::format("%3lld %3lld %3lld", (long long)r.dp, (long long)r.tp,
                         (long long)r.pp);
    // DeclareMesh's E+D split: ep consecutive data-parallel ranks.
    if (experts)
      os << llvm::format(" %3lld", (long long)(r.dp % mesh.ep));
    os << "\n";
  }
}

std::string dsc::launch::openMpiHostfile(const Allocation &hosts) {
  std::string text;
  for (const Host &host : hosts)
    text += host.name + " slots=" + std::to_string(host.slots.size()) + "\n";
  return text;
}

/// What every rank's environment carries from the launcher: the thread
/// counts a user set for the ranks' BLAS and OpenMP pools (left unset, each
/// of a host's ranks would start one thread per core), and the restart
/// count and the dead-rank file, when the launch has them.
static std::vector<std::pair<std::string, std::string>>
rankEnv(const LaunchOptions &options) {
  std::vector<std::pair<std::string, std::string>> env;
  for (const char *name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"})
    if (const char *value = std::getenv(name))
      env.emplace_back(name, value);
  if (options.restartCount)
    env.emplace_back("TORCHELASTIC_RESTART_COUNT",
                     std::to_string(*options.restartCount));
  if (!options.deadRankFile.empty())
    env.emplace_back("DSC_DEAD_RANK_FILE", options.deadRankFile);
  return env;
}

std::vector<std::string>
dsc::launch::openMpiCommand(const Allocation &hosts,
                            const LaunchOptions &options, StringRef hostfile) {
  std::vector<std::string> cmd = {
      "mpirun",     "-n",           std::to_string(worldSize(hosts)),
      "--hostfile", hostfile.str(), "--map-by",
      "slot"};
  // Open MPI refuses to start as root unless told; containers run as root.
  if (geteuid() == 0)
    cmd.push_back("--allow-run-as-root");
  std::vector<std::pair<std::string, std::string>> env = {
      {"MASTER_ADDR", options.masterAddr},
      {"MASTER_PORT", std::to_string(options.masterPort)}};
  for (auto &kv : rankEnv(options))
    env.push_back(kv);
  for (auto &[name, value] : env) {
    cmd.push_back("-x");
    cmd.push_back(name + "=" + value);
  }
  cmd.insert(cmd.end(), options.launcherArgs.begin(),
             options.launcherArgs.end());
  cmd.insert(cmd.end(), options.runArgs.begin(), options.runArgs.end());
  return cmd;
}

llvm::Expected<std::vector<std::string>>
dsc::launch::slurmCommand(const Allocation &hosts,
                          const LaunchOptions &options) {
  const size_t perNode = hosts.front().slots.size();
  for (const Host &host : hosts)
    if (host.slots.size() != perNode)
      return fail("--launcher slurm: srun starts the same number of tasks on "
                  "every node, but the hosts have " +
                  slotSummary(hosts) +
                  " slots; select equal slots (--num_gpus) or use "
                  "--launcher openmpi");
  std::string nodes, exports = "--export=ALL";
  for (const Host &host : hosts)
    nodes += (nodes.empty() ? "" : ",") + host.name;
  exports += ",MASTER_ADDR=" + options.masterAddr +
             ",MASTER_PORT=" + std::to_string(options.masterPort);
  for (auto &[name, value] : rankEnv(options))
    exports += "," + name + "=" + value;
  std::vector<std::string> cmd = {
      "srun", "--nodes=" + std::to_string(hosts.size()),
      "--ntasks=" + std::to_string(worldSize(hosts)),
      "--ntasks-per-node=" + std::to_string(perNode), "--nodelist=" + nodes,
      // Consecutive ranks on one node, as the rank table shows them.
      "--distribution=block", exports};
  cmd.insert(cmd.end(), options.launcherArgs.begin(),
             options.launcherArgs.end());
  cmd.insert(cmd.end(), options.runArgs.begin(), options.runArgs.end());
  return cmd;
}

std::vector<std::vector<std::string>>
dsc::launch::sshCommands(const Allocation &hosts, const LaunchOptions &options,
                         StringRef workingDir) {
  std::vector<std::vector<std::string>> commands;
  const int world = worldSize(hosts);
  int rank = 0;
  for (auto [nodeRank, host] : llvm::enumerate(hosts)) {
    // One shell on the host starts its ranks and waits for them all, as
    // torchrun's agent does for its local workers.
    std::string devices;
    for (int slot : host.slots)
      devices += (devices.empty() ? "" : ",") + std::to_string(slot);
    // `cd` alone first (`cd D && a & b &` would cd only in a's subshell);
    // then each rank in the background, and the largest of their statuses
    // (`wait` alone would return 0) as ssh's, as `pdsh -S` reports.
    std::string script = "cd " + shellQuote(workingDir) + " || exit 1;";
    std::string waits = " rc=0;";
    for (size_t local = 0; local < host.slots.size(); ++local, ++rank) {
      std::vector<std::string> words = {
          "env",
          "RANK=" + std::to_string(rank),
          "WORLD_SIZE=" + std::to_string(world),
          "LOCAL_RANK=" + std::to_string(local),
          "LOCAL_WORLD_SIZE=" + std::to_string(host.slots.size()),
          "NODE_RANK=" + std::to_string(nodeRank),
          "MASTER_ADDR=" + options.masterAddr,
          "MASTER_PORT=" + std::to_string(options.masterPort),
          "CUDA_VISIBLE_DEVICES=" + devices};
      for (auto &[name, value] : rankEnv(options))
        words.push_back(name + "=" + value);
      words.insert(words.end(), options.runArgs.begin(), options.runArgs.end());
      const std::string pid = "p" + std::to_string(local);
      script += " " + shellJoin(words) + " & " + pid + "=$!;";
      waits += " wait $" + pid + "; s=$?; [ $s -le $rc ] || rc=$s;";
    }
    script += waits + " exit $rc";
    std::vector<std::string> cmd = {"ssh"};
    cmd.insert(cmd.end(), options.launcherArgs.begin(),
               options.launcherArgs.end());
    cmd.push_back(host.name);
    cmd.push_back(script);
    commands.push_back(std::move(cmd));
  }
  return commands;
}

std::string dsc::launch::shellQuote(StringRef word) {
  auto plain = [](char c) {
    return llvm::isAlnum(c) || StringRef("_-+=:,./@%").contains(c);
  };
  if (!word.empty() && llvm::all_of(word, plain))
    return word.str();
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'')
      quoted += "'\\''";
    else
      quoted += c;
  }
  return quoted + "'";
}

std::string dsc::launch::shellJoin(llvm::ArrayRef<std::string> words) {
  std::string line;
  for (const std::string &word : words)
    line += (line.empty() ? "" : " ") + shellQuote(word);
  return line;
}
