//===- PlanReport.cpp - Markdown, JSON and SVG plan reports ---------------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// The SVG is written by hand (no plotting dependency) and kept readable in a
// browser and in rsvg: plain shapes, text with explicit anchors, no scripts.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/PlanReport.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace mlir::dsc::analysis;
namespace json = llvm::json;

static double toGB(double bytes) { return bytes / 1e9; }

static std::string yesNo(bool b) { return b ? "yes" : "no"; }

static std::string title(const ReportContext &ctx) {
  const ModelShape &m = ctx.model->model();
  const ClusterSpec &c = ctx.model->cluster();
  return llvm::formatv("{0} on {1} x {2}, global batch {3}", m.name,
                       ctx.options.numGpus, c.gpu.kind,
                       ctx.options.globalBatch);
}

json::Value mlir::dsc::analysis::estimateToJSON(const PlanEstimate &e) {
  const ParallelPlan &p = e.plan;
  const StepTimeBreakdown &t = e.time;
  const MemoryBreakdown &m = e.memory;
  return json::Object{
      {"plan", json::Object{{"dp", p.dp},
                            {"tp", p.tp},
                            {"pp", p.pp},
                            {"zero", p.zeroStage},
                            {"micro_batch_size", p.microBatchSize},
                            {"microbatches", p.numMicroBatches},
                            {"schedule", scheduleName(p.schedule)},
                            {"recompute", p.recompute},
                            {"sequence_parallel", p.sequenceParallel},
                            {"offload", p.offloadOptimizer}}},
      {"summary", p.str()},
      {"step_seconds", t.total},
      {"tflops_per_gpu", e.flopsPerGpu / 1e12},
      {"model_tflops_per_gpu", e.modelFlopsPerGpu / 1e12},
      {"mfu", e.mfu},
      {"bubble_fraction", e.bubbleFraction},
      {"time_seconds", json::Object{{"compute", t.compute},
                                    {"recompute", t.recompute},
                                    {"tp_comm", t.tpComm},
                                    {"pp_comm", t.ppComm},
                                    {"zero_comm_exposed", t.zeroComm},
                                    {"bubble", t.bubble},
                                    {"dp_comm_exposed", t.dpComm},
                                    {"optimizer", t.optimizer},
                                    {"offload", t.offload}}},
      {"memory_bytes", json::Object{{"params", m.states.params},
                                    {"grads", m.states.grads},
                                    {"optimizer_states", m.states.optimizer},
                                    {"activations", m.activations},
                                    {"temporaries", m.temporaries},
                                    {"reserved", m.reserved},
                                    {"device", m.device},
                                    {"host", m.host},
                                    {"nvme", m.nvme}}},
      {"comm_bytes_per_gpu", json::Object{{"tp", e.comm.tp},
                                          {"dp", e.comm.dp},
                                          {"pp", e.comm.pp},
                                          {"total", e.comm.total()}}},
  };
}

