//===- RelaxedJson.cpp - DeepSpeed's config syntax ------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "dsc/Config/RelaxedJson.h"

#include <set>
#include <vector>

std::string dsc::config::relaxedJsonToJson(llvm::StringRef text,
                                           std::string &error) {
  std::string out = text.str();
  const size_t npos = std::string::npos;
  unsigned line = 1;
  // Blanks [from, to) but its newlines, counting them.
  auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to; ++k) {
      if (out[k] == '\n')
        ++line;
      else
        out[k] = ' ';
    }
  };
  struct Scope {
    bool object;
    std::set<std::string> keys;
  };
  std::vector<Scope> scopes;
  // A comma no value has followed yet: a trailing one if `}` or `]` comes.
  size_t openComma = npos;
  // The last string, while only blanks and comments follow it: a key if a
  // `:` comes next.
  bool pendingString = false;
  std::string pending;
  for (size_t i = 0; i < out.size();) {
    const char c = out[i];
    const char next = i + 1 < out.size() ? out[i + 1] : '\0';
    if (c == '\n' || c == ' ' || c == '\t' || c == '\r') {
      line += c == '\n';
      ++i;
      continue;
    }
    if (c == '#' || (c == '/' && next == '/')) {
      size_t end = out.find('\n', i);
      end = end == npos ? out.size() : end;
      blank(i, end);
      i = end;
      continue;
    }
    if (c == '/' && next == '*') {
      const size_t end = out.find("*/", i + 2);
      if (end == npos) {
        error = "line " + std::to_string(line) + ": a /* comment is not closed";
        return "";
      }
      blank(i, end + 2);
      i = end + 2;
      continue;
    }
    if (c == '"') {
      size_t j = i + 1;
      while (j < out.size() && out[j] != '"' && out[j] != '\n')
        j += out[j] == '\\' ? 2 : 1;
      if (j >= out.size() || out[j] != '"') {
        error = "line " + std::to_string(line) + ": a string is not closed";
        return "";
      }
      pending = out.substr(i + 1, j - i - 1);
      pendingString = true;
      openComma = npos;
      i = j + 1;
      continue;
    }
    if (c == ':' && pendingString && !scopes.empty() && scopes.back().object &&
        !scopes.back().keys.insert(pending).second) {
      error = "line " + std::to_string(line) + ": key '" + pending +
              "' appears twice in one object (DeepSpeed refuses it: "
              "\"Duplicate keys in DeepSpeed config: ['" +
              pending + "']\")";
      return "";
    }
    pendingString = false;
    if (c == ',') {
      openComma = i;
    } else if (c == '}' || c == ']') {
      if (openComma != npos)
        out[openComma] = ' ';
      openComma = npos;
      if (!scopes.empty())
        scopes.pop_back();
    } else {
      openComma = npos;
      if (c == '{' || c == '[')
        scopes.push_back({c == '{', {}});
    }
    ++i;
  }
  return out;
}
