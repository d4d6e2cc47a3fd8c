//===- ImportHF.cpp - dsc-translate --import-hf ---------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The `--import-hf` translation: a Hugging Face model's config.json -> the
// dsc loss graph; with --import-hf-checkpoint=DIR also its weights (the
// model.safetensors beside it, or the shards its index names) as a step-0
// dsc checkpoint, every tensor mapped to its dsc parameter and checked
// against the graph's shapes.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscDialect.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Runtime/WeightsCheckpoint.h"
#include "dsc/Target/GPTGraphBuilder.h"
#include "dsc/Target/HFModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <set>

using namespace mlir;
using namespace mlir::dsc;

static llvm::cl::opt<std::string> hfCheckpoint(
    "import-hf-checkpoint", llvm::cl::init(""),
    llvm::cl::desc("With --import-hf: write the model's weights as a step-0 "
                   "dsc checkpoint into this directory (dsc-run --load)"));
static llvm::cl::opt<int64_t>
    hfSeqLength("import-hf-seq-length", llvm::cl::init(0),
                llvm::cl::desc("With --import-hf: the training sequence "
                               "length (default: the model's positions)"));
static llvm::cl::opt<int64_t>
    hfMicroBatch("import-hf-micro-batch-size", llvm::cl::init(1),
                 llvm::cl::desc("With --import-hf: sequences per "
                                "micro-batch (default 1)"));
static llvm::cl::opt<int64_t> hfVocabMultiple(
    "import-hf-pad-vocab-to", llvm::cl::init(1),
    llvm::cl::desc("With --import-hf: pad the vocabulary with zero rows up "
                   "to a multiple of this (Megatron-LM's "
                   "--make-vocab-size-divisible-by, e.g. 128 so that tensor "
                   "slicing divides GPT-2's 50257); the padded rows are no "
                   "classes, and --export-hf leaves them out"));

namespace {

/// The safetensors files of the model in `dir`: model.safetensors, or the
/// shards model.safetensors.index.json names (each once, in name order).
LogicalResult weightFiles(StringRef dir, Location loc,
                          std::vector<std::string> &files) {
  llvm::SmallString<256> single(dir), index(dir);
  llvm::sys::path::append(single, "model.safetensors");
  llvm::sys::path::append(index, "model.safetensors.index.json");
  if (llvm::sys::fs::exists(single)) {
    files.push_back(single.str().str());
    return success();
  }
  auto buffer = llvm::MemoryBuffer::getFile(index);
  if (!buffer)
    return emitError(loc) << "'" << dir
                          << "' has neither model.safetensors nor "
                             "model.safetensors.index.json";
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  const llvm::json::Object *map =
      json && json->getAsObject() ? json->getAsObject()->getObject("weight_map")
                                  : nullptr;
  if (!map) {
    if (!json)
      llvm::consumeError(json.takeError());
    return emitError(loc) << "'" << index << "' has no \"weight_map\" object";
  }
  std::set<std::string> shards;
  for (const auto &[name, file] : *map) {
    std::optional<StringRef> f = file.getAsString();
    if (!f || f->contains('/') || *f == "..")
      return emitError(loc) << "'" << index << "': tensor '" << name.str()
                            << "' maps to something not a file name";
    shards.insert(f->str());
  }
  for (const std::string &s : shards) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, s);
    files.push_back(path.str().str());
  }
  return success();
}