json::Value mlir::dsc::analysis::renderJSON(const SearchResult &r,
                                            const ReportContext &ctx) {
  const ModelShape &m = ctx.model->model();
  const ClusterSpec &c = ctx.model->cluster();
  json::Array top;
  for (const PlanEstimate &e : r.top)
    top.push_back(estimateToJSON(e));
  json::Array points;
  for (const PlanPoint &p : r.feasible)
    points.push_back(
        json::Array{toGB(p.deviceBytes), p.modelFlopsPerGpu / 1e12});
  json::Object out{
      {"model", json::Object{{"name", m.name},
                             {"num_layers", m.numLayers},
                             {"hidden_size", m.hiddenSize},
                             {"num_attention_heads", m.numHeads},
                             {"seq_length", m.seqLength},
                             {"vocab_size", m.vocabSize},
                             {"parameters", m.parameters}}},
      {"cluster", json::Object{{"name", c.name},
                               {"file", ctx.clusterSource},
                               {"gpu", c.gpu.kind},
                               {"gpus_per_node", c.gpusPerNode},
                               {"peak_tflops", c.gpu.peak16BitFlops / 1e12},
                               {"memory_gb", toGB(c.gpu.memoryBytes)}}},
      {"search",
       json::Object{{"gpus", ctx.options.numGpus},
                    {"global_batch", ctx.options.globalBatch},
                    {"objective", objectiveName(ctx.options.objective)},
                    {"plans_enumerated", static_cast<int64_t>(r.numEnumerated)},
                    {"plans_feasible", static_cast<int64_t>(r.numFeasible)},
                    {"search_seconds", r.searchSeconds}}},
      {"explanation", r.explanation},
      {"top", std::move(top)},
      {"feasible_points_gb_model_tflops", std::move(points)},
  };
  if (!r.top.empty())
    out["winner"] = estimateToJSON(r.top.front());
  json::Array alternatives;
  for (const Alternative &alt : r.alternatives) {
    json::Object a{{"with", alt.what}, {"comparison", alt.comparison}};
    if (alt.best.fits)
      a["best"] = estimateToJSON(alt.best);
    alternatives.push_back(std::move(a));
  }
  out["alternatives"] = std::move(alternatives);
  if (r.bestOtherLayout.fits)
    out["best_other_layout"] = estimateToJSON(r.bestOtherLayout);
  if (r.bestOtherZero.fits)
    out["best_other_zero"] = estimateToJSON(r.bestOtherZero);
  return out;
}

