//===- PeerWatch.h - naming a rank that died under mpirun -------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// When one process of an MPI job dies (killed, out of memory, a crash), the
// others are either blocked in a collective with it or ended by the
// launcher's SIGTERM, and neither says who died or what to do next. A
// PeerWatch runs beside each rank's training: it knows the pid and host of
// every rank, checks the ones on its own host every 100 ms and on SIGTERM,
// and when one is gone it prints which rank died, at which iteration, and
// the checkpoint to resume from, and ends this process with exit code 1.
// Every rank of a host names the same dead rank: the first one seen.
// Ranks on other hosts are left to the launcher (mpirun names them).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_DSCRUN_PEERWATCH_H
#define DSC_TOOLS_DSCRUN_PEERWATCH_H

#include "dsc/Runtime/Communicator.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dsc::run {

/// Where a run is, for messages about its failure.
class RunProgress {
public:
  explicit RunProgress(std::string saveDir) : saveDir(std::move(saveDir)) {}
  /// A step saved into the run's --save directory.
  void setSaved(const std::string &step) { setCheckpoint(step, saveDir); }
  void setIteration(int64_t i) { iteration.store(i); }
  int64_t currentIteration() const { return iteration.load(); }
  /// The newest complete checkpoint: a step directory, and what --load
  /// takes to resume from it (the save directory, whose `latest` names it,
  /// or the step itself).
  void setCheckpoint(const std::string &step, const std::string &loadArg);
  /// "the last complete checkpoint is 'ckpt/step-00000006' (dsc-run ...
  /// --load ckpt resumes from it, on this or another rank count)", or that
  /// none was saved.
  std::string resumeAdvice() const;

private:
  std::atomic<int64_t> iteration{0};
  mutable std::mutex mu;
  std::string saveDir, checkpoint, loadArg;
};

class PeerWatch {
public:
  /// Collective over `world`: every rank shares its host and pid. Starts
  /// the watch and takes SIGTERM until destroyed.
  PeerWatch(rt::Communicator &world, const RunProgress &progress);
  ~PeerWatch();
  PeerWatch(const PeerWatch &) = delete;
  PeerWatch &operator=(const PeerWatch &) = delete;

  /// The world rank of a peer on this host whose process is gone (exited,
  /// killed, or a zombie not yet reaped), or -1.
  int deadPeer() const;

private:
  void watch();
  [[noreturn]] void report(int seen, bool terminated) const;
  /// The dead rank another rank's report published for the job, or -1.
  int publishedDead() const;
  /// Publishes `dead` (a rank this one saw die, or -1) unless a report was
  /// first; returns the rank to name: the first published, else `dead`.
  int publishDead(int dead) const;

  const RunProgress &progress;
  int me = 0;
  std::vector<int64_t> pids; // per world rank; 0 for another host
  /// The job's marker file, where the first report names the dead rank.
  std::string marker;
  std::atomic<bool> stopping{false};
  std::thread thread;
};

} // namespace dsc::run

#endif // DSC_TOOLS_DSCRUN_PEERWATCH_H
