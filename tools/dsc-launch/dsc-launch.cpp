//===- dsc-launch.cpp - Start dsc-run ranks across hosts ------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// DeepSpeed's `deepspeed` launcher for dsc-run: a hostfile ("worker-0
// slots=8"), the same selection flags (--include/-i, --exclude/-e,
// --num_nodes, --num_gpus), and a launcher (openmpi, the default; slurm;
// ssh) that starts one dsc-run rank per selected slot:
//
//   dsc-launch -H hosts --num_gpus 4 -- dsc-run gpt.yml --compile "dp=2 tp=4"
//
// Unlike DeepSpeed's, it reads the plan from dsc-run's --compile and
// refuses, before anything starts, a plan that the slots cannot run: a
// world size that is not dp*tp*pp, or a tensor-parallel group split across
// hosts. It prints each rank's host, local rank and mesh coordinates, and
// the command it runs (--dry-run: only prints). Its exit code is the
// launcher's (mpirun's, srun's; for ssh the largest of the hosts', as
// DeepSpeed's pdsh runner reports with `pdsh -S`). --max-restarts N, as
// torchrun's, relaunches a failed job from dsc-run's newest checkpoint
// (unless that checkpoint is the run's last step: then training is done);
// with --elastic MIN:MAX it drops the dead rank's slot and continues on
// fewer ranks, a smaller dp that dsc-run compiles and reshards the
// checkpoint into (Elastic.h).
//
//===----------------------------------------------------------------------===//

#include "Elastic.h"
#include "Hostfile.h"
#include "Launcher.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Errno.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/StringSaver.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <optional>
#include <sys/wait.h>
#include <unistd.h>

using namespace dsc::launch;
namespace cl = llvm::cl;

static cl::OptionCategory launchCategory("dsc-launch options");

static cl::opt<std::string>
    hostfile("hostfile",
             cl::desc("DeepSpeed hostfile: lines 'hostname slots=N' (without "
                      "it: localhost with --num_gpus slots)"),
             cl::value_desc("file"), cl::cat(launchCategory));
static cl::alias hostfileShort("H", cl::aliasopt(hostfile),
                               cl::desc("Alias for --hostfile"));
static cl::opt<std::string>
    include("include",
            cl::desc("Use only these hosts/slots: host1@host2:0,2 (all of "
                     "host1, slots 0 and 2 of host2)"),
            cl::value_desc("spec"), cl::cat(launchCategory));
static cl::alias includeShort("i", cl::aliasopt(include),
                              cl::desc("Alias for --include"));
static cl::opt<std::string>
    exclude("exclude",
            cl::desc("Use all hosts/slots but these: host1@host2:0,2"),
            cl::value_desc("spec"), cl::cat(launchCategory));
static cl::alias excludeShort("e", cl::aliasopt(exclude),
                              cl::desc("Alias for --exclude"));
static cl::opt<int> numNodes("num_nodes", cl::init(-1),
                             cl::desc("Use the first N hosts"),
                             cl::value_desc("N"), cl::cat(launchCategory));
static cl::opt<int> numGpus("num_gpus", cl::init(-1),
                            cl::desc("Use the first N slots of each host "
                                     "(without a hostfile: N local ranks; "
                                     "default 1)"),
                            cl::value_desc("N"), cl::cat(launchCategory));

enum class LauncherKind { OpenMpi, Slurm, Ssh };
static cl::opt<LauncherKind> launcher(
    "launcher", cl::init(LauncherKind::OpenMpi),
    cl::desc("How ranks are started"),
    cl::values(clEnumValN(LauncherKind::OpenMpi, "openmpi",
                          "mpirun with a generated hostfile (default)"),
               clEnumValN(LauncherKind::Slurm, "slurm",
                          "srun inside a Slurm allocation"),
               clEnumValN(LauncherKind::Ssh, "ssh",
                          "one ssh per host with torchrun's environment "
                          "(the ranks meet through dsc-run's TCP store)")),
    cl::cat(launchCategory));
static cl::opt<std::string> launcherArgs(
    "launcher_args",
    cl::desc("More arguments for mpirun/srun/ssh, e.g. \"--mca btl tcp,self\""),
    cl::value_desc("args"), cl::cat(launchCategory));
