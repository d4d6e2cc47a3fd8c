//===- Hostfile.cpp - DeepSpeed's hostfile and resource filters -----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The grammar is DeepSpeed's (deepspeed/launcher/runner.py: _parse_hostfile,
// parse_resource_filter, parse_inclusion_exclusion), read more strictly: a
// line with words after "slots=N" or a zero slot count is an error here,
// where DeepSpeed's regular expression lets it through, because a launcher
// that guesses starts the wrong number of ranks on someone's cluster.
//
//===----------------------------------------------------------------------===//

#include "Hostfile.h"
#include "LaunchError.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cstring>
#include <map>

using namespace dsc::launch;
using llvm::StringRef;

llvm::Expected<Allocation> dsc::launch::parseHostfile(StringRef text,
                                                      StringRef file) {
  Allocation hosts;
  llvm::StringMap<int> firstLine;
  llvm::SmallVector<StringRef> lines;
  text.split(lines, '\n');
  for (auto [index, rawLine] : llvm::enumerate(lines)) {
    const int lineNo = int(index) + 1;
    // A trailing comment is allowed too: hostfiles written for Open MPI,
    // whose format DeepSpeed's borrows, often carry one.
    StringRef line = rawLine.split('#').first.trim();
    if (line.empty())
      continue;
    llvm::SmallVector<StringRef> words;
    line.split(words, ' ', -1, /*KeepEmpty=*/false);
    // Tabs separate words as well as spaces do.
    llvm::SmallVector<StringRef> fields;
    for (StringRef word : words) {
      llvm::SmallVector<StringRef> parts;
      word.split(parts, '\t', -1, /*KeepEmpty=*/false);
      fields.append(parts.begin(), parts.end());
    }
    if (fields.size() != 2 || !fields[1].starts_with("slots="))
      return fail(file + ":" + llvm::Twine(lineNo) + ": malformed line '" +
                  line + "': expected 'hostname slots=N'");
    StringRef count = fields[1].drop_front(strlen("slots="));
    unsigned slots = 0;
    if (count.getAsInteger(10, slots) || slots == 0 || slots > 1u << 20)
      return fail(file + ":" + llvm::Twine(lineNo) + ": host '" + fields[0] +
                  "': slots must be a positive integer, got '" + count + "'");
    auto [it, inserted] = firstLine.try_emplace(fields[0], lineNo);
    if (!inserted)
      return fail(file + ":" + llvm::Twine(lineNo) + ": host '" + fields[0] +
                  "' is listed twice (first on line " +
                  llvm::Twine(it->second) + ")");
    Host host;
    host.name = fields[0].str();
    host.declaredSlots = int(slots);
    for (int s = 0; s < int(slots); ++s)
      host.slots.push_back(s);
    hosts.push_back(std::move(host));
  }
  if (hosts.empty())
    return fail(file + ": no hosts: expected lines 'hostname slots=N'");
  return hosts;
}

llvm::Expected<Allocation> dsc::launch::readHostfile(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return fail("cannot read hostfile '" + path +
                "': " + buffer.getError().message());
  return parseHostfile((*buffer)->getBuffer(), path);
}

namespace {
/// One host named in an --include/--exclude spec; no slots: the whole host.
struct NodeSpec {
  std::vector<int> slots;
};
} // namespace

/// Parses "NAME[:SLOT[,SLOT...]]@..." into host -> slots (merged, sorted and
/// unique when a host is named twice, as DeepSpeed's
/// parse_node_config_list does).
static llvm::Expected<std::map<std::string, NodeSpec>>
parseSpec(StringRef spec, StringRef flag) {
  std::map<std::string, NodeSpec> nodes;
  llvm::SmallVector<StringRef> configs;
  spec.split(configs, '@');
  for (StringRef config : configs) {
    auto [name, slotList] = config.split(':');
    name = name.trim();
    if (name.empty())
      return fail(flag + " '" + spec + "': empty host name (the form is " +
                  "host1@host2:0,2)");
    NodeSpec &node = nodes[name.str()];
    if (!config.contains(':'))
      continue;
    llvm::SmallVector<StringRef> slots;
    slotList.split(slots, ',');
    for (StringRef slot : slots) {
      unsigned index = 0;
      if (slot.trim().getAsInteger(10, index) || index > 1u << 20)
        return fail(flag + " '" + spec + "': slot '" + slot + "' of host '" +
                    name + "' is not a slot index (0, 1, ...)");
      node.slots.push_back(int(index));
    }
  }
  for (auto &[name, node] : nodes) {
    llvm::sort(node.slots);
    node.slots.erase(std::unique(node.slots.begin(), node.slots.end()),
                     node.slots.end());
  }
  return nodes;
}

