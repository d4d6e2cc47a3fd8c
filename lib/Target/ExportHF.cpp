//===- ExportHF.cpp - dsc-translate --export-hf ---------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A trained dsc state back to a Hugging Face directory: the parameters of a
// checkpoint saved by any plan, each read whole, mapped to the family's
// tensors by the import's own mapping run backwards (mapHFTensor: the
// fused parameters split again, the transposes and GPT-NeoX's per-head QKV
// order undone), in config.json's dtype, written as model.safetensors with
// the config beside it, as transformers' save_pretrained lays them out.
//
//===----------------------------------------------------------------------===//

#include "dsc/Target/HFModel.h"

#include "dsc/Dialect/Dsc/IR/DscDialect.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Target/GPTGraphBuilder.h"

#include "dsc/Runtime/FloatConvert.h"
#include "dsc/Runtime/WeightsCheckpoint.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <map>
#include <set>

using namespace mlir;
using namespace mlir::dsc;
using ::dsc::rt::DType;
using ::dsc::rt::WholeTensor;

namespace {

/// config.json's dtype ("dtype", or transformers 4's "torch_dtype").
std::optional<DType> configDType(const llvm::json::Object &config) {
  for (const char *key : {"dtype", "torch_dtype"})
    if (std::optional<llvm::StringRef> s = config.getString(key)) {
      if (*s == "float32")
        return DType::F32;
      if (*s == "bfloat16")
        return DType::BF16;
      if (*s == "float16")
        return DType::F16;
    }
  return std::nullopt;
}

} // namespace

bool mlir::dsc::exportHF(const std::string &checkpoint,
                         const std::string &configPath,
                         const std::string &outDir, std::string &error) {
  auto text = llvm::MemoryBuffer::getFile(configPath);
  if (!text) {
    error = "cannot read '" + configPath + "': " + text.getError().message();
    return false;
  }
  MLIRContext context;
  context.loadDialect<DscDialect, func::FuncDialect>();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    llvm::raw_string_ostream(diagnostics) << d.str();
    return success();
  });
  std::optional<HFModel> model =
      parseHFConfig((*text)->getBuffer(), configPath, HFImportOptions(),
                    UnknownLoc::get(&context));
  if (!model) {
    error = diagnostics;
    return false;
  }
  std::vector<WholeTensor> params;
  if (!::dsc::rt::readCheckpointParameters(checkpoint, params, error))
    return false;
  std::map<std::string, const WholeTensor *> byName;
  for (const WholeTensor &t : params)
    byName[t.name] = &t;
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*text)->getBuffer());
  // The tensors keep the checkpoint's dtype unless config.json names one.
  DType dtype = DType::F32;
  bool convert = false;
  if (!json) {
    llvm::consumeError(json.takeError());
  } else if (const llvm::json::Object *root = json->getAsObject()) {
    if (std::optional<DType> d = configDType(*root)) {
      dtype = *d;
      convert = true;
    }
  }

  // The parameters this model has (its biases, its untied head) are its
  // graph's: the family's tensors whose parameter the graph declares are
  // the ones to write, and each must be in the checkpoint.
  OwningOpRef<ModuleOp> graph =
      buildGPTGraph(model->config, UnknownLoc::get(&context));
  if (!graph) {
    error = "cannot build the graph of '" + configPath + "': " + diagnostics;
    return false;
  }
  std::set<std::string> declared, written;
  for (auto param : graph->getOps<ParameterOp>())
    declared.insert(param.getSymName().str());

  std::vector<WholeTensor> out;
  for (const std::string &name : hfTensorNames(*model)) {
    std::optional<HFTensorMapping> m = mapHFTensor(*model, name);
    if (!m || !declared.count(m->dscName))
      continue;
    written.insert(m->dscName);
    auto it = byName.find(m->dscName);
    if (it == byName.end()) {
      error = "the checkpoint '" + checkpoint + "' has no parameter '" +
              (m ? m->dscName : name) + "' for the " + model->architecture +
              " tensor '" + name + "' (is it this model's checkpoint?)";
      return false;
    }
    WholeTensor t;
    if (!exportHFTensor(*model, *m, *it->second, name, t, error))
      return false;
    if (convert && dtype != t.dtype) {
      const size_t n = t.bytes.size() / ::dsc::rt::dtypeSize(t.dtype);
      std::vector<uint8_t> converted(n * ::dsc::rt::dtypeSize(dtype));
      ::dsc::rt::convertFloats(t.bytes.data(), t.dtype, converted.data(),
                               dtype, n);
      t.bytes = std::move(converted);
      t.dtype = dtype;
    }
    out.push_back(std::move(t));
  }
  for (const std::string &param : declared)
    if (!written.count(param)) {
      error = "the " + model->architecture + " graph's parameter '" + param +
              "' has no tensor in transformers' layout";
      return false;
    }
  if (std::error_code ec = llvm::sys::fs::create_directories(outDir)) {
    error = "cannot create '" + outDir + "': " + ec.message();
    return false;
  }
  llvm::SmallString<256> weights(outDir), config(outDir);
  llvm::sys::path::append(weights, "model.safetensors");
  llvm::sys::path::append(config, "config.json");
  if (!::dsc::rt::writeSafetensorsTensors(std::string(weights), out,
                                          {{"format", "pt"}}, error))
    return false;
  std::error_code ec;
  llvm::raw_fd_ostream os(config, ec);
  if (ec) {
    error = "cannot write '" + std::string(config) + "': " + ec.message();
    return false;
  }
  os << (*text)->getBuffer();
  return true;
}