static cl::opt<bool>
    dryRun("dry-run",
           cl::desc("Print the rank table and the command; start nothing"),
           cl::cat(launchCategory));
static cl::alias dryRunUnderscore("dry_run", cl::aliasopt(dryRun),
                                  cl::desc("Alias for --dry-run"));
static cl::opt<std::string>
    masterAddr("master_addr",
               cl::desc("Rank 0's address (default: the first host; "
                        "127.0.0.1 without a hostfile)"),
               cl::value_desc("address"), cl::cat(launchCategory));
static cl::opt<int> masterPort("master_port", cl::init(29500),
                               cl::desc("Rank 0's port (default 29500)"),
                               cl::value_desc("port"), cl::cat(launchCategory));
static cl::opt<int> maxRestarts(
    "max-restarts", cl::init(0),
    cl::desc("Restart a failed job up to N times, each from the newest "
             "checkpoint of dsc-run's --save DIR (torchrun's --max-restarts; "
             "default 0)"),
    cl::value_desc("N"), cl::cat(launchCategory));
static cl::alias maxRestartsUnderscore("max_restarts",
                                       cl::aliasopt(maxRestarts),
                                       cl::desc("Alias for --max-restarts"));
static cl::opt<std::string>
    elastic("elastic",
            cl::desc("After a rank is lost, continue on fewer ranks, at "
                     "least MIN (torchrun's --nnodes=MIN:MAX): the lost "
                     "rank's slot is dropped, dp shrinks, the checkpoint is "
                     "resharded; needs --max-restarts"),
            cl::value_desc("min:max"), cl::cat(launchCategory));
static cl::opt<std::string> program(cl::Positional, cl::desc("-- dsc-run"),
                                    cl::cat(launchCategory));
static cl::list<std::string> programArgs(cl::ConsumeAfter, cl::desc("<args>"),
                                         cl::cat(launchCategory));

static int error(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "dsc-launch") << message << "\n";
  return 1;
}

static int error(llvm::Error err) {
  std::string message = llvm::toString(std::move(err));
  return error(message);
}

/// The value of dsc-run's `flag` in `args` ("--flag V" or "--flag=V"),
/// the last one as dsc-run reads them.
static std::optional<std::string> runFlag(llvm::ArrayRef<std::string> args,
                                          llvm::StringRef flag) {
  std::optional<std::string> value;
  for (size_t i = 1; i < args.size(); ++i) {
    llvm::StringRef arg = args[i];
    if (arg == flag && i + 1 < args.size())
      value = args[++i];
    else if (arg.starts_with(flag) && arg.substr(flag.size()).starts_with("="))
      value = arg.substr(flag.size() + 1).str();
  }
  return value;
}

/// `args` resuming from `checkpoint`: every --load dropped (the original
/// one named where the first attempt started, already passed) and
/// `--load checkpoint` appended.
static std::vector<std::string> resumeArgs(llvm::ArrayRef<std::string> args,
                                           llvm::StringRef checkpoint) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef arg = args[i];
    if (i > 0 && arg == "--load") {
      ++i;
      continue;
    }
    if (i > 0 && arg.starts_with("--load="))
      continue;
    out.push_back(arg.str());
  }
  out.push_back("--load");
  out.push_back(checkpoint.str());
  return out;
}

/// The newest complete checkpoint step under `saveDir` (the name its
/// `latest` file holds, whose directory exists), or none: dsc-run writes
/// `latest` only after a step is complete, so a job killed mid-save leaves
/// it naming the previous step.
static std::optional<std::string> latestCheckpoint(llvm::StringRef saveDir) {
  llvm::SmallString<256> latest(saveDir);
  llvm::sys::path::append(latest, "latest");
  auto buffer = llvm::MemoryBuffer::getFile(latest);
  if (!buffer)
    return std::nullopt;
  llvm::StringRef name = (*buffer)->getBuffer().trim();
  if (name.empty() || name.contains('/'))
    return std::nullopt;
  llvm::SmallString<256> step(saveDir);
  llvm::sys::path::append(step, name);
  if (!llvm::sys::fs::is_directory(step))
    return std::nullopt;
  return name.str();
}

