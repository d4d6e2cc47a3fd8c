//===- DefaultCorpus.cpp - The embedded default training corpus -----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Compiles DefaultCorpus.inc into the library so `dsc-run` can train a model
// on real text with no data argument and no network.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Data.h"

using namespace dsc::rt;

namespace {
// A raw string literal keeps the text byte-exact and greppable in the tree.
const char kCorpus[] =
#include "DefaultCorpus.inc"
    ;
} // namespace

std::string_view dsc::rt::defaultCorpus() {
  return std::string_view(kCorpus, sizeof(kCorpus) - 1);
}

std::unique_ptr<ByteTokens> dsc::rt::defaultCorpusTokens() {
  return ByteTokens::fromText(std::string(defaultCorpus()),
                              "the embedded default corpus");
}
