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
                            {"ep", p.ep},
                            {"zero", p.zeroStage},
                            {"micro_batch_size", p.microBatchSize},
                            {"microbatches", p.numMicroBatches},
                            {"schedule", scheduleName(p.schedule)},
                            {"virtual_stages", p.virtualStages},
                            {"recompute", p.fullRecompute()},
                            {"sequence_parallel", p.sequenceParallel},
                            {"offload", p.offloadsOptimizer()},
                            {"offload_params", p.offloadsParams()},
                            {"delayed_update", p.delayedUpdate}}},
      {"summary", p.str()},
      {"step_seconds", t.total},
      {"tflops_per_gpu", e.flopsPerGpu / 1e12},
      {"model_tflops_per_gpu", e.modelFlopsPerGpu / 1e12},
      {"mfu", e.mfu},
      {"bubble_fraction", e.bubbleFraction},
      {"time_seconds", json::Object{{"compute", t.compute},
                                    {"recompute", t.recompute},
                                    {"tp_comm", t.tpComm},
                                    {"ep_comm", t.epComm},
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
                                    {"nvme", m.nvme},
                                    {"device_per_pipeline_rank",
                                     json::Array(m.devicePerPipelineRank)}}},
      {"comm_bytes_per_gpu", json::Object{{"tp", e.comm.tp},
                                          {"dp", e.comm.dp},
                                          {"pp", e.comm.pp},
                                          {"ep", e.comm.ep},
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
      {"onebit_adam", r.onebit.sentence},
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

namespace {

/// "; not searched: optimizer offload, which the compiler does not build
/// yet ..." for the knobs the search left out (knobs=buildable), or "".
std::string notSearched(const SearchOptions &options) {
  llvm::SmallVector<llvm::StringRef> left;
  if (!options.allowRecompute)
    left.push_back("full recompute");
  if (!options.allowSequenceParallel)
    left.push_back("sequence parallelism");
  if (!options.allowOffload)
    left.push_back("optimizer offload");
  else if (!options.allowOffloadWithPipeline)
    left.push_back("optimizer offload with pipeline stages");
  if (options.allowOffload && !options.allowParamsOffloadWithPipeline)
    left.push_back("parameter offload with pipeline stages");
  if (!options.allowZeroBubble)
    left.push_back("the zb-h1 schedule");
  if (left.empty())
    return "";
  std::string list = left.front().str();
  for (size_t i = 1; i < left.size(); ++i)
    list += (i + 1 == left.size() ? " and " : ", ") + left[i].str();
  return "; not searched: " + list +
         ", which the compiler does not build yet (`knobs=all` prices " +
         (left.size() == 1 ? "it)" : "them)");
}

/// The report as a list of blocks, written once and rendered as Markdown or
/// HTML. Text uses a Markdown subset: `code` and **bold** spans.
struct Block {
  enum Kind { Title, Heading, Subheading, Paragraph, Bullets, Table, Figure };
  Kind kind;
  std::string text;               // Title/Heading/Paragraph; Figure: caption
  std::vector<std::string> items; // Bullets; Table: header
  std::string align;              // Table: 'l' or 'r' per column
  std::vector<std::vector<std::string>> rows; // Table
};

std::vector<Block> buildDocument(const SearchResult &r,
                                 const ReportContext &ctx) {
  const ModelShape &m = ctx.model->model();
  const ClusterSpec &c = ctx.model->cluster();
  std::vector<Block> doc;
  auto para = [&](std::string text) {
    doc.push_back({Block::Paragraph, std::move(text), {}, "", {}});
  };
  doc.push_back({Block::Title, "dsc auto-parallel report", {}, "", {}});
  para("**" + title(ctx) + "**");
  doc.push_back(
      {Block::Bullets,
       "",
       {llvm::formatv("Model: {0}: {1} layers, hidden {2}, {3} heads, "
                      "sequence {4}, vocabulary {5}, {6:F1} B parameters",
                      m.name, m.numLayers, m.hiddenSize, m.numHeads,
                      m.seqLength, m.vocabSize, m.parameters / 1e9),
        llvm::formatv("Cluster: {0} (`{1}`): {2} GPUs per node, {3:F0} "
                      "TFLOP/s dense 16-bit and {4:F0} GB per GPU",
                      c.name, ctx.clusterSource, c.gpusPerNode,
                      c.gpu.peak16BitFlops / 1e12, toGB(c.gpu.memoryBytes)),
        llvm::formatv("Search: objective `{0}`; {1} plans enumerated, {2} "
                      "fit in memory; {3:F1} ms{4}",
                      objectiveName(ctx.options.objective), r.numEnumerated,
                      r.numFeasible, r.searchSeconds * 1e3,
                      notSearched(ctx.options))},
       "",
       {}});
  if (ctx.given) {
    const PlanEstimate &g = *ctx.given;
    doc.push_back({Block::Heading, "Your plan", {}, "", {}});
    para("`" + g.plan.str() + "`");
    if (!g.fits)
      para("It does not fit: " + g.whyNot + ".");
    para(llvm::formatv("Predicted {0:F2} s per step, {1:F0} TFLOP/s per GPU, "
                       "MFU {2:F1}%, pipeline bubble {3:F1}%, {4:F1} GB per "
                       "GPU.",
                       g.time.total, g.flopsPerGpu / 1e12, 100.0 * g.mfu,
                       100.0 * g.bubbleFraction, toGB(g.memory.device)));
    if (g.plan.ep > 1)
      para(llvm::formatv("Its expert-parallel all-to-alls take {0:F3} s per "
                         "step ({1:F1}%) and send {2:F2} GB per GPU.",
                         g.time.epComm, 100.0 * g.time.epComm / g.time.total,
                         toGB(g.comm.ep)));
    if (!r.top.empty()) {
      const PlanEstimate &w = r.top.front();
      std::vector<std::string> changes = planChanges(g.plan, w.plan);
      if (changes.empty()) {
        para("It is the search's winner.");
      } else {
        para(llvm::formatv("The search's winner below takes {0:F2} s per "
                           "step ({1:F1}% {2}); it changes:",
                           w.time.total,
                           100.0 * std::abs(g.time.total - w.time.total) /
                               g.time.total,
                           w.time.total <= g.time.total ? "less" : "more"));
        doc.push_back({Block::Bullets, "", changes, "", {}});
      }
    }
  }
  if (r.top.empty())
    return doc;

  const PlanEstimate &w = r.top.front();
  doc.push_back({Block::Heading, "Winner", {}, "", {}});
  para("`" + w.plan.str() + "`");
  para(r.explanation);
  if (!r.onebit.sentence.empty())
    para(r.onebit.sentence + ".");
  para(llvm::formatv("Predicted {0:F2} s per step, {1:F0} TFLOP/s per GPU "
                     "({2:F1}% of peak, counting recompute), MFU {3:F1}%, "
                     "pipeline bubble {4:F1}%.",
                     w.time.total, w.flopsPerGpu / 1e12,
                     100.0 * w.flopsPerGpu / c.gpu.peak16BitFlops,
                     100.0 * w.mfu, 100.0 * w.bubbleFraction));

  doc.push_back({Block::Subheading, "Why this plan", {}, "", {}});
  para("The best plan that differs from the winner in one respect:");
  Block why{Block::Table,
            "",
            {"with", "best such plan", "step (s)", "device GB",
             "compared with the winner"},
            "llrrl",
            {}};
  for (const Alternative &alt : r.alternatives) {
    if (!alt.best.fits) {
      why.rows.push_back({alt.what, "-", "-", "-", alt.comparison});
      continue;
    }
    why.rows.push_back({alt.what, "`" + alt.best.plan.str() + "`",
                        llvm::formatv("{0:F2}", alt.best.time.total),
                        llvm::formatv("{0:F1}", toGB(alt.best.memory.device)),
                        alt.comparison});
  }
  doc.push_back(std::move(why));

  doc.push_back({Block::Subheading, "Where the time goes", {}, "", {}});
  const StepTimeBreakdown &t = w.time;
  Block time{Block::Table, "", {"step time", "seconds", "share"}, "lrr", {}};
  std::pair<const char *, double> parts[] = {
      {"compute (GEMMs + memory-bound kernels)", t.compute - t.recompute},
      {"recompute", t.recompute},
      {"tensor-parallel collectives", t.tpComm},
      {"expert-parallel all-to-alls", t.epComm},
      {"pipeline send/recv", t.ppComm},
      {"ZeRO per-micro-batch traffic (exposed)", t.zeroComm},
      {"pipeline bubble", t.bubble},
      {"data-parallel traffic (exposed)", t.dpComm},
      {"optimizer step", t.optimizer},
      {"offload (PCIe + CPU Adam)", t.offload}};
  for (auto [name, sec] : parts) {
    // Only an MoE model's plans send all-to-alls.
    if (m.numExperts == 0 && llvm::StringRef(name).starts_with("expert-"))
      continue;
    time.rows.push_back({name, llvm::formatv("{0:F3}", sec),
                         llvm::formatv("{0:F1}%", 100.0 * sec / t.total)});
  }
  time.rows.push_back(
      {"**total**", llvm::formatv("**{0:F3}**", t.total), "100%"});
  doc.push_back(std::move(time));

  doc.push_back({Block::Subheading, "Where the memory goes", {}, "", {}});
  const MemoryBreakdown &mm = w.memory;
  Block mem{Block::Table, "", {"memory per GPU", "GB"}, "lr", {}};
  std::pair<const char *, double> bytes[] = {
      {"fp16 parameters", mm.states.params},
      {"fp16 gradients", mm.states.grads},
      {"optimizer states (fp32 master, m, v)", mm.states.optimizer},
      {"activations", mm.activations},
      {"temporaries (logits, gathered layers)", mm.temporaries},
      {"reserved (context, workspaces)", mm.reserved},
      {"**device total**", mm.device},
      {"host (offloaded)", mm.host},
      {"NVMe (offloaded)", mm.nvme}};
  for (auto [name, b] : bytes)
    mem.rows.push_back({name, llvm::formatv("{0:F2}", toGB(b))});
  doc.push_back(std::move(mem));

  doc.push_back({Block::Heading, "Top plans", {}, "", {}});
  // The ep column only for an MoE model (a dense model's plans keep ep 1).
  const bool moe = ctx.model->model().numExperts > 0;
  Block top{Block::Table,
            "",
            {"#", "dp", "tp", "pp", "ZeRO", "SP", "b x m", "schedule",
             "recompute", "offload", "step (s)", "TFLOP/s/GPU", "MFU",
             "device GB", "host GB", "NVMe GB", "comm GB/GPU/step", "bubble"},
            "rrrrrlrlllrrrrrrrr",
            {}};
  if (moe) {
    top.items.insert(top.items.begin() + 4, "ep");
    top.align.insert(top.align.begin() + 4, 'r');
  }
  for (size_t i = 0; i < r.top.size(); ++i) {
    const PlanEstimate &e = r.top[i];
    const ParallelPlan &p = e.plan;
    auto f1 = [](double v) { return llvm::formatv("{0:F1}", v).str(); };
    std::vector<std::string> row = {
        std::to_string(i + 1),
        std::to_string(p.dp),
        std::to_string(p.tp),
        std::to_string(p.pp),
        std::to_string(p.zeroStage),
        yesNo(p.sequenceParallel && p.tp > 1),
        llvm::formatv("{0} x {1}", p.microBatchSize, p.numMicroBatches),
        p.pp == 1 ? std::string("-")
        : p.virtualStages > 1
            ? llvm::formatv("{0} v={1}", scheduleName(p.schedule),
                            p.virtualStages)
                  .str()
            : std::string(scheduleName(p.schedule)),
        yesNo(p.fullRecompute()),
        p.offloadsParams() ? std::string("yes+params")
                           : yesNo(p.offloadsOptimizer()),
        llvm::formatv("{0:F2}", e.time.total),
        llvm::formatv("{0:F0}", e.flopsPerGpu / 1e12),
        f1(100.0 * e.mfu) + "%",
        f1(toGB(e.memory.device)),
        f1(toGB(e.memory.host)),
        f1(toGB(e.memory.nvme)),
        f1(toGB(e.comm.total())),
        f1(100.0 * e.bubbleFraction) + "%"};
    if (moe)
      row.insert(row.begin() + 4, std::to_string(p.ep));
    top.rows.push_back(std::move(row));
  }
  doc.push_back(std::move(top));

  doc.push_back({Block::Heading, "Throughput against memory", {}, "", {}});
  doc.push_back({Block::Figure,
                 "Predicted TFLOP/s per GPU against peak memory per GPU for "
                 "every feasible plan",
                 {},
                 "",
                 {}});
  para("Every point is a plan that fits; the red diamond is the winner, blue "
       "points are the other top plans.");
  doc.push_back({Block::Heading, "Reading the numbers", {}, "", {}});
  doc.push_back(
      {Block::Bullets,
       "",
       {"TFLOP/s per GPU counts recomputed forwards (Megatron-LM's "
        "accounting); MFU counts only 3x the forward FLOPs.",
        "The bubble fraction is (p - 1) / m; its seconds are (p - 1) slots "
        "of the slowest stage.",
        "Communication is the bytes each GPU sends per step (nccl-tests bus "
        "bytes), over all axes.",
        "The model and its constants are described in `docs/cost-model.md`; "
        "calibrate them with nccl-tests and a GEMM sweep before trusting "
        "absolute numbers."},
       "",
       {}});
  return doc;
}

/// Escapes text for HTML and SVG (XML) content and attribute values.
std::string htmlEscape(llvm::StringRef s) {
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

/// Escapes `text` and turns its `code` and **bold** spans into HTML.
std::string inlineHtml(llvm::StringRef text) {
  std::string out;
  bool code = false, bold = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '`') {
      out += code ? "</code>" : "<code>";
      code = !code;
    } else if (!code && text.substr(i).starts_with("**")) {
      out += bold ? "</b>" : "<b>";
      bold = !bold;
      ++i;
    } else {
      out += htmlEscape(text.substr(i, 1));
    }
  }
  if (code)
    out += "</code>";
  if (bold)
    out += "</b>";
  return out;
}

} // namespace

std::string mlir::dsc::analysis::renderMarkdown(const SearchResult &r,
                                                const ReportContext &ctx) {
  std::string s;
  llvm::raw_string_ostream os(s);
  for (const Block &b : buildDocument(r, ctx)) {
    switch (b.kind) {
    case Block::Title:
      os << "# " << b.text << "\n\n";
      break;
    case Block::Heading:
      os << "## " << b.text << "\n\n";
      break;
    case Block::Subheading:
      os << "### " << b.text << "\n\n";
      break;
    case Block::Paragraph:
      os << b.text << "\n\n";
      break;
    case Block::Bullets:
      for (const std::string &item : b.items)
        os << "- " << item << "\n";
      os << "\n";
      break;
    case Block::Table:
      os << "|";
      for (const std::string &h : b.items)
        os << " " << h << " |";
      os << "\n|";
      for (char a : b.align)
        os << (a == 'r' ? "---:|" : "---|");
      os << "\n";
      for (const auto &row : b.rows) {
        os << "|";
        for (const std::string &cell : row)
          os << " " << cell << " |";
        os << "\n";
      }
      os << "\n";
      break;
    case Block::Figure:
      os << "![" << b.text << "](" << ctx.svgLink << ")\n\n";
      break;
    }
  }
  return s;
}

std::string mlir::dsc::analysis::renderHTML(const SearchResult &r,
                                            const ReportContext &ctx) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta "
        "charset=\"utf-8\">\n<title>"
     << htmlEscape("dsc auto-parallel: " + title(ctx)) << "</title>\n"
     << "<style>\n"
        "body{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;"
        "max-width:1200px;margin:2em auto;padding:0 1em;color:#222}\n"
        "table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px}\n"
        "th,td{border:1px solid #ccc;padding:3px 8px}\n"
        "th{background:#f2f2f2}\ntd.r{text-align:right;white-space:nowrap}\n"
        "tr:nth-child(even) td{background:#fafafa}\n"
        "code{background:#f2f2f2;padding:1px 4px;border-radius:3px;"
        "white-space:nowrap}\n"
        "</style>\n</head>\n<body>\n";
  for (const Block &b : buildDocument(r, ctx)) {
    switch (b.kind) {
    case Block::Title:
      os << "<h1>" << inlineHtml(b.text) << "</h1>\n";
      break;
    case Block::Heading:
      os << "<h2>" << inlineHtml(b.text) << "</h2>\n";
      break;
    case Block::Subheading:
      os << "<h3>" << inlineHtml(b.text) << "</h3>\n";
      break;
    case Block::Paragraph:
      os << "<p>" << inlineHtml(b.text) << "</p>\n";
      break;
    case Block::Bullets:
      os << "<ul>\n";
      for (const std::string &item : b.items)
        os << "<li>" << inlineHtml(item) << "</li>\n";
      os << "</ul>\n";
      break;
    case Block::Table:
      os << "<table>\n<tr>";
      for (const std::string &h : b.items)
        os << "<th>" << inlineHtml(h) << "</th>";
      os << "</tr>\n";
      for (const auto &row : b.rows) {
        os << "<tr>";
        for (size_t i = 0; i < row.size(); ++i)
          os << (i < b.align.size() && b.align[i] == 'r' ? "<td class=\"r\">"
                                                         : "<td>")
             << inlineHtml(row[i]) << "</td>";
        os << "</tr>\n";
      }
      os << "</table>\n";
      break;
    case Block::Figure:
      // Inline, so the page is one self-contained file.
      os << "<figure>\n"
         << renderSVG(r, ctx) << "<figcaption>" << inlineHtml(b.text)
         << "</figcaption>\n</figure>\n";
      break;
    }
  }
  os << "</body>\n</html>\n";
  return s;
}

namespace {

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
      width / 2, htmlEscape("dsc auto-parallel: " + title(ctx)));
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
                      cap - 4, top + 14, htmlEscape(c.gpu.kind),
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
    std::string plan = "winner: " + htmlEscape(w.plan.str());
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
  if (ext == ".md" || ext == ".json" || ext == ".svg" || ext == ".html")
    llvm::sys::path::replace_extension(stem, "");
  llvm::SmallString<256> md(stem), js(stem), svg(stem), html(stem);
  md += ".md";
  js += ".json";
  svg += ".svg";
  html += ".html";
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
  if (llvm::Error err = write(html, renderHTML(result, ctx)))
    return err;
  return write(svg, renderSVG(result, ctx));
}