std::string mlir::dsc::analysis::renderMarkdown(const SearchResult &r,
                                                const ReportContext &ctx) {
  const ModelShape &m = ctx.model->model();
  const ClusterSpec &c = ctx.model->cluster();
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "# dsc auto-parallel report\n\n";
  os << "**" << title(ctx) << "**\n\n";
  os << llvm::formatv(
      "- Model: {0}: {1} layers, hidden {2}, {3} heads, sequence {4}, "
      "vocabulary {5}, {6:F1} B parameters\n",
      m.name, m.numLayers, m.hiddenSize, m.numHeads, m.seqLength, m.vocabSize,
      m.parameters / 1e9);
  os << llvm::formatv("- Cluster: {0} (`{1}`): {2} GPUs per node, {3:F0} "
                      "TFLOP/s dense 16-bit and {4:F0} GB per GPU\n",
                      c.name, ctx.clusterSource, c.gpusPerNode,
                      c.gpu.peak16BitFlops / 1e12, toGB(c.gpu.memoryBytes));
  os << llvm::formatv("- Search: objective `{0}`; {1} plans enumerated, {2} "
                      "fit in memory; {3:F1} ms\n\n",
                      objectiveName(ctx.options.objective), r.numEnumerated,
                      r.numFeasible, r.searchSeconds * 1e3);
  if (r.top.empty())
    return s;
  const PlanEstimate &w = r.top.front();
  os << "## Winner\n\n`" << w.plan.str() << "`\n\n" << r.explanation << "\n\n";
  os << llvm::formatv("Predicted {0:F2} s per step, {1:F0} TFLOP/s per GPU "
                      "({2:F1}% of peak, counting recompute), MFU {3:F1}%, "
                      "pipeline bubble {4:F1}%.\n\n",
                      w.time.total, w.flopsPerGpu / 1e12,
                      100.0 * w.flopsPerGpu / c.gpu.peak16BitFlops,
                      100.0 * w.mfu, 100.0 * w.bubbleFraction);

  os << "### Why this plan\n\nThe best plan that differs from the winner in "
        "one respect:\n\n"
        "| with | best such plan | step (s) | device GB | compared with the "
        "winner |\n|---|---|---:|---:|---|\n";
  for (const Alternative &alt : r.alternatives) {
    if (!alt.best.fits) {
      os << llvm::formatv("| {0} | - | - | - | {1} |\n", alt.what,
                          alt.comparison);
      continue;
    }
    os << llvm::formatv("| {0} | `{1}` | {2:F2} | {3:F1} | {4} |\n", alt.what,
                        alt.best.plan.str(), alt.best.time.total,
                        toGB(alt.best.memory.device), alt.comparison);
  }
  os << "\n### Where the time goes\n\n";
  os << "| Step time | seconds | share |\n|---|---:|---:|\n";
  const StepTimeBreakdown &t = w.time;
  std::pair<const char *, double> rows[] = {
      {"compute (GEMMs + memory-bound kernels)", t.compute - t.recompute},
      {"recompute", t.recompute},
      {"tensor-parallel collectives", t.tpComm},
      {"pipeline send/recv", t.ppComm},
      {"ZeRO per-micro-batch traffic (exposed)", t.zeroComm},
      {"pipeline bubble", t.bubble},
      {"data-parallel traffic (exposed)", t.dpComm},
      {"optimizer step", t.optimizer},
      {"offload (PCIe + CPU Adam)", t.offload}};
  for (auto [name, sec] : rows)
    os << llvm::formatv("| {0} | {1:F3} | {2:F1}% |\n", name, sec,
                        100.0 * sec / t.total);
  os << llvm::formatv("| **total** | **{0:F3}** | 100% |\n\n", t.total);

  const MemoryBreakdown &mm = w.memory;
  os << "### Where the memory goes\n\n";
  os << "| Memory per GPU | GB |\n|---|---:|\n";
  std::pair<const char *, double> mem[] = {
      {"fp16 parameters", mm.states.params},
      {"fp16 gradients", mm.states.grads},
      {"optimizer states (fp32 master, m, v)", mm.states.optimizer},
      {"activations", mm.activations},
      {"temporaries (logits, gathered layers)", mm.temporaries},
      {"reserved (context, workspaces)", mm.reserved},
      {"**device total**", mm.device},
      {"host (offloaded)", mm.host},
      {"NVMe (offloaded)", mm.nvme}};
  for (auto [name, bytes] : mem)
    os << llvm::formatv("| {0} | {1:F2} |\n", name, toGB(bytes));
  os << "\n## Top plans\n\n";
  os << "| # | dp | tp | pp | ZeRO | SP | b x m | schedule | recompute | "
        "offload | step (s) | TFLOP/s/GPU | MFU | device GB | host GB | "
        "NVMe GB | comm GB/GPU/step | bubble |\n";
  os << "|---:|---:|---:|---:|---:|---|---|---|---|---|---:|---:|---:|---:|"
        "---:|---:|---:|---:|\n";
  for (size_t i = 0; i < r.top.size(); ++i) {
    const PlanEstimate &e = r.top[i];
    const ParallelPlan &p = e.plan;
    os << llvm::formatv(
        "| {0} | {1} | {2} | {3} | {4} | {5} | {6} x {7} | "
        "{8} | {9} | {10} | {11:F2} | {12:F0} | {13:F1}% | "
        "{14:F1} | {15:F1} | {16:F1} | {17:F1} | {18:F1}% |\n",
        i + 1, p.dp, p.tp, p.pp, p.zeroStage,
        yesNo(p.sequenceParallel && p.tp > 1), p.microBatchSize,
        p.numMicroBatches, p.pp > 1 ? scheduleName(p.schedule) : "-",
        yesNo(p.recompute), yesNo(p.offloadOptimizer), e.time.total,
        e.flopsPerGpu / 1e12, 100.0 * e.mfu, toGB(e.memory.device),
        toGB(e.memory.host), toGB(e.memory.nvme), toGB(e.comm.total()),
        100.0 * e.bubbleFraction);
  }
  os << "\n## Throughput against memory\n\n";
  os << "![Predicted TFLOP/s per GPU against peak memory per GPU for every "
        "feasible plan]("
     << ctx.svgLink << ")\n\n";
  os << "Every point is a plan that fits; the red diamond is the winner, "
        "blue points are the other top plans.\n\n";
  os << "## Reading the numbers\n\n"
        "- TFLOP/s per GPU counts recomputed forwards (Megatron-LM's "
        "accounting); MFU counts only 3x the forward FLOPs.\n"
        "- The bubble fraction is (p - 1) / m; its seconds are (p - 1) "
        "slots of the slowest stage.\n"
        "- Communication is the bytes each GPU sends per step "
        "(nccl-tests bus bytes), over all axes.\n"
        "- The model and its constants are described in "
        "docs/cost-model.md; calibrate them with nccl-tests and a GEMM "
        "sweep before trusting absolute numbers.\n";
  return s;
}

