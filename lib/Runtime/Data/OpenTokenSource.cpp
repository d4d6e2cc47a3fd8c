//===- OpenTokenSource.cpp - Map a --data argument to a token source ------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// One place decides what a data argument means, so every tool accepts the
// same spellings and gives the same error for a path that is not there.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Data.h"

#include <sys/stat.h>

using namespace dsc::rt;

namespace {
bool isFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
} // namespace

std::unique_ptr<TokenSource> dsc::rt::openTokenSource(const std::string &spec,
                                                      int64_t modelVocab) {
  if (spec.empty() || spec == "default")
    return defaultCorpusTokens();
  std::string prefix = spec;
  if (endsWith(spec, ".bin") || endsWith(spec, ".idx"))
    prefix = spec.substr(0, spec.size() - 4);
  if (isFile(prefix + ".idx"))
    return IndexedDataset::open(prefix, modelVocab);
  if (prefix != spec)
    throw Error("data '" + spec + "': no index '" + prefix +
                ".idx' next to it (a Megatron indexed dataset needs both "
                ".bin and .idx)");
  if (isFile(spec))
    return ByteTokens::fromFile(spec);
  throw Error("data '" + spec +
              "' is neither a file (read as bytes), nor the prefix of a "
              "Megatron indexed dataset (PREFIX.bin + PREFIX.idx), nor "
              "'default' (the embedded corpus)");
}
