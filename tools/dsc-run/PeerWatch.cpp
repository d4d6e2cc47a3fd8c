//===- PeerWatch.cpp - naming a rank that died under mpirun ---------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The watch thread sleeps in poll(2) on a self-pipe: the SIGTERM handler
// writes a byte to it (write(2) is async-signal-safe; nothing else is done
// in the handler), the destructor writes one to stop it, and every 100 ms
// it wakes to look at its peers. A peer is dead when kill(pid, 0) fails with
// ESRCH or /proc/<pid>/stat says it is a zombie (killed, not yet reaped by
// its launcher).
//
// A rank that reports a death exits, and to a slower watch it then looks
// dead too: naming it would blame a rank that only saw the death. So the
// first report publishes the dead rank in a marker file of the job
// (link(2) of a written file: all or nothing, one winner) before anyone
// exits, and every report names the marker's rank when there is one.
//
// dsc-launch --elastic drops a dead rank's slot before it restarts, so it
// must learn which rank died: when it sets DSC_DEAD_RANK_FILE, the reports
// also write the dead rank there (O_EXCL: the first writer; all name the
// same rank). The path is in the job's --save directory, which every rank
// shares.
//
//===----------------------------------------------------------------------===//

#include "PeerWatch.h"

#include "dsc/Runtime/Checkpoint.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Fnv1a.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace dsc::run;
using namespace dsc::rt;

void RunProgress::setCheckpoint(const std::string &step,
                                const std::string &resumeWith) {
  std::lock_guard<std::mutex> lock(mu);
  checkpoint = step;
  loadArg = resumeWith;
}

std::string RunProgress::resumeAdvice() const {
  std::lock_guard<std::mutex> lock(mu);
  // The save directory's `latest` is the truth: a rank that reports a dead
  // peer may not yet have noted a save that every rank has committed (the
  // peer got past the save's last collective; this rank was descheduled).
  if (!saveDir.empty()) {
    try {
      const std::string step = resolveCheckpointStep(saveDir);
      return "the last complete checkpoint is '" + step + "' (add --load " +
             saveDir + " to resume from it, on this or another rank count)";
    } catch (const Error &) {
      // No step committed there yet: what this run loaded, if anything.
    }
  }
  if (!checkpoint.empty())
    return "the last complete checkpoint is '" + checkpoint + "' (add --load " +
           loadArg + " to resume from it, on this or another rank count)";
  if (!saveDir.empty())
    return "no checkpoint was completed in '" + saveDir + "' yet";
  return "no checkpoint was saved (--save DIR --save-interval K saves them)";
}

namespace {

/// The self-pipe's write end, for the signal handler; -1 when none.
std::atomic<int> wakeFd{-1};
std::atomic<bool> terminated{false};

extern "C" void onTerminate(int) {
  terminated.store(true);
  const int fd = wakeFd.load();
  if (fd >= 0) {
    const char byte = 't';
    [[maybe_unused]] ssize_t n = ::write(fd, &byte, 1);
  }
}

/// FNV-1a of the host name, in 48 bits so that a double carries it exactly.
int64_t hostId() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  const uint64_t h =
      fnv1a64(reinterpret_cast<const uint8_t *>(name), std::strlen(name));
  return int64_t(h & ((uint64_t(1) << 48) - 1));
}

bool processGone(int64_t pid) {
  if (::kill(pid_t(pid), 0) != 0 && errno == ESRCH)
    return true;
  // State is the field after the parenthesized command name.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size())
    return false;
  const char state = text[paren + 2];
  return state == 'Z' || state == 'X';
}

int pipeFds[2] = {-1, -1};
struct sigaction previousTerm;

/// Where the job's marker files live: tmpfs when there is one.
std::string markerDir() {
  return ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
}
constexpr const char *kMarkerPrefix = "dsc-dead-rank-";

/// Markers of jobs that ended more than an hour ago, best effort (a job
/// that fails leaves its marker: every rank exits at once).
void removeStaleMarkers(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return;
  const time_t now = ::time(nullptr);
  while (const dirent *entry = ::readdir(d)) {
    if (std::strncmp(entry->d_name, kMarkerPrefix,
                     std::strlen(kMarkerPrefix)) != 0)
      continue;
    const std::string path = dir + "/" + entry->d_name;
    struct stat st = {};
    if (::stat(path.c_str(), &st) == 0 && now - st.st_mtime > 3600)
      ::unlink(path.c_str());
  }
  ::closedir(d);
}

} // namespace

