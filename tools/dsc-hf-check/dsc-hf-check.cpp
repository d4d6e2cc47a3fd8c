//===- dsc-hf-check.cpp - compare an imported model with transformers -----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The oracle of the model-family tests: compiles an imported loss graph
// (dsc-translate --import-hf) with the real pipeline, loads the weights the
// import wrote, runs the training program on the golden tokens and targets,
// and compares the loss, the logits and every parameter's gradient with what
// transformers + torch computed for the same model
// (scripts/hf-reference/make-goldens.py wrote golden.safetensors).
//
// With --compile "tp=2" (or pp=2, any mesh) the plan is parallel: it trains
// one step on thread ranks, each with its own executor, and the loss (from
// the rank that computes it) and the logits (captured as each rank's
// cross-entropy reads them, its vocabulary columns under tensor slicing,
// joined in tp order) are compared with the same goldens. The gradients,
// sharded across ranks there, are the one-rank check's.
//
//===----------------------------------------------------------------------===//

#include "CompileForCheck.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/ThreadCommunicator.h"
#include "dsc/Runtime/WeightsCheckpoint.h"
#include "dsc/Target/HFModel.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

namespace cl = llvm::cl;
using namespace mlir;

static cl::opt<std::string> inputFile(cl::Positional, cl::Required,
                                      cl::desc("<imported loss graph .mlir>"));
static cl::opt<std::string> checkpoint("load", cl::Required,
                                       cl::desc("The import's checkpoint"));
static cl::opt<std::string>
    golden("golden", cl::Required,
           cl::desc("golden.safetensors (make-goldens.py)"));
static cl::opt<std::string>
    hfConfig("config", cl::Required,
             cl::desc("The model's config.json (its family and shapes: how "
                      "transformers' gradients map onto dsc's parameters)"));
static cl::opt<std::string> compileOptions(
    "compile", cl::init(""),
    cl::desc("--dsc-compile options of the plan to check (\"tp=2\", "
             "\"pp=2\"); a mesh runs on that many thread ranks and checks "
             "the loss and the logits"));
static cl::opt<double>
    lossTolerance("loss-rtol", cl::init(1e-5),
                  cl::desc("Relative tolerance of the loss"));
static cl::opt<double> logitsTolerance(
    "logits-rtol", cl::init(1e-5),
    cl::desc("Largest max|logits - ref| / max|ref| (the forward program's "
             "logits against golden 'logits')"));
static cl::opt<double> gradTolerance(
    "grad-tol", cl::init(1e-4),
    cl::desc("Largest max|g - ref| / max|ref| of a parameter's gradient"));
static cl::opt<std::string>
    perturb("perturb", cl::init(""),
            cl::desc("Scale this parameter's gradient by 1.01 before "
                     "comparing (proves the check can fail)"));

