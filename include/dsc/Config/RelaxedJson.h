//===- RelaxedJson.h - DeepSpeed's config syntax ----------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// DeepSpeed reads a ds_config file with hjson (deepspeed/runtime/config.py:
// `hjson.load(..., object_pairs_hook=dict_raise_error_on_duplicate_keys)`),
// so configs in the wild carry comments and trailing commas, and a key
// written twice in one object is an error ("Duplicate keys in DeepSpeed
// config: [...]"). This turns that much of hjson into JSON for LLVM's
// parser, keeping every character's line, and finds duplicate keys, which
// LLVM's parser would silently resolve to the last one. Other hjson forms
// (quoteless strings, members without commas) stay for the JSON parser to
// refuse.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_CONFIG_RELAXEDJSON_H
#define DSC_CONFIG_RELAXEDJSON_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace dsc::config {

/// `text` with its `#`, `//` and `/* */` comments and its trailing commas
/// (a comma before `}` or `]`) blanked out, newlines kept, so that lines
/// and columns are the file's. On a duplicate key or an unterminated
/// comment or string, returns "" and sets `error` (with the line).
std::string relaxedJsonToJson(llvm::StringRef text, std::string &error);

} // namespace dsc::config

#endif // DSC_CONFIG_RELAXEDJSON_H