/// Reads the weights, maps them onto the graph's parameters, and writes the
/// checkpoint. Every parameter must come from the files, once, in its shape.
LogicalResult importWeights(ModuleOp module, const HFModel &model,
                            StringRef dir, Location loc) {
  llvm::StringMap<ParameterOp> params;
  for (ParameterOp p : module.getOps<ParameterOp>())
    params[p.getSymName()] = p;
  std::vector<std::string> files;
  if (failed(weightFiles(dir, loc, files)))
    return failure();
  // Each tensor is checked against its parameter as it is converted; the
  // parameters dsc fuses from several tensors (Llama's q, k, v) once whole.
  std::vector<::dsc::rt::WholeTensor> out;
  std::set<std::string> seen;
  HFTensorConverter converter(model);
  auto check = [&](const ::dsc::rt::WholeTensor &t, const std::string &what,
                   const std::vector<int64_t> &hfShape) -> LogicalResult {
    auto it = params.find(t.name);
    if (it == params.end())
      return emitError(loc) << what << " (dsc '" << t.name
                            << "') has no parameter in the graph (is the "
                               "config's tie_word_embeddings right?)";
    ArrayRef<int64_t> shape = it->second.getTensorType().getShape();
    if (ArrayRef<int64_t>(t.shape) != shape) {
      auto diag = emitError(loc) << what << " has shape [";
      llvm::interleaveComma(hfShape, diag);
      if (hfShape != t.shape) {
        diag << "] (in dsc's layout [";
        llvm::interleaveComma(t.shape, diag);
        diag << "])";
      } else {
        diag << "]";
      }
      diag << " but config.json makes '" << t.name << "' [";
      llvm::interleaveComma(shape, diag);
      return diag << "]";
    }
    if (t.dtype == ::dsc::rt::DType::I32)
      return emitError(loc) << what << " is not a float tensor";
    if (!seen.insert(t.name).second)
      return emitError(loc) << what << " appears in two files";
    return success();
  };
  for (const std::string &file : files) {
    std::vector<::dsc::rt::WholeTensor> tensors;
    std::string error;
    if (!::dsc::rt::readSafetensorsTensors(file, tensors, error))
      return emitError(loc) << error;
    for (::dsc::rt::WholeTensor &t : tensors) {
      const std::string what = "'" + file + "': tensor '" + t.name + "'";
      const std::vector<int64_t> hfShape = t.shape;
      const size_t before = out.size();
      if (!converter.add(std::move(t), out, error))
        return emitError(loc) << "'" << file << "': " << error;
      if (out.size() > before && failed(check(out.back(), what, hfShape)))
        return failure();
    }
  }
  const size_t whole = out.size();
  std::string error;
  if (!converter.finish(out, error))
    return emitError(loc) << "'" << dir << "': " << error;
  for (size_t i = whole; i < out.size(); ++i)
    if (failed(check(out[i], ("'" + dir + "': the fusion of its tensors").str(),
                     out[i].shape)))
      return failure();
  for (const auto &entry : params)
    if (!seen.count(entry.getKey().str()))
      return emitError(loc) << "'" << dir << "' has no weights for parameter '"
                            << entry.getKey() << "'";
  if (!::dsc::rt::writeWeightsCheckpoint(hfCheckpoint, out,
                                         uint64_t(model.config.seed), error))
    return emitError(loc) << error;
  return success();
}

} // namespace

void mlir::dsc::registerImportHFTranslation() {
  TranslateToMLIRRegistration registration(
      "import-hf",
      "import a Hugging Face causal LM (its config.json; the weights beside "
      "it with --import-hf-checkpoint) as a dsc loss graph",
      [](llvm::SourceMgr &sourceMgr,
         MLIRContext *context) -> OwningOpRef<Operation *> {
        context->loadDialect<DscDialect, func::FuncDialect>();
        const llvm::MemoryBuffer *buffer =
            sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
        StringRef file = buffer->getBufferIdentifier();
        Location loc = FileLineColLoc::get(context, file, 1, 1);
        HFImportOptions options;
        options.seqLength = hfSeqLength;
        options.microBatchSize = hfMicroBatch;
        options.vocabMultiple = hfVocabMultiple;
        if (hfSeqLength < 0 || hfMicroBatch < 1 || hfVocabMultiple < 1) {
          emitError(loc) << "--import-hf-seq-length must be positive and "
                            "--import-hf-micro-batch-size and "
                            "--import-hf-pad-vocab-to at least 1";
          return nullptr;
        }
        std::optional<HFModel> model =
            parseHFConfig(buffer->getBuffer(), file, options, loc);
        if (!model)
          return nullptr;
        OwningOpRef<ModuleOp> module = buildGPTGraph(model->config, loc);
        if (failed(verify(*module)))
          return nullptr;
        if (!hfCheckpoint.empty() &&
            failed(importWeights(*module, *model,
                                 llvm::sys::path::parent_path(file), loc)))
          return nullptr;
        return module;
      },
      [](DialectRegistry &registry) {
        registry.insert<DscDialect, func::FuncDialect>();
      });
}
