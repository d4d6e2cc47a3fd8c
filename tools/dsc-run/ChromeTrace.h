//===- ChromeTrace.h - Chrome trace-event JSON writer -----------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Collects complete events ("ph": "X", ts/dur in microseconds) on named
// lanes and writes the JSON object chrome://tracing and Perfetto load.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_DSCRUN_CHROMETRACE_H
#define DSC_TOOLS_DSCRUN_CHROMETRACE_H

#include <cstdint>
#include <string>
#include <vector>

namespace dsc::run {

class ChromeTrace {
public:
  /// `process` names the pid lane group (e.g. "rank 0").
  explicit ChromeTrace(std::string process) : process(std::move(process)) {}

  /// Names lane `tid` (one per stream: "compute", later "comm", ...).
  void nameLane(int tid, const std::string &name);
  /// A complete event; `args` is a JSON object body ("\"k\": 1") or "".
  void add(const std::string &name, const std::string &category, int tid,
           double startUs, double durationUs, const std::string &args = "");
  size_t size() const { return events.size(); }

  /// Writes {"traceEvents": [...], "displayTimeUnit": "ms"}. Throws
  /// dsc::rt::Error naming the path if it cannot be written.
  void write(const std::string &path) const;

private:
  std::string process;
  std::vector<std::string> events;
};

} // namespace dsc::run

#endif // DSC_TOOLS_DSCRUN_CHROMETRACE_H
