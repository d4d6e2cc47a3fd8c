//===- BenchNvme.cpp - dsc-bench-nvme: the offload lane against O_DIRECT --===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A report, not a test: writes and reads BYTES through the NVMe tier's lane
// (NvmeStore: io_uring, O_DIRECT, DeepSpeed's 1 MiB blocks x 8 in flight,
// or the options given) and, on the same file system, through the plainest
// sequential O_DIRECT loop (one pwrite/pread of CHUNK bytes after the
// other), the ceiling the lane is held against. Both pass over the same
// bytes the same number of times; the better of REPEATS passes counts.
//
// Usage: dsc-bench-nvme DIR [--bytes N] [--block N] [--queue-depth N]
//                           [--chunk N] [--repeats N] [--swaps N]
//
// --swaps N also times what an optimizer step does: N tensors of BYTES/N,
// each read into a host buffer and written back (the swap-in and swap-out
// of ZeRO-Infinity's states), through the lane.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/NvmeStore.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace dsc::rt;

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Options {
  std::string dir;
  uint64_t bytes = 256ull << 20;
  uint64_t block = 1 << 20;
  int queueDepth = 8;
  uint64_t chunk = 64ull << 20;
  int repeats = 3;
  int swaps = 0;
};

uint64_t parseBytes(const char *flag, const char *text) {
  char *end = nullptr;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (!end || end == text || *end || v == 0)
    throw Error(std::string(flag) + " expects a positive integer, got '" +
                text + "'");
  return v;
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto next = [&]() -> const char * {
      if (i + 1 >= argc)
        throw Error(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--bytes")
      o.bytes = parseBytes("--bytes", next());
    else if (flag == "--block")
      o.block = parseBytes("--block", next());
    else if (flag == "--queue-depth")
      o.queueDepth = int(parseBytes("--queue-depth", next()));
    else if (flag == "--chunk")
      o.chunk = parseBytes("--chunk", next());
    else if (flag == "--repeats")
      o.repeats = int(parseBytes("--repeats", next()));
    else if (flag == "--swaps")
      o.swaps = int(parseBytes("--swaps", next()));
    else if (!flag.empty() && flag[0] != '-' && o.dir.empty())
      o.dir = flag;
    else
      throw Error("unknown argument '" + flag +
                  "' (usage: dsc-bench-nvme DIR [--bytes N] [--block N] "
                  "[--queue-depth N] [--chunk N] [--repeats N] [--swaps N])");
  }
  if (o.dir.empty())
    throw Error("no directory given (usage: dsc-bench-nvme DIR ...)");
  // O_DIRECT moves whole 4 KiB blocks.
  o.bytes = (o.bytes + 4095) / 4096 * 4096;
  o.chunk = std::min((o.chunk + 4095) / 4096 * 4096, o.bytes);
  return o;
}

/// The plainest sequential O_DIRECT pass: GB/s of writing, then reading,
/// `bytes` in `chunk`-byte calls, the best of `repeats`.
std::pair<double, double> plainDirect(const Options &o) {
  const std::string path = o.dir + "/dsc-bench-nvme.plain";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
  if (fd < 0)
    throw Error("cannot open '" + path +
                "' with O_DIRECT: " + std::strerror(errno));
  void *raw = nullptr;
  if (posix_memalign(&raw, 4096, o.chunk))
    throw Error("cannot allocate the O_DIRECT buffer");
  std::unique_ptr<void, decltype(&std::free)> buffer(raw, &std::free);
  std::memset(raw, 0x5a, o.chunk);
  double bestWrite = 0, bestRead = 0;
  for (int r = 0; r < o.repeats; ++r) {
    double t0 = now();
    for (uint64_t at = 0; at < o.bytes; at += o.chunk)
      if (::pwrite(fd, raw, std::min(o.chunk, o.bytes - at), off_t(at)) < 0)
        throw Error("pwrite '" + path + "': " + std::strerror(errno));
    ::fdatasync(fd);
    bestWrite = std::max(bestWrite, double(o.bytes) / (now() - t0) / 1e9);
    t0 = now();
    for (uint64_t at = 0; at < o.bytes; at += o.chunk)
      if (::pread(fd, raw, std::min(o.chunk, o.bytes - at), off_t(at)) < 0)
        throw Error("pread '" + path + "': " + std::strerror(errno));
    bestRead = std::max(bestRead, double(o.bytes) / (now() - t0) / 1e9);
  }
  ::close(fd);
  ::unlink(path.c_str());
  return {bestWrite, bestRead};
}

} // namespace

int main(int argc, char **argv) {
  try {
    const Options o = parse(argc, argv);
    NvmeOptions lane;
    lane.blockBytes = o.block;
    lane.queueDepth = o.queueDepth;
    NvmeStore store(o.dir, "dsc-bench-nvme.lane", o.bytes, lane);
    std::vector<uint8_t> host(o.bytes, 0x5a);

    double bestWrite = 0, bestRead = 0;
    for (int r = 0; r < o.repeats; ++r) {
      double t0 = now();
      store.write(0, host.data(), o.bytes);
      bestWrite = std::max(bestWrite, double(o.bytes) / (now() - t0) / 1e9);
      t0 = now();
      store.read(0, host.data(), o.bytes);
      bestRead = std::max(bestRead, double(o.bytes) / (now() - t0) / 1e9);
    }
    const auto [plainWrite, plainRead] = plainDirect(o);

    std::printf("dsc-bench-nvme: %s, %.0f MiB, lane %s%s, block %llu KiB x "
                "%d in flight; plain: O_DIRECT %llu MiB calls; best of %d\n",
                o.dir.c_str(), double(o.bytes) / (1 << 20), store.engine(),
                store.directIo() ? " O_DIRECT" : " (page cache)",
                (unsigned long long)(o.block >> 10), o.queueDepth,
                (unsigned long long)(o.chunk >> 20), o.repeats);
    std::printf("%-8s %12s %12s %8s\n", "", "lane GB/s", "plain GB/s", "ratio");
    std::printf("%-8s %12.2f %12.2f %7.0f%%\n", "write", bestWrite, plainWrite,
                100.0 * bestWrite / plainWrite);
    std::printf("%-8s %12.2f %12.2f %7.0f%%\n", "read", bestRead, plainRead,
                100.0 * bestRead / plainRead);

    if (o.swaps > 0) {
      // An optimizer step's swaps: each tensor in, then out.
      const uint64_t each = o.bytes / uint64_t(o.swaps);
      double t0 = now();
      for (int s = 0; s < o.swaps; ++s) {
        store.read(uint64_t(s) * each, host.data(), each);
        store.write(uint64_t(s) * each, host.data(), each);
      }
      const double seconds = now() - t0;
      std::printf("swaps    %d tensors of %.2f MiB in and out: %.2f GB/s "
                  "each way\n",
                  o.swaps, double(each) / (1 << 20),
                  double(each) * o.swaps / (seconds / 2) / 1e9);
    }
    return 0;
  } catch (const Error &e) {
    std::fprintf(stderr, "dsc-bench-nvme: error: %s\n", e.what());
    return 1;
  }
}
