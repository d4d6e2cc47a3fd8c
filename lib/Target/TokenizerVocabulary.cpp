//===- TokenizerVocabulary.cpp - a tokenizer file's vocabulary size -------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// GPT-NeoX configs name a tokenizer, not a vocabulary size: the model's
// embedding has as many rows as the tokenizer has ids (then padded, see
// NeoXConfig.cpp). Two of GPT-NeoX's tokenizer types keep their ids in a
// JSON file dsc can count: HFTokenizer (a `tokenizers` tokenizer.json:
// model.vocab plus added_tokens) and GPT2BPETokenizer (vocab.json, token to
// id). The size is the largest id plus one, as the tokenizers report it.
//
//===----------------------------------------------------------------------===//

#include "dsc/Target/GPTConfig.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// Raises `size` to one past every id in `vocab` (token -> id); false when
/// an id is not a non-negative integer.
bool countIds(const llvm::json::Object &vocab, int64_t &size) {
  for (const auto &entry : vocab) {
    std::optional<int64_t> id = entry.second.getAsInteger();
    if (!id || *id < 0)
      return false;
    size = std::max(size, *id + 1);
  }
  return true;
}

} // namespace

std::optional<int64_t> mlir::dsc::countTokenizerVocabulary(
    llvm::StringRef path, llvm::StringRef tokenizerType, std::string &error) {
  if (tokenizerType != "HFTokenizer" && tokenizerType != "GPT2BPETokenizer") {
    error = "dsc cannot count the vocabulary of tokenizer_type '" +
            tokenizerType.str() +
            "' from its file (it reads HFTokenizer and GPT2BPETokenizer "
            "files); give vocab_size in the config or --import-neox-vocab-size";
    return std::nullopt;
  }
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    error = "cannot read the vocab_file '" + path.str() +
            "': " + buffer.getError().message();
    return std::nullopt;
  }
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  if (!json) {
    error = "the vocab_file '" + path.str() +
            "' is not JSON: " + llvm::toString(json.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *root = json->getAsObject();
  int64_t size = 0;
  bool ok = root != nullptr;
  if (ok && tokenizerType == "GPT2BPETokenizer") {
    ok = countIds(*root, size);
  } else if (ok) {
    const llvm::json::Object *model = root->getObject("model");
    const llvm::json::Object *vocab =
        model ? model->getObject("vocab") : nullptr;
    ok = vocab && countIds(*vocab, size);
    if (const llvm::json::Array *added = root->getArray("added_tokens"))
      for (const llvm::json::Value &token : *added) {
        const llvm::json::Object *t = token.getAsObject();
        std::optional<int64_t> id = t ? t->getInteger("id") : std::nullopt;
        ok = ok && id && *id >= 0;
        if (ok)
          size = std::max(size, *id + 1);
      }
  }
  if (!ok || size == 0) {
    error = "the vocab_file '" + path.str() + "' is not a " +
            tokenizerType.str() +
            (tokenizerType == "HFTokenizer"
                 ? " file (a tokenizer.json with model.vocab, token -> id)"
                 : " file (vocab.json, token -> id)");
    return std::nullopt;
  }
  return size;
}