namespace {

std::string xmlEscape(llvm::StringRef s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += ch;
    }
  }
  return out;
}

/// A round tick step giving about `target` ticks over [0, max].
double tickStep(double max, int target) {
  double raw = max / target;
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (f * mag >= raw)
      return f * mag;
  return 10.0 * mag;
}

std::string tickLabel(double v, double step) {
  return step >= 1 ? llvm::formatv("{0:F0}", v).str()
                   : llvm::formatv("{0:F1}", v).str();
}

double modelTflops(const PlanEstimate &e) { return e.modelFlopsPerGpu / 1e12; }

} // namespace

std::string mlir::dsc::analysis::renderSVG(const SearchResult &r,
                                           const ReportContext &ctx) {
  const ClusterSpec &c = ctx.model->cluster();
  const double width = 900, height = 580;
  const double left = 90, right = 40, top = 70, bottom = 80;
  const double plotW = width - left - right, plotH = height - top - bottom;

  double maxX = toGB(c.gpu.memoryBytes), maxY = 1;
  for (const PlanPoint &p : r.feasible) {
    maxX = std::max(maxX, toGB(p.deviceBytes));
    maxY = std::max(maxY, p.modelFlopsPerGpu / 1e12);
  }
  double xStep = tickStep(maxX * 1.05, 8), yStep = tickStep(maxY * 1.1, 6);
  double xMax = std::ceil(maxX * 1.05 / xStep) * xStep;
  double yMax = std::ceil(maxY * 1.1 / yStep) * yStep;
  auto px = [&](double gb) { return left + gb / xMax * plotW; };
  auto py = [&](double tf) { return top + plotH - tf / yMax * plotH; };

  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("<svg xmlns=\"http://www.w3.org/2000/svg\" "
                      "width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
                      "font-family=\"DejaVu Sans, Helvetica, Arial, "
                      "sans-serif\">\n",
                      width, height);
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << llvm::formatv(
      "<text x=\"{0}\" y=\"30\" font-size=\"18\" "
      "text-anchor=\"middle\" font-weight=\"bold\">{1}</text>\n",
      width / 2, xmlEscape("dsc auto-parallel: " + title(ctx)));
  os << llvm::formatv(
      "<text x=\"{0}\" y=\"52\" font-size=\"13\" text-anchor=\"middle\" "
      "fill=\"#555\">{1} feasible plans of {2}; predicted by the dsc cost "
      "model</text>\n",
      width / 2, r.numFeasible, r.numEnumerated);

  // Grid and ticks.
  for (double x = 0; x <= xMax + 1e-9; x += xStep) {
    os << llvm::formatv("<line x1=\"{0:F1}\" y1=\"{1}\" x2=\"{0:F1}\" "
                        "y2=\"{2}\" stroke=\"#e5e5e5\"/>\n",
                        px(x), top, top + plotH);
    os << llvm::formatv("<text x=\"{0:F1}\" y=\"{1}\" font-size=\"12\" "
                        "text-anchor=\"middle\">{2}</text>\n",
                        px(x), top + plotH + 18, tickLabel(x, xStep));
  }
  for (double y = 0; y <= yMax + 1e-9; y += yStep) {
    os << llvm::formatv("<line x1=\"{0}\" y1=\"{1:F1}\" x2=\"{2}\" "
                        "y2=\"{1:F1}\" stroke=\"#e5e5e5\"/>\n",
                        left, py(y), left + plotW);
    os << llvm::formatv("<text x=\"{0}\" y=\"{1:F1}\" font-size=\"12\" "
                        "text-anchor=\"end\">{2}</text>\n",
                        left - 8, py(y) + 4, tickLabel(y, yStep));
  }
  os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" "
                      "height=\"{3}\" fill=\"none\" stroke=\"#333\"/>\n",
                      left, top, plotW, plotH);
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" font-size=\"14\" "
                      "text-anchor=\"middle\">Peak memory per GPU (GB)"
                      "</text>\n",
                      left + plotW / 2, height - 30);
  os << llvm::formatv("<text x=\"24\" y=\"{0}\" font-size=\"14\" "
                      "text-anchor=\"middle\" transform=\"rotate(-90 24 "
                      "{0})\">Predicted model throughput per GPU (TFLOP/s, "
                      "excluding recompute)</text>\n",
                      top + plotH / 2);

  // GPU memory capacity.
  double cap = px(toGB(c.gpu.memoryBytes));
  os << llvm::formatv("<line x1=\"{0:F1}\" y1=\"{1}\" x2=\"{0:F1}\" "
                      "y2=\"{2}\" stroke=\"#c0392b\" stroke-dasharray=\"6 4\"/>"
                      "\n",
                      cap, top, top + plotH);
  os << llvm::formatv("<text x=\"{0:F1}\" y=\"{1}\" font-size=\"12\" "
                      "text-anchor=\"end\" fill=\"#c0392b\">{2} memory "
                      "({3:F0} GB)</text>\n",
                      cap - 4, top + 14, xmlEscape(c.gpu.kind),
                      toGB(c.gpu.memoryBytes));

  // All feasible plans, one circle per occupied pixel so that tens of
  // thousands of plans stay a small file.
  llvm::DenseSet<std::pair<int, int>> drawn;
  os << "<g fill=\"#7f8c8d\" fill-opacity=\"0.45\">\n";
  for (const PlanPoint &p : r.feasible) {
    double x = px(toGB(p.deviceBytes)), y = py(p.modelFlopsPerGpu / 1e12);
    if (!drawn.insert({static_cast<int>(x * 2), static_cast<int>(y * 2)})
             .second)
      continue;
    os << llvm::formatv("<circle cx=\"{0:F1}\" cy=\"{1:F1}\" r=\"2.5\"/>\n", x,
                        y);
  }
  os << "</g>\n<g fill=\"#2e86de\" stroke=\"white\" stroke-width=\"0.8\">\n";
  for (size_t i = 1; i < r.top.size(); ++i)
    os << llvm::formatv("<circle cx=\"{0:F1}\" cy=\"{1:F1}\" r=\"4.5\"/>\n",
                        px(toGB(r.top[i].memory.device)),
                        py(modelTflops(r.top[i])));
  os << "</g>\n";
  if (!r.top.empty()) {
    const PlanEstimate &w = r.top.front();
    double x = px(toGB(w.memory.device)), y = py(modelTflops(w));
    os << llvm::formatv("<path d=\"M {0:F1} {1:F1} l 8 8 l -8 8 l -8 -8 z\" "
                        "fill=\"#e74c3c\" stroke=\"#7b241c\" "
                        "stroke-width=\"1.2\"/>\n",
                        x, y - 8);
    bool leftSide = x > left + plotW * 0.55;
    double ly = y < top + 60 ? y + 30 : y - 34;
    // A translucent box under the label keeps it legible over the points;
    // its width is estimated from the character count (no font metrics).
    double tx = leftSide ? x - 12 : x + 12;
    const char *anchor = leftSide ? "end" : "start";
    std::string plan = "winner: " + xmlEscape(w.plan.str());
    std::string numbers =
        llvm::formatv("{0:F2} s/step, MFU {1:F1}%, {2:F1} "
                      "GB per GPU",
                      w.time.total, 100.0 * w.mfu, toGB(w.memory.device));
    double boxW = std::max(plan.size() * 7.8, numbers.size() * 6.8) + 8;
    os << llvm::formatv("<rect x=\"{0:F1}\" y=\"{1:F1}\" width=\"{2:F1}\" "
                        "height=\"36\" rx=\"3\" fill=\"white\" "
                        "fill-opacity=\"0.85\"/>\n",
                        leftSide ? tx - boxW + 4 : tx - 4, ly - 15, boxW);
    os << llvm::formatv("<text x=\"{0:F1}\" y=\"{1:F1}\" font-size=\"13\" "
                        "font-weight=\"bold\" text-anchor=\"{2}\" "
                        "fill=\"#7b241c\">{3}</text>\n",
                        tx, ly, anchor, plan);
    os << llvm::formatv("<text x=\"{0:F1}\" y=\"{1:F1}\" font-size=\"12\" "
                        "text-anchor=\"{2}\" fill=\"#7b241c\">{3}</text>\n",
                        tx, ly + 15, anchor, numbers);
  }

  // Legend.
  double lx = left + 12, ly = top + plotH - 58;
  os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"190\" height=\"50\" "
                      "fill=\"white\" fill-opacity=\"0.85\" stroke=\"#bbb\"/>"
                      "\n",
                      lx, ly);
  os << llvm::formatv("<circle cx=\"{0}\" cy=\"{1}\" r=\"3\" fill=\"#7f8c8d\"/>"
                      "<text x=\"{2}\" y=\"{3}\" font-size=\"12\">feasible "
                      "plan</text>\n",
                      lx + 14, ly + 14, lx + 26, ly + 18);
  os << llvm::formatv("<circle cx=\"{0}\" cy=\"{1}\" r=\"4.5\" "
                      "fill=\"#2e86de\"/><text x=\"{2}\" y=\"{3}\" "
                      "font-size=\"12\">top {4} plans</text>\n",
                      lx + 14, ly + 29, lx + 26, ly + 33, r.top.size());
  os << llvm::formatv("<path d=\"M {0} {1} l 5 5 l -5 5 l -5 -5 z\" "
                      "fill=\"#e74c3c\"/><text x=\"{2}\" y=\"{3}\" "
                      "font-size=\"12\">winner</text>\n",
                      lx + 14, ly + 37, lx + 26, ly + 47);
  os << "</svg>\n";
  return s;
}

