//===- ConfigValues.cpp - typed reads of a config's keys ------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Config/ConfigValues.h"

#include "dsc/Runtime/Error.h"

#include <cmath>

using namespace dsc::config;

void ConfigValues::fail(const std::string &key, const std::string &why) const {
  throw dsc::rt::Error(describe(key, why));
}

const llvm::json::Object &ConfigValues::object(const llvm::json::Value &v,
                                               const std::string &key) const {
  if (const llvm::json::Object *o = v.getAsObject())
    return *o;
  fail(key, "'" + key + "' must be an object");
}

double ConfigValues::number(const llvm::json::Object &o, const std::string &key,
                            double fallback) const {
  const llvm::json::Value *v = o.get(key);
  if (!v)
    return fallback;
  if (std::optional<double> d = v->getAsNumber())
    return *d;
  fail(key, "'" + key + "' must be a number");
}

int64_t ConfigValues::integer(const llvm::json::Object &o,
                              const std::string &key, int64_t fallback) const {
  const llvm::json::Value *v = o.get(key);
  if (!v)
    return fallback;
  if (std::optional<int64_t> i = v->getAsInteger())
    return *i;
  if (std::optional<double> d = v->getAsNumber();
      d && std::floor(*d) == *d && std::abs(*d) < 9e15)
    return int64_t(*d);
  fail(key, "'" + key + "' must be an integer");
}

bool ConfigValues::boolean(const llvm::json::Object &o, const std::string &key,
                           bool fallback) const {
  const llvm::json::Value *v = o.get(key);
  if (!v)
    return fallback;
  if (std::optional<bool> b = v->getAsBoolean())
    return *b;
  fail(key, "'" + key + "' must be true or false");
}

std::string ConfigValues::string(const llvm::json::Object &o,
                                 const std::string &key,
                                 const std::string &fallback) const {
  const llvm::json::Value *v = o.get(key);
  if (!v)
    return fallback;
  if (std::optional<llvm::StringRef> s = v->getAsString())
    return s->str();
  fail(key, "'" + key + "' must be a string");
}