/// The iterations that step `step` under `saveDir` has done: its
/// manifest.json's "iteration" (docs/checkpoints.md), or none when the
/// manifest cannot be read or disagrees with the step's name. dsc-launch
/// links no runtime, so it reads that one field with LLVM's JSON parser;
/// dsc-run checks the whole manifest when it loads the step.
static std::optional<int64_t> checkpointIteration(llvm::StringRef saveDir,
                                                  llvm::StringRef step) {
  llvm::SmallString<256> path(saveDir);
  llvm::sys::path::append(path, step, "manifest.json");
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return std::nullopt;
  auto json = llvm::json::parse((*buffer)->getBuffer());
  if (!json) {
    llvm::consumeError(json.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *manifest = json->getAsObject();
  std::optional<int64_t> iteration =
      manifest ? manifest->getInteger("iteration") : std::nullopt;
  int64_t named = -1;
  if (!iteration || !step.starts_with("step-") ||
      step.drop_front(5).getAsInteger(10, named) || named != *iteration)
    return std::nullopt;
  return iteration;
}

/// The world rank that the failed attempt's ranks reported dead
/// (DSC_DEAD_RANK_FILE, written by dsc-run's rank watch), or none.
static std::optional<int> readDeadRank(llvm::StringRef path,
                                       const Allocation &used) {
  if (path.empty())
    return std::nullopt;
  auto buffer = llvm::MemoryBuffer::getFile(path);
  int rank = -1;
  if (!buffer || (*buffer)->getBuffer().trim().getAsInteger(10, rank) ||
      rank < 0 || rank >= worldSize(used))
    return std::nullopt;
  return rank;
}

/// "host 'localhost' slot 1"
static std::string rankSlot(const Allocation &used, int rank) {
  int r = 0;
  for (const Host &host : used)
    for (int slot : host.slots)
      if (r++ == rank)
        return "host '" + host.name + "' slot " + std::to_string(slot);
  return "an unknown slot";
}

/// mpirun and srun number a host's ranks 0..n-1 and cannot hand each its
/// own device list (the ssh launcher can): says so where a host's slots
/// are not 0..n-1 (a selection, or the slots an elastic restart kept).
static void noteSlotNumbering(llvm::raw_ostream &os, const Allocation &hosts) {
  if (launcher == LauncherKind::Ssh)
    return;
  for (const Host &host : hosts)
    if (int(host.slots.size()) != host.slots.back() + 1) {
      os << "dsc-launch: note: host '" << host.name
         << "' uses slots that are not 0..n-1; under "
         << (launcher == LauncherKind::Slurm ? "srun" : "mpirun")
         << " its ranks are local ranks 0.." << host.slots.size() - 1
         << " (the ssh launcher passes the slots as "
            "CUDA_VISIBLE_DEVICES)\n";
      return;
    }
}

/// dsc-run's --print-config text for `runArgs` (its resolved configuration:
/// the --dsc-compile options and the run options, each with its source).
/// `why` leads an error: what dsc-launch reads from it.
static llvm::Expected<std::string>
printConfig(llvm::ArrayRef<std::string> runArgs, llvm::StringRef why) {
  auto path = llvm::sys::findProgramByName(runArgs[0]);
  if (!path)
    return llvm::createStringError(why + ", but '" + runArgs[0] +
                                   "' is not on PATH");
  llvm::SmallString<128> out;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("dsc-launch-config", "txt", out))
    return llvm::createStringError(why +
                                   ", but cannot create a file for "
                                   "dsc-run --print-config: " +
                                   ec.message());
  std::vector<std::string> command(runArgs.begin(), runArgs.end());
  command.push_back("--print-config");
  std::vector<llvm::StringRef> argv(command.begin(), command.end());
  std::optional<llvm::StringRef> redirects[] = {
      llvm::StringRef(""), llvm::StringRef(out), llvm::StringRef(out)};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*path, argv, std::nullopt, redirects,
                                     /*SecondsToWait=*/60, 0, &message);
  auto buffer = llvm::MemoryBuffer::getFile(out);
  llvm::sys::fs::remove(out);
  std::string text = buffer ? (*buffer)->getBuffer().str() : std::string();
  if (rc != 0)
    return llvm::createStringError(
        why + " ('" + shellJoin(command) + "'), and that failed" +
        (message.empty() ? "" : ": " + message) +
        (text.empty() ? "" : ":\n" + llvm::StringRef(text).trim().str()));
  return text;
}