namespace {

using ::dsc::rt::DType;
using ::dsc::rt::WholeTensor;

std::vector<double> asDoubles(const WholeTensor &t) {
  const size_t n = t.bytes.size() / ::dsc::rt::dtypeSize(t.dtype);
  std::vector<double> out(n);
  ::dsc::rt::convertFloats(t.bytes.data(), t.dtype, out.data(), DType::F64, n);
  return out;
}

/// Counts the comparisons and prints each.
struct Tally {
  int passed = 0, failed = 0;
  void count(bool ok) { (ok ? passed : failed) += 1; }
  int finish() const {
    llvm::outs() << "hf-check: " << passed << " passed, " << failed
                 << " failed\n";
    return failed ? 1 : 0;
  }
};

void checkLoss(double loss, const WholeTensor &golden, Tally &tally) {
  const double refLoss = asDoubles(golden).at(0);
  const double error = std::abs(loss - refLoss) / std::abs(refLoss);
  const bool ok = error <= lossTolerance;
  llvm::outs() << llvm::formatv(
      "loss {0:e9} transformers {1:e9} rel error {2:e2} {3}\n", loss, refLoss,
      error, ok ? "ok" : "FAIL");
  tally.count(ok);
}

void checkLogits(std::vector<double> logits, const WholeTensor &golden,
                 Tally &tally) {
  std::vector<double> r = asDoubles(golden);
  // A padded vocabulary's logits have more columns per row: its padded
  // columns are no classes; compare the vocabulary's.
  const size_t width = golden.shape.empty() ? 0 : size_t(golden.shape.back());
  if (width && logits.size() > r.size() && r.size() % width == 0 &&
      logits.size() % (r.size() / width) == 0) {
    const size_t rows = r.size() / width, padded = logits.size() / rows;
    std::vector<double> kept;
    kept.reserve(r.size());
    for (size_t row = 0; row < rows; ++row)
      kept.insert(kept.end(), logits.begin() + std::ptrdiff_t(row * padded),
                  logits.begin() + std::ptrdiff_t(row * padded + width));
    logits = std::move(kept);
  }
  if (logits.size() != r.size())
    throw ::dsc::rt::Error(
        "dsc's logits have " + std::to_string(logits.size()) +
        " elements, transformers' " + std::to_string(r.size()));
  double diff = 0, scale = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    diff = std::max(diff, std::abs(logits[i] - r[i]));
    scale = std::max(scale, std::abs(r[i]));
  }
  const double rel = diff / std::max(scale, 1e-30);
  const bool ok = rel <= logitsTolerance;
  llvm::outs() << llvm::formatv("logits max|ref| {0:e3} rel error {1:e2} "
                                "{2}\n",
                                scale, rel, ok ? "ok" : "FAIL");
  tally.count(ok);
}

bool isCrossEntropy(::dsc::rt::Opcode opcode) {
  return opcode == ::dsc::rt::Opcode::CrossEntropy ||
         opcode == ::dsc::rt::Opcode::VocabParallelCrossEntropy;
}

/// The parallel plan's loss and logits: one training step on thread ranks,
/// each feeding the golden micro-batch.
int checkParallel(const ::dsc::rt::Plan &plan,
                  std::map<std::string, const WholeTensor *> &ref,
                  const std::vector<int32_t> &ids,
                  const std::vector<int32_t> &next) {
  int64_t ranks = 1;
  for (const ::dsc::rt::Plan::MeshAxis &axis : plan.mesh)
    ranks *= axis.size;
  const int64_t tpAxis = ::dsc::rt::findMeshAxis(plan.mesh, "tp");
  llvm::outs() << "plan: " << ranks << " thread ranks, mesh";
  for (const ::dsc::rt::Plan::MeshAxis &axis : plan.mesh)
    llvm::outs() << " " << axis.name << "=" << axis.size;
  llvm::outs() << (plan.stages.empty() ? "" : ", pipelined") << "\n";

  // Per rank: its loss (the ranks that compute one), its tp coordinate and
  // the logits its cross-entropy read (data-parallel rank 0 only: the
  // others see the same micro-batch).
  struct RankResult {
    std::optional<double> loss;
    int64_t tp = 0;
    bool vocabParallel = false;
    std::optional<std::vector<double>> logits;
  };
  std::vector<RankResult> results(static_cast<size_t>(ranks));
  std::mutex mutex;
  ::dsc::rt::runRanks(int(ranks), [&](::dsc::rt::Communicator &comm) {
    ::dsc::rt::Executor executor(plan, /*seed=*/1, &comm);
    executor.loadCheckpoint(checkpoint);
    RankResult mine;
    const std::vector<int64_t> &coords = executor.meshCoordinates();
    mine.tp = tpAxis >= 0 ? coords[size_t(tpAxis)] : 0;
    const bool capture =
        ::dsc::rt::dataParallelPlace(plan.mesh, coords).index == 0;
    executor.setInstructionHook([&](const ::dsc::rt::InstructionEvent &e) {
      // The hook runs after the instruction: the cross-entropy has read
      // the logits and nothing has reused their memory yet.
      if (!capture || mine.logits || !isCrossEntropy(e.instruction->opcode))
        return;
      mine.vocabParallel =
          e.instruction->opcode == ::dsc::rt::Opcode::VocabParallelCrossEntropy;
      mine.logits =
          executor.read(executor.plan().buffers[e.instruction->inputs[0]].name);
    });
    ::dsc::rt::StepResult step = executor.trainStep(
        [&](int64_t, int32_t *tokens, int32_t *targets) {
          std::memcpy(tokens, ids.data(), 4 * ids.size());
          std::memcpy(targets, next.data(), 4 * next.size());
        },
        /*microBatches=*/1);
    if (step.hasLoss)
      mine.loss = step.loss;
    std::lock_guard<std::mutex> lock(mutex);
    results[size_t(comm.rank())] = std::move(mine);
  });

  Tally tally;
  const RankResult *lossRank = nullptr;
  for (const RankResult &r : results)
    if (r.loss && !lossRank)
      lossRank = &r;
  if (!lossRank)
    throw ::dsc::rt::Error("no rank of the plan computed a loss");
  checkLoss(*lossRank->loss, *ref["loss_all_positions"], tally);

  if (ref.count("logits")) {
    // The shards of the vocabulary, by tp coordinate; a whole-vocabulary
    // cross-entropy needs only one of them.
    std::map<int64_t, const std::vector<double> *> shards;
    bool vocabParallel = false;
    for (const RankResult &r : results)
      if (r.logits) {
        shards.emplace(r.tp, &*r.logits);
        vocabParallel |= r.vocabParallel;
      }
    if (shards.empty())
      throw ::dsc::rt::Error("no rank of the plan ran a cross-entropy to "
                             "read the logits of");
    if (!vocabParallel)
      shards.erase(std::next(shards.begin()), shards.end());
    const size_t rows = ids.size();
    std::vector<double> logits;
    logits.reserve(rows * shards.size() * shards.begin()->second->size());
    for (size_t row = 0; row < rows; ++row)
      for (const auto &[tp, shard] : shards) {
        const size_t width = shard->size() / rows;
        logits.insert(logits.end(), shard->begin() + row * width,
                      shard->begin() + (row + 1) * width);
      }
    llvm::outs() << "logits: " << (vocabParallel ? "joined from " : "from ")
                 << shards.size() << " rank" << (shards.size() == 1 ? "" : "s")
                 << "\n";
    checkLogits(logits, *ref["logits"], tally);
  }
  return tally.finish();
}

