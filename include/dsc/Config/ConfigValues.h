//===- ConfigValues.h - typed reads of a config's keys ----------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The typed reads every training-config reader makes (the ds_config reader,
// dsc-run's GPT-NeoX training-key reader): an absent key gives the
// fallback; a value of the wrong type is refused naming the key, in the
// words the reader's `describe` gives (the file and the key's line).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_CONFIG_CONFIGVALUES_H
#define DSC_CONFIG_CONFIGVALUES_H

#include "llvm/Support/JSON.h"

#include <cstdint>
#include <functional>
#include <string>

namespace dsc::config {

class ConfigValues {
public:
  /// The whole error message for `why` about `key` (the file, its line).
  using Describe = std::function<std::string(const std::string &key,
                                             const std::string &why)>;

  explicit ConfigValues(Describe describe) : describe(std::move(describe)) {}

  /// Throws rt::Error with `describe(key, why)`.
  [[noreturn]] void fail(const std::string &key, const std::string &why) const;

  const llvm::json::Object &object(const llvm::json::Value &v,
                                   const std::string &key) const;
  double number(const llvm::json::Object &o, const std::string &key,
                double fallback) const;
  /// Also takes a whole number written as a float (5e8, as DeepSpeed's
  /// examples write sizes).
  int64_t integer(const llvm::json::Object &o, const std::string &key,
                  int64_t fallback) const;
  bool boolean(const llvm::json::Object &o, const std::string &key,
               bool fallback) const;
  std::string string(const llvm::json::Object &o, const std::string &key,
                     const std::string &fallback) const;

private:
  Describe describe;
};

} // namespace dsc::config

#endif // DSC_CONFIG_CONFIGVALUES_H
