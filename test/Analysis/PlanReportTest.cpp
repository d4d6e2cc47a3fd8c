//===- PlanReportTest.cpp - Markdown, JSON and SVG report tests -----------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// The report files are written, parse, and carry the winner, its reason and
// a plot with labelled axes.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/PlanReport.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

using namespace mlir::dsc::analysis;

namespace {

std::string readFile(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  return buf ? (*buf)->getBuffer().str() : std::string();
}

TEST(Report, WritesMarkdownJsonAndSvg) {
  llvm::Expected<ClusterSpec> c =
      loadClusterSpec(DSC_CLUSTERS_DIR "/dgx-a100-80gb.json");
  ASSERT_TRUE(static_cast<bool>(c));
  CostModel cm(ModelShape::gpt3_175B(), *c);
  SearchOptions o;
  o.numGpus = 1024;
  o.globalBatch = 1536;
  llvm::Expected<SearchResult> r = searchPlans(cm, o);
  ASSERT_TRUE(static_cast<bool>(r));

  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("dsc-report", dir));
  llvm::SmallString<128> path(dir);
  llvm::sys::path::append(path, "plan.md");
  ReportContext ctx;
  ctx.model = &cm;
  ctx.options = o;
  ctx.clusterSource = "dgx-a100-80gb.json";
  ASSERT_FALSE(static_cast<bool>(writeReport(*r, ctx, path)));

  const PlanEstimate &w = r->top.front();
  std::string md = readFile(path);
  EXPECT_NE(md.find(w.plan.str()), std::string::npos);
  EXPECT_NE(md.find(r->explanation), std::string::npos);
  EXPECT_NE(md.find("](plan.svg)"), std::string::npos);
  EXPECT_NE(md.find("| 10 |"), std::string::npos); // ten ranked plans
  EXPECT_NE(md.find("### Why this plan"), std::string::npos);
  EXPECT_NE(md.find("| no pipeline parallelism (pp = 1) | `"),
            std::string::npos);

  llvm::SmallString<128> jsonPath(dir), svgPath(dir);
  llvm::sys::path::append(jsonPath, "plan.json");
  llvm::sys::path::append(svgPath, "plan.svg");
  llvm::Expected<llvm::json::Value> js = llvm::json::parse(readFile(jsonPath));
  ASSERT_TRUE(static_cast<bool>(js));
  const llvm::json::Object *winner =
      js->getAsObject()->getObject("winner")->getObject("plan");
  ASSERT_NE(winner, nullptr);
  EXPECT_EQ(winner->getInteger("tp"), w.plan.tp);
  EXPECT_EQ(winner->getInteger("pp"), w.plan.pp);
  EXPECT_EQ(js->getAsObject()->getArray("top")->size(), 10u);
  EXPECT_EQ(
      js->getAsObject()->getArray("feasible_points_gb_model_tflops")->size(),
      r->numFeasible);

  llvm::SmallString<128> htmlPath(dir);
  llvm::sys::path::append(htmlPath, "plan.html");
  std::string html = readFile(htmlPath);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<code>" + w.plan.str() + "</code>"), std::string::npos);
  EXPECT_NE(html.find("<svg xmlns="), std::string::npos); // inline plot
  EXPECT_NE(html.find("<th>compared with the winner</th>"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);

  std::string svg = readFile(svgPath);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("Peak memory per GPU (GB)"), std::string::npos);
  EXPECT_NE(svg.find("Predicted model throughput per GPU"), std::string::npos);
  EXPECT_NE(svg.find("winner: " + w.plan.str()), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  llvm::sys::fs::remove_directories(dir);
}

TEST(Report, UnwritablePathIsAnError) {
  llvm::Expected<ClusterSpec> c =
      loadClusterSpec(DSC_CLUSTERS_DIR "/dgx-a100-80gb.json");
  ASSERT_TRUE(static_cast<bool>(c));
  CostModel cm(ModelShape::gpt("small", 12, 768, 12, 1024, 50257), *c);
  SearchOptions o;
  o.numGpus = 8;
  o.globalBatch = 64;
  llvm::Expected<SearchResult> r = searchPlans(cm, o);
  ASSERT_TRUE(static_cast<bool>(r));
  ReportContext ctx;
  ctx.model = &cm;
  ctx.options = o;
  llvm::Error err = writeReport(*r, ctx, "/nonexistent-dir/plan.md");
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("/nonexistent-dir/plan.md"),
            std::string::npos);
}

// An MoE model's report has an ep column and the all-to-alls' seconds; its
// JSON gives each plan's ep, all-to-all seconds and bytes. A dense model's
// table keeps its columns (every plan is ep 1) but its JSON says ep 1.
TEST(Report, ExpertParallelismIsShownForMoeModels) {
  llvm::Expected<ClusterSpec> c =
      loadClusterSpec(DSC_CLUSTERS_DIR "/dgx-a100-80gb.json");
  ASSERT_TRUE(static_cast<bool>(c));
  ModelShape m = ModelShape::gpt("moe", 24, 2048, 16, 2048, 51200);
  m.microBatchSize = 1;
  m.numExperts = 8;
  m.moeCapacity = 2 * 2048 / 8;
  m.parameters += m.expertParameters() - 24 * 8.0 * 2048 * 2048;
  for (bool moe : {true, false}) {
    CostModel cm(moe ? m : ModelShape::gpt("dense", 24, 2048, 16, 2048, 51200),
                 *c);
    SearchOptions o;
    o.numGpus = 8;
    o.globalBatch = 64;
    llvm::Expected<SearchResult> r = searchPlans(cm, o);
    ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
    ReportContext ctx;
    ctx.model = &cm;
    ctx.options = o;
    std::string md = renderMarkdown(*r, ctx);
    EXPECT_EQ(md.find("| # | dp | tp | pp | ep | ZeRO |") != std::string::npos,
              moe);
    EXPECT_EQ(md.find("| expert-parallel all-to-alls |") != std::string::npos,
              moe);
    const PlanEstimate &w = r->top.front();
    llvm::json::Value js = estimateToJSON(w);
    const llvm::json::Object *o2 = js.getAsObject();
    EXPECT_EQ(o2->getObject("plan")->getInteger("ep"), w.plan.ep);
    EXPECT_EQ(o2->getObject("time_seconds")->getNumber("ep_comm"),
              w.time.epComm);
    EXPECT_EQ(o2->getObject("comm_bytes_per_gpu")->getNumber("ep"), w.comm.ep);
    if (moe) {
      EXPECT_GT(w.plan.ep, 1);
      EXPECT_NE(
          md.find("| 1 | 8 | 1 | 1 | " + std::to_string(w.plan.ep) + " |"),
          std::string::npos);
    } else {
      EXPECT_EQ(w.plan.ep, 1);
    }
  }
}

} // namespace