/// The plan dsc-run compiles from `runArgs` (dsc-run ... --print-config):
/// what --elastic shrinks. dsc-run must compile it (a GPT-NeoX config, or
/// a graph-level module with --compile): a plan file fixes its world.
static llvm::Expected<ElasticPlan>
resolvedPlan(llvm::ArrayRef<std::string> runArgs, const PlanMesh &mesh) {
  if (!mesh.known)
    return llvm::createStringError(
        "--elastic compiles a smaller plan when a rank is lost, so dsc-run "
        "must compile MODEL (a GPT-NeoX config, or a graph-level .mlir with "
        "--compile \"dp=N ...\"): " +
        mesh.note);
  auto text = printConfig(runArgs, "--elastic reads the plan dsc-run compiles");
  if (!text)
    return text.takeError();
  return parsePrintConfig(*text);
}

/// The run's total steps as dsc-run resolves them, and where they come
/// from: the command line's --steps, which dsc-run puts before a config
/// file's, else the --steps row of dsc-run --print-config (a config's
/// train_iters, or dsc-run's default; a plan file has no --print-config).
static llvm::Expected<std::pair<int64_t, std::string>>
runSteps(llvm::ArrayRef<std::string> runArgs) {
  int64_t steps = 0;
  if (std::optional<std::string> flag = runFlag(runArgs, "--steps")) {
    if (llvm::StringRef(*flag).getAsInteger(10, steps))
      return llvm::createStringError("dsc-run's --steps '" + *flag +
                                     "' is not a count");
    return std::make_pair(steps, std::string("the command line"));
  }
  auto text = printConfig(runArgs, "dsc-launch reads the run's --steps from "
                                   "dsc-run's configuration");
  if (!text)
    return text.takeError();
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(*text).split(lines, '\n');
  for (llvm::StringRef line : lines) {
    // "  --steps                1000               GPT-NeoX config: ..."
    auto [key, rest] = line.trim().split(' ');
    if (!line.starts_with("  ") || key != "--steps")
      continue;
    auto [value, source] = rest.trim().split(' ');
    if (value.getAsInteger(10, steps))
      break;
    source = source.trim();
    return std::make_pair(
        steps, (source == "default" ? "dsc-run's default" : source.str()) +
                   ", as dsc-run --print-config reports");
  }
  return llvm::createStringError(
      "dsc-run --print-config did not report '--steps' as a count");
}

/// The child launchers (one, or one ssh per host), forwarded the signals
/// that would otherwise leave their ranks running when only dsc-launch is
/// told to stop.
static constexpr int kMaxChildren = 4096;
static volatile sig_atomic_t childPids[kMaxChildren];
static volatile sig_atomic_t numChildren = 0;
static void forwardSignal(int sig) {
  for (int i = 0; i < numChildren; ++i)
    if (childPids[i] > 0)
      kill(pid_t(childPids[i]), sig);
}