llvm::Error mlir::dsc::analysis::writeReport(const SearchResult &result,
                                             ReportContext ctx,
                                             llvm::StringRef path) {
  llvm::SmallString<256> stem(path);
  llvm::StringRef ext = llvm::sys::path::extension(stem);
  if (ext == ".md" || ext == ".json" || ext == ".svg")
    llvm::sys::path::replace_extension(stem, "");
  llvm::SmallString<256> md(stem), js(stem), svg(stem);
  md += ".md";
  js += ".json";
  svg += ".svg";
  ctx.svgLink = llvm::sys::path::filename(svg).str();

  auto write = [](llvm::StringRef file, llvm::StringRef text) -> llvm::Error {
    std::error_code ec;
    llvm::raw_fd_ostream os(file, ec, llvm::sys::fs::OF_Text);
    if (ec)
      return llvm::createStringError(ec, "cannot write report '%s': %s",
                                     file.str().c_str(), ec.message().c_str());
    os << text;
    os.close();
    if (os.has_error())
      return llvm::createStringError(os.error(), "cannot write report '%s'",
                                     file.str().c_str());
    return llvm::Error::success();
  };
  if (llvm::Error err = write(md, renderMarkdown(result, ctx)))
    return err;
  std::string jsonText;
  llvm::raw_string_ostream jos(jsonText);
  jos << llvm::formatv("{0:2}", renderJSON(result, ctx)) << "\n";
  if (llvm::Error err = write(js, jsonText))
    return err;
  return write(svg, renderSVG(result, ctx));
}
