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
//===----------------------------------------------------------------------===//

#include "CompileForCheck.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/FloatConvert.h"
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

int run() {
  // SGD: gradients only, no optimizer state for the checkpoint to lack.
  std::optional<::dsc::rt::Plan> lowered =
      ::dsc::tools::compileForCheck(inputFile);
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

  ::dsc::rt::Executor executor(std::move(*lowered), /*seed=*/1);
  const ::dsc::rt::Plan &plan = executor.plan();
  executor.loadCheckpoint(checkpoint);
  const WholeTensor &tokens = *ref["tokens"], &targets = *ref["targets"];
  const size_t count = size_t(plan.microBatchSize * plan.seqLength);
  if (tokens.dtype != DType::I32 || targets.dtype != DType::I32 ||
      tokens.bytes.size() != 4 * count || targets.bytes.size() != 4 * count)
    throw ::dsc::rt::Error("the golden tokens and targets must be I32 [" +
                           std::to_string(plan.microBatchSize) + ", " +
                           std::to_string(plan.seqLength) +
                           "], the graph's micro-batch");
  std::vector<int32_t> ids(count), next(count);
  std::memcpy(ids.data(), tokens.bytes.data(), 4 * count);
  std::memcpy(next.data(), targets.bytes.data(), 4 * count);
  executor.setTokens(ids.data(), ids.size());
  executor.setTargets(next.data(), next.size());
  executor.runProgram("forward_backward");

  int passed = 0, failedCount = 0;
  const double loss = executor.loss();
  const double refLoss = asDoubles(*ref["loss_all_positions"]).at(0);
  const double lossError = std::abs(loss - refLoss) / std::abs(refLoss);
  const bool lossOk = lossError <= lossTolerance;
  llvm::outs() << llvm::formatv(
      "loss {0:e9} transformers {1:e9} rel error {2:e2} {3}\n", loss, refLoss,
      lossError, lossOk ? "ok" : "FAIL");
  (lossOk ? passed : failedCount) += 1;

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
    std::vector<double> logits =
        executor.read(plan.buffers[crossEntropy->inputs[0]].name);
    std::vector<double> r = asDoubles(*ref["logits"]);
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
    (ok ? passed : failedCount) += 1;
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
    const std::string *ours = &t.name;
    std::vector<double> g = executor.read("grad." + *ours);
    std::vector<double> r = asDoubles(t);
    if (g.size() != r.size())
      throw ::dsc::rt::Error(
          "gradient of '" + *ours + "' has " + std::to_string(g.size()) +
          " elements, transformers' " + std::to_string(r.size()));
    double diff = 0, scale = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const double ours_i = g[i] * (*ours == perturb ? 1.01 : 1.0);
      diff = std::max(diff, std::abs(ours_i - r[i]));
      scale = std::max(scale, std::abs(r[i]));
    }
    const double rel = diff / std::max(scale, 1e-30);
    const bool ok = rel <= gradTolerance;
    llvm::outs() << llvm::formatv(
        "{0,-24} max|g| {1:e3}  rel error {2:e2}  {3}\n", *ours, scale, rel,
        ok ? "ok" : "FAIL");
    (ok ? passed : failedCount) += 1;
  }
  llvm::outs() << "hf-check: " << passed << " passed, " << failedCount
               << " failed\n";
  return failedCount ? 1 : 0;
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
