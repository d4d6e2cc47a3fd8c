//===- ByteTokens.cpp - Byte-level token source ---------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Any file is a token stream with a vocab of 256: the zero-setup data path
// (no tokenizer) for examples, tests and the embedded corpus.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Data.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

using namespace dsc::rt;

TokenSource::~TokenSource() = default;

std::unique_ptr<ByteTokens> ByteTokens::fromFile(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw Error("byte-level data file '" + path + "' is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("cannot open byte-level data file '" + path +
                "': " + std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad())
    throw Error("cannot read byte-level data file '" + path +
                "': " + std::strerror(errno));
  std::string bytes = std::move(buf).str();
  if (bytes.empty())
    throw Error("byte-level data file '" + path + "' is empty");
  return std::unique_ptr<ByteTokens>(
      new ByteTokens(std::move(bytes), "byte file '" + path + "'"));
}

std::unique_ptr<ByteTokens> ByteTokens::fromText(std::string text,
                                                 std::string name) {
  return std::unique_ptr<ByteTokens>(
      new ByteTokens(std::move(text), std::move(name)));
}

void ByteTokens::read(int64_t offset, int64_t count, int32_t *out) const {
  if (offset < 0 || count < 0 || offset > size() || count > size() - offset)
    throw Error(describe() + ": read of " + std::to_string(count) +
                " tokens at offset " + std::to_string(offset) +
                " is outside its " + std::to_string(size()) + " tokens");
  const auto *p = reinterpret_cast<const unsigned char *>(bytes.data());
  for (int64_t i = 0; i < count; ++i)
    out[i] = int32_t(p[offset + i]);
}
