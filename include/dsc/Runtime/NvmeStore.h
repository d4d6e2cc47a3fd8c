//===- NvmeStore.h - The NVMe tier's file -----------------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// dsc::rt::NvmeStore: a plan's arena of tier `nvme` (ZeRO-Infinity) is not
// memory but a scratch file under the user's nvme-path, read and written in
// blocks with several requests in flight (io_uring, else pread/pwrite).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_NVMESTORE_H
#define DSC_RUNTIME_NVMESTORE_H

#include <cstdint>
#include <memory>
#include <string>

namespace dsc::rt {

/// How the store talks to the drive. The defaults are DeepSpeed's aio
/// handle's (block_size 1 MiB, queue_depth 8).
struct NvmeOptions {
  /// Bytes per request. With O_DIRECT it is rounded up to 4 KiB.
  uint64_t blockBytes = 1 << 20;
  /// Requests in flight at once (1 to 4096).
  int queueDepth = 8;
  /// false: pread/pwrite (also the lane when io_uring is unavailable).
  bool useIoUring = true;
  /// Open with O_DIRECT where the file system accepts it; false: through
  /// the page cache.
  bool useDirectIo = true;
};

/// What went through the store, for the run's report.
struct NvmeStats {
  uint64_t bytesRead = 0, bytesWritten = 0;
  double readSeconds = 0, writeSeconds = 0;
};

/// One scratch file of a fixed size. One caller at a time: a store is one
/// lane, not thread-safe.
class NvmeStore {
public:
  /// Creates `directory`/`fileName` holding `bytes` zero bytes (truncating an
  /// old one). Throws Error before anything else when: the directory does not
  /// exist or is not a directory ("nvme-path '<dir>' does not exist"), is not
  /// writable ("nvme-path '<dir>' is not writable: <strerror>"), or its file
  /// system has less free space than `bytes` (statvfs f_bavail*f_frsize;
  /// message names the directory, the bytes needed and the bytes free).
  /// The space is preallocated, so a full disk fails here, not mid-run.
  NvmeStore(const std::string &directory, const std::string &fileName,
            uint64_t bytes, NvmeOptions options = {});
  /// Closes and unlinks the file (it is scratch, not a checkpoint).
  ~NvmeStore();
  NvmeStore(const NvmeStore &) = delete;
  NvmeStore &operator=(const NvmeStore &) = delete;
  /// A moved-from store owns no file; only its destructor may be called.
  NvmeStore(NvmeStore &&other) noexcept;
  NvmeStore &operator=(NvmeStore &&other) noexcept;

  /// Reads/writes [offset, offset+bytes) of the file from/to host memory
  /// `data` (any alignment). Throws Error naming the file path, the offset
  /// and the length and the OS error on any failure or short transfer; a
  /// range past the file's size is an Error too (checked before any I/O).
  void read(uint64_t offset, void *data, uint64_t bytes);
  void write(uint64_t offset, const void *data, uint64_t bytes);

  const std::string &path() const;
  uint64_t size() const;
  /// "io_uring" or "pread/pwrite": the lane actually in use.
  const char *engine() const;
  /// Whether the file was opened with O_DIRECT (false when not asked for or
  /// where the file system refuses it): otherwise I/O goes through the page
  /// cache.
  bool directIo() const;
  const NvmeStats &stats() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_NVMESTORE_H