/// Runs every command (argv[0] found on PATH) at once and waits for all;
/// returns the largest exit status (128 + the signal for one a signal
/// ended, as a shell reports it), as `pdsh -S` does; 0 when all succeed.
static int runAllAndWait(const std::vector<std::vector<std::string>> &argvs) {
  if (argvs.size() > size_t(kMaxChildren))
    return error("cannot start " + llvm::Twine(argvs.size()) +
                 " launchers at once (at most " + llvm::Twine(kMaxChildren) +
                 ")");
  std::vector<std::string> paths;
  for (const auto &argv : argvs) {
    auto path = llvm::sys::findProgramByName(argv[0]);
    if (!path)
      return error(
          "'" + argv[0] + "' is not on PATH" +
          (argv[0] == "mpirun" ? " (install Open MPI: openmpi-bin)" : ""));
    paths.push_back(*path);
  }
  llvm::outs().flush();
  llvm::errs().flush();
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    signal(sig, forwardSignal);
  int rc = 0;
  auto record = [&](int status) {
    int code =
        WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    rc = std::max(rc, code);
  };
  size_t running = 0;
  for (size_t i = 0; i < argvs.size(); ++i) {
    std::vector<char *> cargv;
    for (const std::string &arg : argvs[i])
      cargv.push_back(const_cast<char *>(arg.c_str()));
    cargv.push_back(nullptr);
    pid_t pid = fork();
    if (pid < 0) {
      // The ones started go on; their ranks name the missing ones.
      rc = error("cannot start '" + paths[i] +
                 "': " + llvm::sys::StrError(errno));
      break;
    }
    if (pid == 0) {
      execv(paths[i].c_str(), cargv.data());
      llvm::errs() << "dsc-launch: error: cannot run '" << paths[i]
                   << "': " << llvm::sys::StrError(errno) << "\n";
      _exit(127);
    }
    childPids[numChildren] = pid;
    numChildren = numChildren + 1;
    ++running;
  }
  for (; running > 0; --running) {
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, 0)) < 0)
      if (errno != EINTR)
        return error("waiting for the launchers: " +
                     llvm::sys::StrError(errno));
    for (int i = 0; i < numChildren; ++i)
      if (childPids[i] == pid)
        childPids[i] = 0;
    record(status);
  }
  numChildren = 0;
  return rc;
}

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(launchCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "dsc-launch: start dsc-run ranks across hosts, as DeepSpeed's "
      "launcher does\n\n"
      "  dsc-launch [--hostfile F] [--include SPEC | --exclude SPEC]\n"
      "             [--num_nodes N] [--num_gpus N] [--launcher "
      "openmpi|slurm|ssh]\n"
      "             [--dry-run] [--master_addr A] [--master_port P]\n"
      "             [--max-restarts N [--elastic MIN:MAX]] -- "
      "dsc-run <args...>\n");

  if (program.empty())
    return error("no command to launch: dsc-launch [options] -- dsc-run "
                 "MODEL [dsc-run options]");
  if (maxRestarts < 0)
    return error("--max-restarts must be 0 or more, got " +
                 llvm::Twine(int(maxRestarts)));
  if (masterPort < 1 || masterPort > 65535)
    return error("--master_port must be 1-65535, got " +
                 llvm::Twine(int(masterPort)));

  // The allocation: the hostfile's hosts, or this machine alone.
  Allocation hosts;
  if (!hostfile.empty()) {
    auto read = readHostfile(hostfile);
    if (!read)
      return error(read.takeError());
    hosts = std::move(*read);
  } else {
    if (numNodes > 1)
      return error("--num_nodes " + llvm::Twine(int(numNodes)) +
                   " needs a hostfile (--hostfile) that lists the hosts");
    Host local;
    local.name = "localhost";
    local.declaredSlots = numGpus > 0 ? int(numGpus) : 1;
    for (int s = 0; s < local.declaredSlots; ++s)
      local.slots.push_back(s);
    hosts.push_back(std::move(local));
  }
  Selection sel;
  sel.include = include;
  sel.exclude = exclude;
  sel.numNodes = numNodes;
  sel.numGpus = numGpus;
  auto selected = selectResources(hosts, sel);
  if (!selected)
    return error(selected.takeError());

  LaunchOptions options;
  options.runArgs.push_back(program);
  options.runArgs.insert(options.runArgs.end(), programArgs.begin(),
                         programArgs.end());
  options.masterAddr = !masterAddr.empty() ? std::string(masterAddr)
                       : hostfile.empty()  ? std::string("127.0.0.1")
                                           : selected->front().name;
  options.masterPort = masterPort;
  llvm::BumpPtrAllocator alloc;
  llvm::StringSaver saver(alloc);
  llvm::SmallVector<const char *> words;
  cl::TokenizeGNUCommandLine(launcherArgs, saver, words);
  for (const char *word : words)
    options.launcherArgs.push_back(word);

  // A restart resumes from dsc-run's checkpoints: without --save it would
  // only repeat the steps already lost.
  std::optional<std::string> saveDir = runFlag(options.runArgs, "--save");
  if (maxRestarts > 0 && (!saveDir || saveDir->empty()))
    return error("--max-restarts " + llvm::Twine(int(maxRestarts)) +
                 " needs dsc-run's --save DIR (and --save-interval K) to "
                 "resume from; without checkpoints a restart repeats the "
                 "lost steps from the start");
  if (maxRestarts > 0) {
    options.restartCount = 0;
    llvm::SmallString<256> deadRank(*saveDir);
    llvm::sys::path::append(deadRank, ".dsc-launch-dead-rank");
    options.deadRankFile = std::string(deadRank);
  }
  if (!elastic.empty() && maxRestarts < 1)
    return error("--elastic " + elastic +
                 " continues on fewer ranks when the job restarts: give "
                 "--max-restarts N (N >= 1) too");

  // The plan against the slots, before anything starts.
  auto mesh = readPlanMesh(options.runArgs);
  if (!mesh)
    return error(mesh.takeError());
  llvm::raw_ostream &os = llvm::outs();
  if (!mesh->note.empty())
    os << "dsc-launch: note: " << mesh->note << "\n";
  if (!mesh->sources.empty())
    os << "dsc-launch: note: " << mesh->sources << "\n";
  os.flush();
  if (llvm::Error err = checkPlan(*mesh, *selected))
    return error(std::move(err));
  std::vector<RankPlace> ranks = placeRanks(*mesh, *selected);
  printRankTable(os, *mesh, *selected, ranks);

  std::optional<ElasticRange> range;
  ElasticPlan elasticPlan;
  // The worlds a restart may take, largest first: the plan's own, then the
  // smaller ones dsc-run accepts.
  std::vector<int64_t> elasticWorlds;
  if (!elastic.empty()) {
    auto parsed = parseElastic(elastic, worldSize(*selected));
    if (!parsed)
      return error(parsed.takeError());
    range = *parsed;
    auto plan = resolvedPlan(options.runArgs, *mesh);
    if (!plan)
      return error(plan.takeError());
    elasticPlan = *plan;
    if (elasticPlan.world() != worldSize(*selected))
      return error("--elastic " + elastic + ": dsc-run resolves the plan " +
                   elasticPlan.describe() + " (" +
                   llvm::Twine(elasticPlan.world()) + " ranks) for " +
                   llvm::Twine(worldSize(*selected)) + " slots");
    std::vector<int64_t> worlds = shrinkableWorlds(elasticPlan);
    std::string smaller;
    for (int64_t w : worlds)
      if (w < range->max)
        smaller += (smaller.empty()      ? ""
                    : w == worlds.back() ? " or "
                                         : ", ") +
                   std::to_string(w);
    if (llvm::none_of(worlds, [&](int64_t w) {
          return w >= range->min && w < range->max;
        }))
      return error("--elastic " + elastic + ": the plan (" +
                   elasticPlan.describe() + ")" +
                   (smaller.empty() ? " cannot run on fewer than its " +
                                          std::to_string(range->max) + " ranks"
                                    : " shrinks only to " + smaller +
                                          " ranks, none of them at least MIN " +
                                          std::to_string(range->min)) +
                   " (only dp shrinks, to a divisor of dp*microbatches = " +
                   llvm::Twine(elasticPlan.dp * elasticPlan.microBatches) +
                   " that ep divides; tp and pp are compiled into each rank's "
                   "program and stay)");
    // Each smaller plan through dsc-run's own checks before anything
    // starts: a config that pins what dp' changes (a ds_config's
    // gradient_accumulation_steps against its train_batch_size) is found
    // here, not at the restart.
    elasticWorlds.push_back(elasticPlan.world());
    std::string refused;
    for (int64_t w : worlds) {
      if (w < range->min || w >= range->max)
        continue;
      const ElasticPlan smaller = shrinkPlan(elasticPlan, w);
      auto args = shrinkRunArgs(options.runArgs, smaller);
      if (!args)
        return error(args.takeError());
      auto resolved = resolvedPlan(*args, *mesh);
      if (!resolved) {
        refused += "\n  on " + std::to_string(w) + " ranks (" +
                   smaller.describe() +
                   "): " + llvm::toString(resolved.takeError());
        continue;
      }
      elasticWorlds.push_back(w);
    }
    if (elasticWorlds.size() == 1)
      return error("--elastic " + elastic +
                   ": dsc-run refuses every smaller plan:" + refused);
    os << "dsc-launch: --elastic " << range->min << ":" << range->max
       << ": the plan " << elasticPlan.describe() << "; after a lost rank it "
       << "continues on the largest of ";
    for (size_t i = 1; i < elasticWorlds.size(); ++i)
      os << (i == 1 ? "" : ", ") << elasticWorlds[i];
    os << " ranks the surviving slots hold\n";
    if (!refused.empty())
      os << "dsc-launch: note: --elastic: dsc-run refuses" << refused << "\n";
  }

  noteSlotNumbering(os, *selected);

  llvm::SmallString<128> generatedHostfile;
  std::string hostfileText;
  auto buildCommands = [&](const LaunchOptions &options,
                           const Allocation &selected)
      -> llvm::Expected<std::vector<std::vector<std::string>>> {
    std::vector<std::vector<std::string>> commands;
    switch (launcher) {
    case LauncherKind::OpenMpi: {
      // One hostfile for every attempt on the same slots: the ranks stay
      // where they were; an elastic restart rewrites it for its slots.
      if (openMpiHostfile(selected) != hostfileText) {
        hostfileText = openMpiHostfile(selected);
        int fd = -1;
        std::error_code ec =
            generatedHostfile.empty()
                ? llvm::sys::fs::createTemporaryFile(
                      "dsc-launch-hostfile", "txt", fd, generatedHostfile)
                : llvm::sys::fs::openFileForWrite(generatedHostfile, fd);
        if (ec)
          return llvm::createStringError(
              "cannot create the Open MPI hostfile: " + ec.message());
        {
          llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
          out << hostfileText;
        }
        os << "dsc-launch: Open MPI hostfile " << generatedHostfile << ":\n";
        for (const Host &host : selected)
          os << "  " << host.name << " slots=" << host.slots.size() << "\n";
      }
      commands.push_back(openMpiCommand(selected, options, generatedHostfile));
      break;
    }
    case LauncherKind::Slurm: {
      auto cmd = slurmCommand(selected, options);
      if (!cmd)
        return cmd.takeError();
      commands.push_back(std::move(*cmd));
      break;
    }
    case LauncherKind::Ssh: {
      llvm::SmallString<256> cwd;
      if (llvm::sys::fs::current_path(cwd))
        cwd = ".";
      commands = sshCommands(selected, options, cwd);
      break;
    }
    }
    return commands;
  };

  auto commands = buildCommands(options, *selected);
  if (!commands)
    return error(commands.takeError());
  os << (dryRun ? "dsc-launch: --dry-run, would run:\n"
                : "dsc-launch: running:\n");
  for (const auto &cmd : *commands)
    os << shellJoin(cmd) << "\n";
  if (dryRun) {
    if (!generatedHostfile.empty())
      os << "dsc-launch: the hostfile stays for the command above\n";
    return 0;
  }
  if (!options.deadRankFile.empty())
    llvm::sys::fs::remove(options.deadRankFile);
  int rc = runAllAndWait(*commands);
  // A job that failed after its final save (a rank killed while the others
  // shut down) has nothing left to train: dsc-run refuses to resume from a
  // step at --steps, and torchrun's restart would end at once. The run's
  // --steps is looked up once, at the first failure that needs it.
  const bool evalOnly = llvm::is_contained(options.runArgs, "--eval-only");
  std::optional<std::pair<int64_t, std::string>> totalSteps;
  bool stepsLooked = false;
  auto trainingComplete = [&]() {
    std::optional<std::string> step = latestCheckpoint(*saveDir);
    std::optional<int64_t> done =
        step ? checkpointIteration(*saveDir, *step) : std::nullopt;
    if (!done || evalOnly)
      return false;
    if (!stepsLooked) {
      stepsLooked = true;
      auto steps = runSteps(options.runArgs);
      if (steps)
        totalSteps = std::move(*steps);
      else
        os << "dsc-launch: note: the run's --steps is unknown (give it on "
              "dsc-run's command line), so dsc-launch cannot tell whether "
              "checkpoint "
           << *step << " is the last: " << llvm::toString(steps.takeError())
           << "\n";
    }
    if (!totalSteps || *done < totalSteps->first)
      return false;
    os << "dsc-launch: the job failed (exit " << rc
       << ") after its last checkpoint " << *step << " reached the final step "
       << totalSteps->first << " (dsc-run's --steps, from "
       << totalSteps->second << "): training is complete, not restarting\n";
    return true;
  };
  // torchrun's --max-restarts: the same ranks again, from the newest
  // checkpoint the failed attempt completed; with --elastic, the slots
  // that survived, as many as a smaller dp can use.
  Allocation used = *selected, alive = *selected;
  std::vector<std::string> runArgs = options.runArgs;
  for (int restart = 1; rc != 0 && maxRestarts > 0; ++restart) {
    std::optional<int> dead = readDeadRank(options.deadRankFile, used);
    if (dead)
      os << "dsc-launch: world rank " << *dead << " (" << rankSlot(used, *dead)
         << ") died, as its surviving peers report\n";
    if (trainingComplete()) {
      rc = 0;
      break;
    }
    if (restart > maxRestarts)
      break;
    std::optional<Shrunk> shrunk;
    if (range) {
      if (dead)
        alive = dropRankSlot(alive, used, *dead);
      else
        os << "dsc-launch: no rank was reported dead (the job failed as a "
              "whole, or on a host without a surviving rank): the same "
              "slots again\n";
      auto next = shrinkTo(elasticPlan, alive, *range, elasticWorlds);
      if (!next) {
        rc = std::max(rc, error(next.takeError()));
        break;
      }
      auto args = shrinkRunArgs(options.runArgs, next->plan);
      if (!args) {
        rc = std::max(rc, error(args.takeError()));
        break;
      }
      // The original arguments as long as the plan is the original one.
      runArgs = next->plan.dp == elasticPlan.dp ? options.runArgs : *args;
      used = next->hosts;
      // Rank 0 (the TCP store's server) is on the first host still used.
      if (masterAddr.empty() && !hostfile.empty())
        options.masterAddr = used.front().name;
      shrunk = std::move(*next);
    }
    LaunchOptions retry = options;
    retry.restartCount = restart;
    std::optional<std::string> step = latestCheckpoint(*saveDir);
    retry.runArgs = runArgs;
    if (step) {
      llvm::SmallString<256> stepDir(*saveDir);
      llvm::sys::path::append(stepDir, *step);
      retry.runArgs = resumeArgs(runArgs, stepDir);
    }
    os << "dsc-launch: the job failed (exit " << rc << "); restart " << restart
       << " of " << maxRestarts << " "
       << (step ? "from checkpoint " + *step : std::string("from the start"));
    if (shrunk)
      os << " on " << worldSize(used) << " ranks (--elastic " << elastic << ")";
    os << "\n";
    if (shrunk) {
      const ElasticPlan &p = shrunk->plan;
      os << "dsc-launch: --elastic: " << worldSize(alive) << " slot"
         << (worldSize(alive) == 1 ? "" : "s") << " left, " << worldSize(used)
         << " used: dp=" << elasticPlan.dp << " -> dp=" << p.dp
         << " (tp=" << p.tp << " pp=" << p.pp << " kept), "
         << elasticPlan.microBatches << " -> " << p.microBatches
         << " micro-batches per data-parallel rank (the global batch stays "
         << p.dp * p.microBatches << " micro-batches); dsc-run compiles "
         << "the new plan and "
         << (step ? "reshards checkpoint " + *step + " into it"
                  : std::string("starts from the beginning"))
         << "\n";
      PlanMesh smaller = *mesh;
      smaller.dp = p.dp;
      smaller.np.reset();
      smaller.text = p.describe().substr(0, p.describe().find(','));
      printRankTable(os, smaller, used, placeRanks(smaller, used));
      noteSlotNumbering(os, used);
    }
    llvm::sys::fs::remove(options.deadRankFile);
    auto again = buildCommands(retry, used);
    if (!again) {
      rc = error(again.takeError());
      break;
    }
    os << "dsc-launch: running:\n";
    for (const auto &cmd : *again)
      os << shellJoin(cmd) << "\n";
    rc = runAllAndWait(*again);
  }
  if (rc != 0 && maxRestarts > 0)
    os << "dsc-launch: the job failed (exit " << rc << ") after " << maxRestarts
       << " restart" << (maxRestarts == 1 ? "" : "s") << "\n";
  if (!generatedHostfile.empty())
    llvm::sys::fs::remove(generatedHostfile);
  if (!options.deadRankFile.empty())
    llvm::sys::fs::remove(options.deadRankFile);
  return rc;
}
