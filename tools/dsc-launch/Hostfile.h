//===- Hostfile.h - DeepSpeed's hostfile and resource filters ---*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The allocation dsc-launch starts ranks on: hosts in hostfile order, each
// with the slot indices it offers. Read from DeepSpeed's hostfile format
// ("worker-0 slots=8", # comments, blank lines) and narrowed the way
// DeepSpeed's runner does (--include/--exclude "a@b:0,2", --num_nodes,
// --num_gpus), so a DeepSpeed user's hostfile and flags mean the same here.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_DSCLAUNCH_HOSTFILE_H
#define DSC_TOOLS_DSCLAUNCH_HOSTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace dsc::launch {

/// One host of the allocation and the slot indices (devices) used on it.
struct Host {
  std::string name;
  /// The slots the hostfile gives it (slots=N): indices 0..N-1.
  int declaredSlots = 0;
  /// The slots in use after the filters, ascending.
  std::vector<int> slots;
};

using Allocation = std::vector<Host>;

/// Parses hostfile text. `file` names it in messages ("F:3: ..."). Errors
/// on a line that is not "hostname slots=N", on slots that are not a
/// positive integer, on a host listed twice, and on a file with no host.
llvm::Expected<Allocation> parseHostfile(llvm::StringRef text,
                                         llvm::StringRef file);

/// Reads and parses the hostfile at `path`.
llvm::Expected<Allocation> readHostfile(llvm::StringRef path);

/// The selection flags, as DeepSpeed's runner takes them.
struct Selection {
  std::string include, exclude;
  int numNodes = -1; // -1: not given
  int numGpus = -1;
};

/// Narrows `hosts` by `sel`: include and exclude ("NAME[:SLOT[,SLOT...]]"
/// joined by '@') are mutually exclusive and exclude num_nodes/num_gpus;
/// num_nodes keeps the first N hosts, num_gpus the first N slots of each.
/// Errors name an unknown host or slot and a malformed spec. Hostfile
/// order is kept whatever order the spec names hosts in, so that ranks map
/// to hosts as the hostfile lists them.
llvm::Expected<Allocation> selectResources(const Allocation &hosts,
                                           const Selection &sel);

/// Σ slots in use.
int worldSize(const Allocation &hosts);

/// "a: 2, b: 4": each host's slots in use ("" for no host).
std::string slotSummary(const Allocation &hosts);

} // namespace dsc::launch

#endif // DSC_TOOLS_DSCLAUNCH_HOSTFILE_H