static std::string hostNames(const Allocation &hosts) {
  std::string names;
  for (const Host &host : hosts)
    names += (names.empty() ? "" : ", ") + host.name;
  return names;
}

llvm::Expected<Allocation> dsc::launch::selectResources(const Allocation &hosts,
                                                        const Selection &sel) {
  if (!sel.include.empty() && !sel.exclude.empty())
    return fail("--include and --exclude are mutually exclusive");
  if ((!sel.include.empty() || !sel.exclude.empty()) &&
      (sel.numNodes != -1 || sel.numGpus != -1))
    return fail("--num_nodes/--num_gpus cannot be combined with "
                "--include/--exclude (as in DeepSpeed's launcher)");

  Allocation selected = hosts;
  const bool including = !sel.include.empty();
  if (including || !sel.exclude.empty()) {
    StringRef flag = including ? "--include" : "--exclude";
    auto nodes = parseSpec(including ? sel.include : sel.exclude, flag);
    if (!nodes)
      return nodes.takeError();
    // Checked against the hostfile before anything changes, so that the
    // first unknown name is reported whatever order the spec has.
    for (auto &[name, node] : *nodes) {
      auto host =
          llvm::find_if(hosts, [&](const Host &h) { return h.name == name; });
      if (host == hosts.end())
        return fail(flag + ": host '" + name + "' is not in the hostfile " +
                    "(hosts: " + hostNames(hosts) + ")");
      for (int slot : node.slots)
        if (slot >= host->declaredSlots)
          return fail(flag + ": host '" + name + "' has no slot " +
                      llvm::Twine(slot) + " (its slots are 0-" +
                      llvm::Twine(host->declaredSlots - 1) + ")");
    }
    for (Host &host : selected) {
      auto node = nodes->find(host.name);
      if (including) {
        if (node == nodes->end())
          host.slots.clear();
        else if (!node->second.slots.empty())
          host.slots = node->second.slots;
      } else if (node != nodes->end()) {
        if (node->second.slots.empty())
          host.slots.clear();
        else
          llvm::erase_if(host.slots, [&](int s) {
            return llvm::is_contained(node->second.slots, s);
          });
      }
    }
    llvm::erase_if(selected, [](const Host &h) { return h.slots.empty(); });
    if (selected.empty())
      return fail(flag + " '" + (including ? sel.include : sel.exclude) +
                  "' leaves no slot to run on");
  }

  if (sel.numNodes != -1) {
    if (sel.numNodes < 1)
      return fail("--num_nodes must be at least 1, got " +
                  llvm::Twine(sel.numNodes));
    if (sel.numNodes > int(selected.size()))
      return fail("--num_nodes " + llvm::Twine(sel.numNodes) + ", but there " +
                  (selected.size() == 1 ? "is " : "are ") +
                  llvm::Twine(selected.size()) + " host" +
                  (selected.size() == 1 ? "" : "s") + " (" +
                  hostNames(selected) + ")");
    selected.resize(sel.numNodes);
  }
  if (sel.numGpus != -1) {
    if (sel.numGpus < 1)
      return fail("--num_gpus must be at least 1, got " +
                  llvm::Twine(sel.numGpus));
    for (Host &host : selected) {
      if (host.declaredSlots < sel.numGpus)
        return fail("--num_gpus " + llvm::Twine(sel.numGpus) + ", but host '" +
                    host.name + "' has " + llvm::Twine(host.declaredSlots) +
                    " slot" + (host.declaredSlots == 1 ? "" : "s"));
      host.slots.resize(sel.numGpus);
      for (int s = 0; s < sel.numGpus; ++s)
        host.slots[s] = s;
    }
  }
  return selected;
}

int dsc::launch::worldSize(const Allocation &hosts) {
  int world = 0;
  for (const Host &host : hosts)
    world += int(host.slots.size());
  return world;
}

std::string dsc::launch::slotSummary(const Allocation &hosts) {
  std::string text;
  for (const Host &host : hosts)
    text += (text.empty() ? "" : ", ") + host.name + ": " +
            std::to_string(host.slots.size());
  return text;
}
