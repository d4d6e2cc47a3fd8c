//===- ClusterSpec.cpp - Cluster description reader -----------------------===//
//
// Part of the dsc project.
//
//===----------------------------------------------------------------------===//
//
// Reads the JSON cluster format with llvm::json. Every error names the file,
// the dotted key and what is wrong, because these files are edited by hand.
//
//===----------------------------------------------------------------------===//

#include "dsc/Analysis/ClusterSpec.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir::dsc::analysis;
using llvm::json::Object;
using llvm::json::Value;

namespace {

/// Reads keys out of one JSON object, remembering the first error and
/// which keys were consumed (so unknown keys, usually typos, are reported).
class ObjectReader {
public:
  ObjectReader(const Object *obj, std::string path, llvm::StringRef file,
               std::string &error)
      : obj(obj), path(std::move(path)), file(file), error(error) {}

  /// A number, bare or as {"value": N, "source": "..."}. Must be > 0 (or
  /// == 0 if `allowZero`), and <= `max` when given. Missing keys are an
  /// error unless `optional`.
  void number(llvm::StringRef key, double &out, double scale,
              bool optional = false, double max = 0, bool allowZero = false) {
    seen.insert(key);
    if (!error.empty())
      return;
    const Value *v = obj->get(key);
    if (!v) {
      if (!optional)
        fail(key,
             "is missing (a positive number is required)" + misspelling(key));
      return;
    }
    if (const Object *o = v->getAsObject()) {
      for (const auto &kv : *o)
        if (kv.first != "value" && kv.first != "source")
          return fail(key, llvm::formatv("has unknown field '{0}'; expected "
                                         "{{\"value\": N, \"source\": \"...\"}",
                                         llvm::StringRef(kv.first))
                               .str());
      v = o->get("value");
      if (!v)
        return fail(key, "has no \"value\" field");
    }
    std::optional<double> d = v->getAsNumber();
    if (!d)
      return fail(key, "must be a number or {\"value\": N, \"source\": "
                       "\"...\"}, got " +
                           kindOf(*v));
    if (!(*d > 0) && !(allowZero && *d == 0))
      return fail(key,
                  llvm::formatv("must be {0}, got {1}",
                                allowZero ? "non-negative" : "positive", *d)
                      .str());
    if (max > 0 && *d > max)
      return fail(key,
                  llvm::formatv("must be at most {0}, got {1}", max, *d).str());
    out = *d * scale;
  }

  void integer(llvm::StringRef key, int64_t &out) {
    double d = 0;
    number(key, d, 1.0);
    if (!error.empty())
      return;
    if (d != static_cast<double>(static_cast<int64_t>(d)))
      return fail(key, llvm::formatv("must be an integer, got {0}", d).str());
    out = static_cast<int64_t>(d);
  }

  void string(llvm::StringRef key, std::string &out, bool optional = false) {
    seen.insert(key);
    if (!error.empty())
      return;
    const Value *v = obj->get(key);
    if (!v) {
      if (!optional)
        fail(key, "is missing (a string is required)");
      return;
    }
    std::optional<llvm::StringRef> s = v->getAsString();
    if (!s)
      return fail(key, "must be a string, got " + kindOf(*v));
    out = s->str();
  }

  const Object *object(llvm::StringRef key, bool optional = false) {
    seen.insert(key);
    if (!error.empty())
      return nullptr;
    const Value *v = obj->get(key);
    if (!v) {
      if (!optional)
        fail(key, "is missing (an object is required)");
      return nullptr;
    }
    const Object *o = v->getAsObject();
    if (!o)
      fail(key, "must be an object, got " + kindOf(*v));
    return o;
  }

  /// Reports the first key that no reader asked for.
  void rejectUnknownKeys() {
    if (!error.empty())
      return;
    for (const auto &kv : *obj) {
      llvm::StringRef k = kv.first;
      if (seen.contains(k) || k == "description" || k == "source" ||
          k == "notes")
        continue;
      std::string expected;
      for (const auto &s : seen)
        expected += (expected.empty() ? "" : ", ") + s.getKey().str();
      return fail(k, "is not a known key (expected one of: " + expected +
                         ", description, notes)");
    }
  }

  std::string childPath(llvm::StringRef key) const {
    return path.empty() ? key.str() : path + "." + key.str();
  }

private:
  /// A present key that looks like a typo of the missing `key`.
  std::string misspelling(llvm::StringRef key) const {
    for (const auto &kv : *obj) {
      llvm::StringRef k = kv.first;
      if (k != key && k.edit_distance(key) <= 2)
        return "; found '" + k.str() + "' instead, a misspelling?";
    }
    return "";
  }