PeerWatch::PeerWatch(Communicator &world, const RunProgress &progress)
    : progress(progress), me(world.rank()) {
  const int n = world.size();
  double mine[2] = {double(hostId()), double(::getpid())};
  std::vector<double> all(2 * size_t(n));
  world.allGather(mine, all.data(), 2, DType::F64);
  pids.assign(size_t(n), 0);
  for (int r = 0; r < n; ++r)
    if (all[2 * size_t(r)] == mine[0])
      pids[size_t(r)] = int64_t(all[2 * size_t(r) + 1]);
  // The job's marker: named by every rank's host and pid, the same on all.
  const uint64_t job = fnv1a64(reinterpret_cast<const uint8_t *>(all.data()),
                               all.size() * sizeof(double));
  const std::string dir = markerDir();
  removeStaleMarkers(dir);
  char name[64];
  std::snprintf(name, sizeof(name), "%s%016llx", kMarkerPrefix,
                static_cast<unsigned long long>(job));
  marker = dir + "/" + name;

  if (::pipe2(pipeFds, O_CLOEXEC | O_NONBLOCK) != 0)
    throw Error(std::string("cannot create the rank watch's pipe: ") +
                std::strerror(errno));
  wakeFd.store(pipeFds[1]);
  struct sigaction action = {};
  action.sa_handler = onTerminate;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, &previousTerm);
  thread = std::thread([this] { watch(); });
}

PeerWatch::~PeerWatch() {
  stopping.store(true);
  const char byte = 's';
  [[maybe_unused]] ssize_t n = ::write(pipeFds[1], &byte, 1);
  thread.join();
  ::sigaction(SIGTERM, &previousTerm, nullptr);
  wakeFd.store(-1);
  ::close(pipeFds[0]);
  ::close(pipeFds[1]);
}

int PeerWatch::deadPeer() const {
  for (size_t r = 0; r < pids.size(); ++r)
    if (int(r) != me && pids[r] && processGone(pids[r]))
      return int(r);
  return -1;
}

void PeerWatch::watch() {
  while (!stopping.load()) {
    struct pollfd fd = {pipeFds[0], POLLIN, 0};
    ::poll(&fd, 1, 100);
    char drain[16];
    while (::read(pipeFds[0], drain, sizeof(drain)) > 0) {
    }
    if (stopping.load())
      return;
    const int dead = deadPeer();
    if (dead >= 0 || terminated.load())
      report(dead, terminated.load());
  }
}

int PeerWatch::publishedDead() const {
  std::ifstream in(marker);
  int rank = -1;
  if (in >> rank && rank >= 0 && size_t(rank) < pids.size())
    return rank;
  return -1;
}

int PeerWatch::publishDead(int dead) const {
  if (int named = publishedDead(); named >= 0)
    return named;
  if (dead < 0)
    return -1;
  const std::string mine = marker + "." + std::to_string(::getpid());
  const std::string text = std::to_string(dead) + "\n";
  const int fd =
      ::open(mine.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return dead;
  const bool written =
      ::write(fd, text.data(), text.size()) == ssize_t(text.size());
  ::close(fd);
  // link(2) fails when the marker exists: another rank was first, and its
  // rank is the one to name.
  const bool first = written && ::link(mine.c_str(), marker.c_str()) == 0;
  ::unlink(mine.c_str());
  if (first)
    return dead;
  const int named = publishedDead();
  return named >= 0 ? named : dead;
}

/// Tells dsc-launch the dead rank, when it asked (DSC_DEAD_RANK_FILE).
static void tellLauncher(int dead) {
  const char *path = std::getenv("DSC_DEAD_RANK_FILE");
  if (dead < 0 || !path || !*path)
    return;
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  const std::string text = std::to_string(dead) + "\n";
  [[maybe_unused]] ssize_t n = ::write(fd, text.data(), text.size());
  ::close(fd);
}

void PeerWatch::report(int seen, bool byTerm) const {
  // The first death any rank saw, so every survivor names the same one.
  const int dead = publishDead(seen);
  tellLauncher(dead);
  std::string what =
      dead >= 0 ? "world rank " + std::to_string(dead) + " (pid " +
                      std::to_string(pids[size_t(dead)]) + " on this host) died"
                : "ended by SIGTERM (the launcher ends every rank when one "
                  "fails)";
  if (dead >= 0 && byTerm)
    what += "; the launcher is ending the job";
  const std::string text = "dsc-run: error: rank " + std::to_string(me) + ": " +
                           what + " while this rank was in iteration " +
                           std::to_string(progress.currentIteration()) + "; " +
                           progress.resumeAdvice() + "\n";
  [[maybe_unused]] ssize_t n = ::write(2, text.data(), text.size());
  // The training thread may be blocked in a collective that will never
  // finish: end the process here, without unwinding.
  ::_exit(1);
}
