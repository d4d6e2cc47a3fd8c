//===- ClusterSpecTest.cpp - Cluster description reader tests -------------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// Every shipped cluster file loads and cites a source for each number; bad
// files get errors that name the file, the key and the problem.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/ClusterSpec.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

#include <string>
#include <vector>

using namespace mlir::dsc::analysis;

namespace {

std::vector<std::string> shippedClusters() {
  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(DSC_CLUSTERS_DIR, ec), end;
       it != end && !ec; it.increment(ec))
    if (llvm::sys::path::extension(it->path()) == ".json")
      files.push_back(it->path());
  return files;
}

std::string clusterPath(llvm::StringRef name) {
  return (llvm::Twine(DSC_CLUSTERS_DIR) + "/" + name).str();
}

std::string errorOf(llvm::StringRef text) {
  llvm::Expected<ClusterSpec> c = parseClusterSpec(text, "bad.json");
  if (c)
    return "";
  return llvm::toString(c.takeError());
}

TEST(ClusterSpec, ShipsTheFiveGpuKinds) {
  std::vector<std::string> kinds;
  for (const std::string &f : shippedClusters()) {
    llvm::Expected<ClusterSpec> c = loadClusterSpec(f);
    ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
    kinds.push_back(c->gpu.kind);
    // The DGX nodes have 8 GPUs; the 40 Gb/s Ethernet cluster (1-bit
    // Adam's setting) 4 per node.
    EXPECT_EQ(c->gpusPerNode, llvm::StringRef(f).contains("40gbe") ? 4 : 8)
        << f;
    EXPECT_GT(c->gpu.peak16BitFlops, c->gpu.peakFp32Flops) << f;
    EXPECT_GT(c->intraNodeBandwidth, c->interNodeBandwidthPerGpu()) << f;
    EXPECT_GT(c->hostMemoryBytes, c->gpusPerNode * c->gpu.memoryBytes) << f;
  }
  for (const char *k : {"V100-SXM2-32GB", "A100-SXM4-40GB", "A100-SXM4-80GB",
                        "H100-SXM5-80GB", "H200-SXM-141GB"})
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), k), kinds.end()) << k;
}

// The format promises a source line per number in the shipped files.
TEST(ClusterSpec, EveryShippedNumberHasASource) {
  for (const std::string &f : shippedClusters()) {
    auto buf = llvm::MemoryBuffer::getFile(f);
    ASSERT_TRUE(static_cast<bool>(buf));
    llvm::Expected<llvm::json::Value> v =
        llvm::json::parse((*buf)->getBuffer());
    ASSERT_TRUE(static_cast<bool>(v));
    for (const char *section : {"gpu", "node", "calibration"}) {
      const llvm::json::Object *o = v->getAsObject()->getObject(section);
      ASSERT_NE(o, nullptr) << f << " " << section;
      for (const auto &kv : *o) {
        if (kv.first == "kind")
          continue;
        const llvm::json::Object *num = kv.second.getAsObject();
        ASSERT_NE(num, nullptr) << f << ": " << section << "." << kv.first.str()
                                << " has no source";
        std::optional<llvm::StringRef> src = num->getString("source");
        ASSERT_TRUE(src.has_value()) << f << ": " << kv.first.str();
        EXPECT_GT(src->size(), 10u) << f << ": " << kv.first.str();
      }
    }
  }
}

TEST(ClusterSpec, A100DatasheetNumbersInSIUnits) {
  llvm::Expected<ClusterSpec> c =
      loadClusterSpec(clusterPath("dgx-a100-80gb.json"));
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->gpu.peak16BitFlops, 312e12);
  EXPECT_EQ(c->gpu.peakFp32Flops, 19.5e12);
  EXPECT_EQ(c->gpu.memoryBytes, 80e9);
  EXPECT_EQ(c->gpu.memoryBandwidth, 2039e9);
  EXPECT_EQ(c->intraNodeBandwidth, 300e9);
  // 8 x 200 Gb/s = 200 GB/s per node, 25 GB/s per GPU.
  EXPECT_EQ(c->interNodeBandwidthPerNode, 200e9);
  EXPECT_EQ(c->interNodeBandwidthPerGpu(), 25e9);
  EXPECT_EQ(c->intraNodeLatency, 2e-6);
}

const char *kMinimal = R"({
  "name": "tiny",
  "gpu": {"kind": "X", "peak_dense_16bit_tflops": 100, "peak_fp32_tflops": 10,
          "memory_gb": 16, "memory_bandwidth_gb_per_s": 1000},
  "node": {"gpus_per_node": 4, "intra_node_bandwidth_gb_per_s": 100,
           "intra_node_latency_us": 2, "inter_node_nics": 1,
           "inter_node_nic_gbit_per_s": 100, "inter_node_latency_us": 5,
           "host_memory_gb": 256, "host_memory_bandwidth_gb_per_s": 100,
           "pcie_gb_per_s_per_gpu": 16, "nvme_capacity_tb": 1,
           "nvme_bandwidth_gb_per_s": 3}
})";

