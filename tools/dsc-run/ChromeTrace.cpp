//===- ChromeTrace.cpp - Chrome trace-event JSON writer -------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Events are formatted as they are added (cheap, and the run's timing is
// taken around the instruction, not around this) and written at the end.
//
//===----------------------------------------------------------------------===//

#include "ChromeTrace.h"

#include "Metrics.h"

#include "dsc/Runtime/Error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

using namespace dsc::run;

void ChromeTrace::nameLane(int tid, const std::string &name) {
  events.push_back("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, "
                   "\"tid\": " +
                   std::to_string(tid) +
                   ", \"args\": {\"name\": " + jsonString(name) + "}}");
}

void ChromeTrace::add(const std::string &name, const std::string &category,
                      int tid, double startUs, double durationUs,
                      const std::string &args) {
  char times[96];
  std::snprintf(times, sizeof(times), "\"ts\": %.3f, \"dur\": %.3f", startUs,
                durationUs);
  std::string e =
      "{\"name\": " + jsonString(name) + ", \"cat\": " + jsonString(category) +
      ", \"ph\": \"X\", \"pid\": 0, \"tid\": " + std::to_string(tid) + ", " +
      times;
  if (!args.empty())
    e += ", \"args\": {" + args + "}";
  events.push_back(e + "}");
}

void ChromeTrace::write(const std::string &path) const {
  std::ofstream os(path, std::ios::trunc);
  if (!os)
    throw dsc::rt::Error("cannot open trace file '" + path +
                         "' for writing: " + std::strerror(errno));
  os << "{\"traceEvents\": [\n";
  os << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
        "{\"name\": "
     << jsonString(process) << "}}";
  for (const std::string &e : events)
    os << ",\n" << e;
  os << "\n],\n\"displayTimeUnit\": \"ms\"}\n";
  os.close();
  if (!os)
    throw dsc::rt::Error("cannot write trace file '" + path + "'");
}
