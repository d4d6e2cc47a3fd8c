//===- BytePairModel.cpp - HF's BPE model: vocabulary and merges ----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A transcription of HF's BPE::merge_word and Word::merge_all (dropout
// none): symbols in a doubly linked array, a min-heap of (rank, position),
// an entry skipped when its pair no longer merges into the same id.
//
//===----------------------------------------------------------------------===//

#include "BytePairModel.h"
#include "Unicode.h"

#include "llvm/ADT/STLExtras.h"

#include <queue>

using namespace dsc::text;

namespace {

constexpr size_t kCacheCapacity = 10000;
constexpr size_t kMaxCachedWordBytes = 256;

struct Symbol {
  uint32_t id;
  int64_t prev;
  int64_t next;
  size_t len; // bytes; 0 once merged into its left neighbour
};

struct Candidate {
  uint32_t rank;
  size_t pos;
  uint32_t newId;
  // std::priority_queue is a max-heap: "less" is the higher rank, then the
  // later position, so the top is HF's next merge.
  bool operator<(const Candidate &o) const {
    if (rank != o.rank)
      return rank > o.rank;
    return pos > o.pos;
  }
};

} // namespace

std::vector<uint32_t> BytePairModel::mergeWord(llvm::StringRef word) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](uint32_t id, size_t len) {
    int64_t index = static_cast<int64_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, len});
  };
  // A pending <unk> and its byte length (0: none pending).
  size_t unkLen = 0;
  for (size_t pos = 0; pos < word.size();) {
    size_t len = utf8Length(static_cast<unsigned char>(word[pos]));
    llvm::StringRef ch = word.substr(pos, len);
    pos += len;
    auto it = vocab.find(ch);
    if (it != vocab.end()) {
      if (unkLen) {
        add(*unkId, unkLen);
        unkLen = 0;
      }
      add(it->second, len);
      continue;
    }
    // HF falls back only when every byte has a token, and pushes them
    // without flushing a pending <unk> first.
    if (byteFallback && llvm::all_of(ch, [&](char b) {
          return byteIds[static_cast<unsigned char>(b)].has_value();
        })) {
      for (char b : ch)
        add(*byteIds[static_cast<unsigned char>(b)], 1);
      continue;
    }
    if (!unkId)
      continue;
    if (unkLen && fuseUnk) {
      unkLen += len;
      continue;
    }
    if (unkLen)
      add(*unkId, unkLen);
    unkLen = len;
  }
  if (unkLen)
    add(*unkId, unkLen);
  if (!symbols.empty())
    symbols.back().next = -1;

  std::priority_queue<Candidate> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    auto it = merges.find(pairKey(symbols[i].id, symbols[i + 1].id));
    if (it != merges.end())
      queue.push({it->second.rank, i, it->second.newId});
  }
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol &cur = symbols[top.pos];
    if (cur.len == 0 || cur.next < 0)
      continue;
    size_t nextPos = static_cast<size_t>(cur.next);
    Symbol right = symbols[nextPos];
    auto it = merges.find(pairKey(cur.id, right.id));
    if (it == merges.end() || it->second.newId != top.newId)
      continue;
    cur.id = top.newId;
    cur.len += right.len;
    cur.next = right.next;
    symbols[nextPos].len = 0;
    if (right.next >= 0 && static_cast<size_t>(right.next) < symbols.size())
      symbols[static_cast<size_t>(right.next)].prev =
          static_cast<int64_t>(top.pos);
    if (cur.prev >= 0) {
      auto m = merges.find(pairKey(symbols[cur.prev].id, cur.id));
      if (m != merges.end())
        queue.push(
            {m->second.rank, static_cast<size_t>(cur.prev), m->second.newId});
    }
    if (cur.next >= 0) {
      auto m = merges.find(pairKey(cur.id, symbols[cur.next].id));
      if (m != merges.end())
        queue.push({m->second.rank, top.pos, m->second.newId});
    }
  }
  std::vector<uint32_t> ids;
  for (const Symbol &s : symbols)
    if (s.len != 0)
      ids.push_back(s.id);
  return ids;
}

void BytePairModel::tokenize(llvm::StringRef word,
                             std::vector<uint32_t> &out) const {
  if (word.empty())
    return;
  if (ignoreMerges) {
    auto it = vocab.find(word);
    if (it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  bool cacheable = word.size() < kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto it = cache.find(word);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<uint32_t> ids = mergeWord(word);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    if (cache.size() < kCacheCapacity)
      cache.try_emplace(word, std::move(ids));
  }
}
