//===- BenchSearch.cpp - Plan search benchmark ----------------------------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// Times searchPlans over a grid of GPT sizes and cluster sizes on one core
// and prints a Markdown table; optionally writes the full report of one
// search (--report) so the plot can be looked at.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/PlanReport.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <vector>

using namespace mlir::dsc::analysis;
namespace cl = llvm::cl;

static cl::opt<std::string>
    clusterFile("cluster", cl::desc("Cluster description (JSON)"),
                cl::init(DSC_CLUSTERS_DIR "/dgx-a100-80gb.json"));
static cl::opt<unsigned> repeats("repeat",
                                 cl::desc("Runs per cell; the median counts"),
                                 cl::init(5));
static cl::opt<std::string>
    onlyModel("model", cl::desc("Only this model (1.3B, 13B, 175B, 530B, 1T)"),
              cl::init(""));
static cl::opt<int64_t> onlyGpus("gpus", cl::desc("Only this many GPUs"),
                                 cl::init(0));
static cl::opt<int64_t>
    batchOpt("global-batch",
             cl::desc("Global batch (default: max(1536, gpus))"), cl::init(0));
static cl::opt<std::string>
    reportPath("report",
               cl::desc("Write the report of the last search to this .md "
                        "(plus .json and .svg)"),
               cl::init(""));

int main(int argc, char **argv) {
  cl::ParseCommandLineOptions(argc, argv,
                              "dsc plan-search benchmark: search time against "
                              "model and cluster size\n");
  llvm::Expected<ClusterSpec> cluster = loadClusterSpec(clusterFile);
  if (!cluster) {
    llvm::errs() << "dsc-bench-search: " << llvm::toString(cluster.takeError())
                 << "\n";
    return 1;
  }
  // Megatron-LM / MT-NLG shapes, sequence 2048, vocabulary 51200.
  std::vector<ModelShape> models = {
      ModelShape::gpt("1.3B", 24, 2048, 16, 2048, 51200),
      ModelShape::gpt("13B", 40, 5120, 40, 2048, 51200),
      ModelShape::gpt3_175B(),
      ModelShape::gpt("530B", 105, 20480, 128, 2048, 51200),
      ModelShape::gpt("1T", 128, 25600, 160, 2048, 51200),
  };
  models[2].name = "175B";
  std::vector<int64_t> gpuCounts = {8, 64, 256, 1024, 3072, 8192, 32768};

  llvm::outs() << llvm::formatv("Cluster: {0}\nOne thread; median of {1} "
                                "runs per cell.\n\n",
                                cluster->name, repeats.getValue());
  llvm::outs() << "| model | params | GPUs | global batch | plans | feasible "
                  "| search ms | plans/s | winner | MFU |\n"
                  "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|\n";
  std::unique_ptr<CostModel> lastModel;
  std::optional<SearchResult> lastResult;
  SearchOptions lastOptions;
  for (const ModelShape &m : models) {
    if (!onlyModel.empty() && m.name != onlyModel)
      continue;
    for (int64_t gpus : gpuCounts) {
      if (onlyGpus > 0 && gpus != onlyGpus)
        continue;
      auto cm = std::make_unique<CostModel>(m, *cluster);
      SearchOptions o;
      o.numGpus = gpus;
      o.globalBatch =
          batchOpt > 0 ? batchOpt.getValue() : std::max<int64_t>(1536, gpus);
      std::vector<double> times;
      llvm::Expected<SearchResult> r = searchPlans(*cm, o);
      for (unsigned i = 0; i < std::max(1u, repeats.getValue()); ++i) {
        auto start = std::chrono::steady_clock::now();
        llvm::Expected<SearchResult> again = searchPlans(*cm, o);
        times.push_back(std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - start)
                            .count());
        if (!again)
          llvm::consumeError(again.takeError());
      }
      std::sort(times.begin(), times.end());
      double median = times[times.size() / 2];
      if (!r) {
        llvm::consumeError(r.takeError());
        llvm::outs() << llvm::formatv(
            "| {0} | {1:F1}B | {2} | {3} | - | 0 | {4:F2} | - | nothing fits "
            "| - |\n",
            m.name, m.parameters / 1e9, gpus, o.globalBatch, median * 1e3);
        continue;
      }
      const PlanEstimate &w = r->top.front();
      llvm::outs() << llvm::formatv(
          "| {0} | {1:F1}B | {2} | {3} | {4} | {5} | {6:F2} | {7:F0} | `{8}` "
          "| {9:F1}% |\n",
          m.name, m.parameters / 1e9, gpus, o.globalBatch, r->numEnumerated,
          r->numFeasible, median * 1e3, r->numEnumerated / median, w.plan.str(),
          100.0 * w.mfu);
      lastModel = std::move(cm);
      lastResult = std::move(*r);
      lastOptions = o;
    }
  }
  if (!reportPath.empty() && lastResult) {
    ReportContext ctx;
    ctx.model = lastModel.get();
    ctx.options = lastOptions;
    ctx.clusterSource = clusterFile;
    if (llvm::Error err = writeReport(*lastResult, ctx, reportPath)) {
      llvm::errs() << "dsc-bench-search: " << llvm::toString(std::move(err))
                   << "\n";
      return 1;
    }
    llvm::outs() << "\nReport written to " << reportPath << "\n";
  }
  return 0;
}