TEST(ClusterSpec, BareNumbersAndDefaultCalibration) {
  llvm::Expected<ClusterSpec> c = parseClusterSpec(kMinimal, "tiny.json");
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->gpusPerNode, 4);
  EXPECT_EQ(c->interNodeBandwidthPerNode, 12.5e9);
  EXPECT_EQ(c->calibration.gemmMaxEfficiency, Calibration().gemmMaxEfficiency);
}

std::string replaced(std::string text, llvm::StringRef from,
                     llvm::StringRef to) {
  size_t pos = text.find(from.str());
  EXPECT_NE(pos, std::string::npos) << from.str();
  if (pos != std::string::npos)
    text.replace(pos, from.size(), to.str());
  return text;
}

TEST(ClusterSpec, ErrorsNameFileKeyAndProblem) {
  std::string err = errorOf(replaced(kMinimal, "\"memory_gb\": 16,", ""));
  EXPECT_NE(err.find("bad.json"), std::string::npos) << err;
  EXPECT_NE(err.find("gpu.memory_gb"), std::string::npos) << err;
  EXPECT_NE(err.find("missing"), std::string::npos) << err;

  err = errorOf(replaced(kMinimal, "\"gpus_per_node\": 4",
                         "\"gpus_per_node\": \"eight\""));
  EXPECT_NE(err.find("node.gpus_per_node"), std::string::npos) << err;
  EXPECT_NE(err.find("got a string"), std::string::npos) << err;

  err = errorOf(
      replaced(kMinimal, "\"gpus_per_node\": 4", "\"gpus_per_node\": 4.5"));
  EXPECT_NE(err.find("integer"), std::string::npos) << err;

  err = errorOf(replaced(kMinimal, "\"memory_gb\": 16", "\"memory_gb\": -16"));
  EXPECT_NE(err.find("must be positive"), std::string::npos) << err;

  err = errorOf(replaced(kMinimal, "\"memory_gb\": 16", "\"memroy_gb\": 16"));
  EXPECT_NE(err.find("gpu.memory_gb' is missing"), std::string::npos) << err;
  EXPECT_NE(err.find("found 'memroy_gb' instead"), std::string::npos) << err;

  err = errorOf(replaced(kMinimal, "\"memory_gb\": 16,",
                         "\"memory_gb\": 16, \"colour\": \"green\","));
  EXPECT_NE(err.find("gpu.colour"), std::string::npos) << err;
  EXPECT_NE(err.find("not a known key"), std::string::npos) << err;

  err = errorOf(replaced(kMinimal, "\"memory_gb\": 16",
                         "\"memory_gb\": {\"source\": \"datasheet\"}"));
  EXPECT_NE(err.find("no \"value\""), std::string::npos) << err;

  err = errorOf(replaced(kMinimal, "\"node\": {",
                         "\"calibration\": {\"gemm_max_efficiency\": 1.5},"
                         "\"node\": {"));
  EXPECT_NE(err.find("calibration.gemm_max_efficiency"), std::string::npos)
      << err;
  EXPECT_NE(err.find("at most 1"), std::string::npos) << err;

  err = errorOf("{\"name\": ");
  EXPECT_NE(err.find("bad.json: not valid JSON"), std::string::npos) << err;
  err = errorOf("[1, 2]");
  EXPECT_NE(err.find("top level must be a JSON object"), std::string::npos)
      << err;
}

TEST(ClusterSpec, CalibrationMayZeroTheReserveButNotTheGemmCeiling) {
  llvm::Expected<ClusterSpec> c = parseClusterSpec(
      replaced(kMinimal, "\"node\": {",
               "\"calibration\": {\"reserved_gb\": 0, \"overlap_slowdown\": 0},"
               "\"node\": {"),
      "zero.json");
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->calibration.reservedBytes, 0.0);
  EXPECT_EQ(c->calibration.overlapSlowdown, 0.0);
  std::string err = errorOf(
      replaced(kMinimal, "\"node\": {",
               "\"calibration\": {\"gemm_max_efficiency\": 0}, \"node\": {"));
  EXPECT_NE(err.find("must be positive, got 0"), std::string::npos) << err;
}

TEST(ClusterSpec, MissingFileIsAnError) {
  llvm::Expected<ClusterSpec> c = loadClusterSpec("/nonexistent/cluster.json");
  ASSERT_FALSE(static_cast<bool>(c));
  std::string err = llvm::toString(c.takeError());
  EXPECT_NE(err.find("/nonexistent/cluster.json"), std::string::npos) << err;
}

} // namespace
