//===- dsc-gradcheck.cpp - finite-difference gradient checks ----*- C++ -*-===//
//
// Compiles a loss graph with the real pipeline (--dsc-compile), runs the
// backward program on the CPU runtime, and compares every parameter's
// gradient with central finite differences of the forward program: an
// oracle independent of the VJP rules it checks. An MoE model's auxiliary
// losses are summed into the loss the programs return, so that the
// differences see what the gradient trains.
//
//===----------------------------------------------------------------------===//

#include "CompileForCheck.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Executor.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <random>

namespace cl = llvm::cl;
using namespace mlir;

static cl::opt<std::string> inputFile(cl::Positional, cl::Required,
                                      cl::desc("<loss graph .mlir>"));
static cl::opt<int> samples("samples", cl::init(12),
                            cl::desc("Elements checked per parameter"));
static cl::opt<double> eps("eps", cl::init(1e-6),
                           cl::desc("Finite-difference step"));
static cl::opt<double> tolerance(
    "tolerance", cl::init(1e-6),
    cl::desc("Largest relative error ||g - fd|| / max(||g||, ||fd||)"));
static cl::opt<uint64_t> seed("seed", cl::init(7),
                              cl::desc("Seed of parameters and data"));
static cl::opt<std::string>
    perturb("perturb", cl::init(""),
            cl::desc("Scale this parameter's analytic gradient by 1.01 "
                     "before comparing (proves the check can fail)"));

namespace {

double norm(const std::vector<double> &v) {
  double sum = 0;
  for (double x : v)
    sum += x * x;
  return std::sqrt(sum);
}

int run() {
  // The loss the backward differentiates: an MoE model's auxiliary
  // losses included.
  std::optional<::dsc::rt::Plan> lowered = ::dsc::tools::compileForCheck(
      inputFile, /*compileOptions=*/"", /*withAuxiliaryLosses=*/true);
  if (!lowered)
    return 1;

  ::dsc::rt::Executor executor(std::move(*lowered), seed);
  const ::dsc::rt::Plan &plan = executor.plan();
  std::mt19937_64 rng(seed);
  size_t tokens = plan.microBatchSize * plan.seqLength;
  std::vector<int32_t> ids(tokens), targets(tokens);
  for (size_t i = 0; i < tokens; ++i) {
    ids[i] = static_cast<int32_t>(rng() % plan.vocabSize);
    targets[i] = static_cast<int32_t>(rng() % plan.vocabSize);
  }
  executor.setTokens(ids.data(), ids.size());
  executor.setTargets(targets.data(), targets.size());
  executor.runProgram("forward_backward");
  double trainLoss = executor.loss();
  auto evalLoss = [&] {
    executor.runProgram("forward");
    return executor.read("eval_loss").at(0);
  };
  double forwardLoss = evalLoss();
  llvm::outs() << llvm::formatv("loss {0:e12} (forward program {1:e12})\n",
                                trainLoss, forwardLoss);
  int passed = 0, failed = 0;
  if (std::abs(trainLoss - forwardLoss) > 1e-12 * std::abs(trainLoss)) {
    llvm::outs() << "FAIL: the training and forward programs disagree\n";
    ++failed;
  }

  for (const ::dsc::rt::Buffer &buffer : plan.buffers) {
    if (buffer.role != ::dsc::rt::BufferRole::Parameter)
      continue;
    if (buffer.dtype != ::dsc::rt::DType::F64) {
      llvm::errs() << "dsc-gradcheck: parameter '" << buffer.name
                   << "' is not f64; finite differences need f64 graphs\n";
      return 1;
    }
    std::vector<double> grad = executor.read("grad." + buffer.name);
    ::dsc::rt::BufferView param = executor.buffer(buffer.name);
    double *values = param.as<double>();
    int64_t size = param.size();
    std::vector<double> analytic, numeric;
    for (int s = 0; s < samples && s < size; ++s) {
      int64_t index = size <= samples ? s : static_cast<int64_t>(rng() % size);
      double saved = values[index];
      values[index] = saved + eps;
      double plus = evalLoss();
      values[index] = saved - eps;
      double minus = evalLoss();
      values[index] = saved;
      numeric.push_back((plus - minus) / (2 * eps));
      analytic.push_back(grad[index] * (buffer.name == perturb ? 1.01 : 1.0));
    }
    std::vector<double> diff(analytic.size());
    for (size_t i = 0; i < diff.size(); ++i)
      diff[i] = analytic[i] - numeric[i];
    double scale = std::max({norm(analytic), norm(numeric), 1e-300});
    double error = norm(diff) / scale;
    // A gradient that is exactly zero everywhere checked must be zero in the
    // finite differences too (to the step's rounding).
    bool ok = norm(analytic) == 0 ? norm(numeric) < 1e-9 : error <= tolerance;
    llvm::outs() << llvm::formatv("{0,-28} |g| {1:e3}  rel error {2:e2}  {3}\n",
                                  buffer.name, norm(analytic), error,
                                  ok ? "ok" : "FAIL");
    (ok ? passed : failed) += 1;
  }
  llvm::outs() << "gradcheck: " << passed << " passed, " << failed
               << " failed\n";
  return failed ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "dsc finite-difference gradient check\n");
  try {
    return run();
  } catch (const std::exception &error) {
    llvm::errs() << "dsc-gradcheck: error: " << error.what() << "\n";
    return 1;
  }
}