int run() {
  // SGD: gradients only, no optimizer state for the checkpoint to lack.
  std::optional<::dsc::rt::Plan> lowered =
      ::dsc::tools::compileForCheck(inputFile, compileOptions);
  if (!lowered)
    return 1;

  auto configText = llvm::MemoryBuffer::getFile(hfConfig);
  if (!configText)
    throw ::dsc::rt::Error("cannot read '" + hfConfig +
                           "': " + configText.getError().message());
  mlir::MLIRContext context;
  std::optional<mlir::dsc::HFModel> parsed = mlir::dsc::parseHFConfig(
      (*configText)->getBuffer(), hfConfig, mlir::dsc::HFImportOptions(),
      mlir::UnknownLoc::get(&context));
  if (!parsed)
    return 1;
  // A vocabulary padded on import (--import-hf-pad-vocab-to): the token
  // embedding has more rows than transformers' vocab_size, and
  // transformers' gradients get the zero rows dsc's padded rows must have.
  for (const ::dsc::rt::Buffer &b : lowered->buffers) {
    if (b.name != "wte.weight")
      continue;
    const std::vector<int64_t> &whole =
        b.layout.shape.empty() ? b.shape : b.layout.shape;
    if (!whole.empty() && whole[0] > parsed->config.vocabSize) {
      parsed->config.tokenizerVocabSize = parsed->config.vocabSize;
      parsed->config.vocabSize = whole[0];
    }
    break;
  }
  const mlir::dsc::HFModel &model = *parsed;

  std::vector<WholeTensor> tensors;
  std::string error;
  if (!::dsc::rt::readSafetensorsTensors(golden, tensors, error))
    throw ::dsc::rt::Error(error);
  std::map<std::string, const WholeTensor *> ref;
  for (const WholeTensor &t : tensors)
    ref[t.name] = &t;
  for (const char *name : {"tokens", "targets", "loss_all_positions"})
    if (!ref.count(name))
      throw ::dsc::rt::Error("'" + golden + "' has no tensor '" + name + "'");

  const WholeTensor &tokens = *ref["tokens"], &targets = *ref["targets"];
  const size_t count = size_t(lowered->microBatchSize * lowered->seqLength);
  if (tokens.dtype != DType::I32 || targets.dtype != DType::I32 ||
      tokens.bytes.size() != 4 * count || targets.bytes.size() != 4 * count)
    throw ::dsc::rt::Error("the golden tokens and targets must be I32 [" +
                           std::to_string(lowered->microBatchSize) + ", " +
                           std::to_string(lowered->seqLength) +
                           "], the graph's micro-batch");
  std::vector<int32_t> ids(count), next(count);
  std::memcpy(ids.data(), tokens.bytes.data(), 4 * count);
  std::memcpy(next.data(), targets.bytes.data(), 4 * count);
  if (!lowered->mesh.empty())
    return checkParallel(*lowered, ref, ids, next);

  ::dsc::rt::Executor executor(std::move(*lowered), /*seed=*/1);
  const ::dsc::rt::Plan &plan = executor.plan();
  executor.loadCheckpoint(checkpoint);
  executor.setTokens(ids.data(), ids.size());
  executor.setTargets(next.data(), next.size());
  executor.runProgram("forward_backward");

  Tally tally;
  checkLoss(executor.loss(), *ref["loss_all_positions"], tally);

  // The logits: the forward program's cross-entropy input, read right
  // after the program (nothing runs after the loss to reuse its memory).
  if (ref.count("logits")) {
    const ::dsc::rt::Instruction *crossEntropy = nullptr;
    for (const ::dsc::rt::Program &program : plan.programs)
      if (program.name == "forward")
        for (const ::dsc::rt::Instruction &inst : program.instructions)
          if (inst.opcode == ::dsc::rt::Opcode::CrossEntropy)
            crossEntropy = &inst;
    if (!crossEntropy)
      throw ::dsc::rt::Error("the plan's forward program has no "
                             "cross-entropy to read the logits of");
    executor.runProgram("forward");
    checkLogits(executor.read(plan.buffers[crossEntropy->inputs[0]].name),
                *ref["logits"], tally);
  }

  // transformers' gradients in dsc's names and layouts.
  std::vector<WholeTensor> grads;
  mlir::dsc::HFTensorConverter converter(model);
  for (const WholeTensor &golden : tensors) {
    llvm::StringRef name(golden.name);
    if (!name.consume_front("grad."))
      continue;
    WholeTensor t = golden;
    t.name = name.str();
    if (!converter.add(std::move(t), grads, error))
      throw ::dsc::rt::Error("golden gradient: " + error);
  }
  if (!converter.finish(grads, error))
    throw ::dsc::rt::Error("golden gradients: " + error);
  for (const WholeTensor &t : grads) {
    const std::string &ours = t.name;
    std::vector<double> g = executor.read("grad." + ours);
    std::vector<double> r = asDoubles(t);
    if (g.size() != r.size())
      throw ::dsc::rt::Error(
          "gradient of '" + ours + "' has " + std::to_string(g.size()) +
          " elements, transformers' " + std::to_string(r.size()));
    double diff = 0, scale = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const double ours_i = g[i] * (ours == perturb ? 1.01 : 1.0);
      diff = std::max(diff, std::abs(ours_i - r[i]));
      scale = std::max(scale, std::abs(r[i]));
    }
    const double rel = diff / std::max(scale, 1e-30);
    const bool ok = rel <= gradTolerance;
    llvm::outs() << llvm::formatv(
        "{0,-24} max|g| {1:e3}  rel error {2:e2}  {3}\n", ours, scale, rel,
        ok ? "ok" : "FAIL");
    tally.count(ok);
  }
  return tally.finish();
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "dsc: compare an imported model's loss and "
                              "gradients with transformers'\n");
  try {
    return run();
  } catch (const std::exception &e) {
    llvm::errs() << "dsc-hf-check: error: " << e.what() << "\n";
    return 1;
  }
}