  static std::string kindOf(const Value &v) {
    switch (v.kind()) {
    case Value::Null:
      return "null";
    case Value::Boolean:
      return "a boolean";
    case Value::Number:
      return "a number";
    case Value::String:
      return "a string";
    case Value::Array:
      return "an array";
    case Value::Object:
      return "an object";
    }
    return "something else";
  }

  void fail(llvm::StringRef key, const std::string &what) {
    if (error.empty())
      error = llvm::formatv("{0}: key '{1}' {2}", file, childPath(key), what);
  }

  const Object *obj;
  std::string path;
  llvm::StringRef file;
  std::string &error;
  llvm::StringSet<> seen;
};

constexpr double kGB = 1e9;
constexpr double kTFLOP = 1e12;
constexpr double kMicro = 1e-6;

} // namespace

llvm::Expected<ClusterSpec>
mlir::dsc::analysis::parseClusterSpec(llvm::StringRef jsonText,
                                      llvm::StringRef fileName) {
  llvm::Expected<Value> parsed = llvm::json::parse(jsonText);
  if (!parsed)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(), "%s: not valid JSON: %s",
        fileName.str().c_str(), llvm::toString(parsed.takeError()).c_str());
  const Object *root = parsed->getAsObject();
  if (!root)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "%s: the top level must be a JSON object",
                                   fileName.str().c_str());

  ClusterSpec spec;
  std::string error;
  ObjectReader top(root, "", fileName, error);
  top.string("name", spec.name);
  const Object *gpuObj = top.object("gpu");
  const Object *nodeObj = top.object("node");
  const Object *calObj = top.object("calibration", /*optional=*/true);
  top.rejectUnknownKeys();

  if (gpuObj) {
    ObjectReader gpu(gpuObj, "gpu", fileName, error);
    gpu.string("kind", spec.gpu.kind);
    gpu.number("peak_dense_16bit_tflops", spec.gpu.peak16BitFlops, kTFLOP);
    gpu.number("peak_fp32_tflops", spec.gpu.peakFp32Flops, kTFLOP);
    gpu.number("memory_gb", spec.gpu.memoryBytes, kGB);
    gpu.number("memory_bandwidth_gb_per_s", spec.gpu.memoryBandwidth, kGB);
    gpu.rejectUnknownKeys();
  }
  if (nodeObj) {
    ObjectReader node(nodeObj, "node", fileName, error);
    node.integer("gpus_per_node", spec.gpusPerNode);
    node.number("intra_node_bandwidth_gb_per_s", spec.intraNodeBandwidth, kGB);
    node.number("intra_node_latency_us", spec.intraNodeLatency, kMicro);
    int64_t nics = 0;
    double nicRate = 0;
    node.integer("inter_node_nics", nics);
    // Gbit/s to bytes/s.
    node.number("inter_node_nic_gbit_per_s", nicRate, 1e9 / 8);
    spec.interNodeBandwidthPerNode = static_cast<double>(nics) * nicRate;
    node.number("inter_node_latency_us", spec.interNodeLatency, kMicro);
    node.number("host_memory_gb", spec.hostMemoryBytes, kGB);
    node.number("host_memory_bandwidth_gb_per_s", spec.hostMemoryBandwidth,
                kGB);
    node.number("pcie_gb_per_s_per_gpu", spec.pcieBandwidthPerGpu, kGB);
    node.number("nvme_capacity_tb", spec.nvmeBytes, 1e12);
    node.number("nvme_bandwidth_gb_per_s", spec.nvmeBandwidth, kGB);
    node.rejectUnknownKeys();
  }
  if (calObj) {
    Calibration &c = spec.calibration;
    ObjectReader cal(calObj, "calibration", fileName, error);
    cal.number("gemm_max_efficiency", c.gemmMaxEfficiency, 1, true, 1.0);
    cal.number("gemm_half_dim", c.gemmHalfDim, 1, true);
    cal.number("memory_bound_efficiency", c.memoryBoundEfficiency, 1, true,
               1.0);
    cal.number("intra_node_collective_efficiency",
               c.intraNodeCollectiveEfficiency, 1, true, 1.0);
    cal.number("inter_node_collective_efficiency",
               c.interNodeCollectiveEfficiency, 1, true, 1.0);
    cal.number("overlap_slowdown", c.overlapSlowdown, 1, true, 1.0,
               /*allowZero=*/true);
    cal.number("reserved_gb", c.reservedBytes, kGB, true, 0,
               /*allowZero=*/true);
    cal.rejectUnknownKeys();
  }
  if (!error.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), error);
  return spec;
}

llvm::Expected<ClusterSpec>
mlir::dsc::analysis::loadClusterSpec(llvm::StringRef path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buf =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf)
    return llvm::createStringError(
        buf.getError(), "cannot read cluster file '%s': %s", path.str().c_str(),
        buf.getError().message().c_str());
  return parseClusterSpec((*buf)->getBuffer(), path);
}
