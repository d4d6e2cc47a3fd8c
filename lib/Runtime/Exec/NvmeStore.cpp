//===- NvmeStore.cpp - The NVMe tier's file -------------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// ZeRO-Infinity puts what neither device nor host memory can hold on NVMe; a
// plan's `nvme` arena is this file. The lane follows DeepSpeed's aio handle
// (csrc/aio): O_DIRECT so that the page cache neither doubles the host
// memory nor hides the drive's speed, requests of block_size (1 MiB) with
// queue_depth (8) of them in flight, io_uring where the kernel lets us.
// O_DIRECT needs 4 KiB-aligned memory, offsets and lengths; callers hand any
// range of any buffer, so I/O goes through an aligned bounce buffer and a
// partial head or tail block is read, patched and written back.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/NvmeStore.h"

#include "dsc/Runtime/Error.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#if DSC_HAVE_LIBURING
#include <liburing.h>
#endif

using namespace dsc::rt;

namespace {

/// O_DIRECT's alignment: the largest logical block size of current drives.
constexpr uint64_t kAlign = 4096;
/// io_uring's length field is 32 bits; a request never needs more.
constexpr uint64_t kMaxBlockBytes = uint64_t(1) << 30;
constexpr int kMaxQueueDepth = 4096;

uint64_t alignDown(uint64_t x) { return x & ~(kAlign - 1); }
uint64_t alignUp(uint64_t x) { return alignDown(x + kAlign - 1); }

/// One request in flight: `left` bytes at file offset `offset` from/to `buf`;
/// a short transfer advances it and goes again.
struct Op {
  uint64_t offset;
  char *buf;
  uint64_t left;
};

/// The caller's request, for error messages.
struct Request {
  const char *verb;
  uint64_t offset, bytes;
};

struct FreeDeleter {
  void operator()(char *p) const { std::free(p); }
};

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

} // namespace

struct NvmeStore::Impl {
  std::string path;
  uint64_t size = 0;
  NvmeOptions options;
  int fd = -1;
  bool direct = false;
  /// queueDepth x blockBytes, 4 KiB-aligned; only with O_DIRECT.
  std::unique_ptr<char, FreeDeleter> bounce;
  uint64_t bounceBytes = 0;
  NvmeStats stats;
  /// Bytes requested so far, for DSC_NVME_FAIL_AFTER_BYTES.
  uint64_t requested = 0;
#if DSC_HAVE_LIBURING
  io_uring ring{};
  bool haveRing = false;
#endif

  Impl() = default;
  Impl(const Impl &) = delete;
  Impl &operator=(const Impl &) = delete;
  ~Impl();

  void initRing();
  void checkRange(const char *verb, uint64_t offset, uint64_t bytes) const;
  std::vector<Op> split(uint64_t offset, char *buf, uint64_t bytes) const;
  /// Runs every op to completion, at most queueDepth in flight; throws once
  /// none is left in flight, so no buffer is touched after it returns.
  void transfer(std::vector<Op> &ops, bool isWrite, const Request &request);
  void transferSync(std::vector<Op> &ops, bool isWrite, const Request &request);
#if DSC_HAVE_LIBURING
  void transferRing(std::vector<Op> &ops, bool isWrite, const Request &request);
#endif
  std::string failure(const Request &request, const Op &op,
                      const std::string &why) const;
};

NvmeStore::Impl::~Impl() {
#if DSC_HAVE_LIBURING
  if (haveRing)
    io_uring_queue_exit(&ring);
#endif
  if (fd >= 0) {
    ::close(fd);
    ::unlink(path.c_str());
  }
}

void NvmeStore::Impl::initRing() {
#if DSC_HAVE_LIBURING
  // Containers often forbid io_uring (seccomp: EPERM/ENOSYS); so do kernels
  // before 5.6, which lack IORING_OP_READ/WRITE. Either way pread/pwrite
  // does the same work, one request at a time.
  if (io_uring_queue_init(unsigned(options.queueDepth), &ring, 0) != 0)
    return;
  io_uring_probe *probe = io_uring_get_probe_ring(&ring);
  bool usable = probe && io_uring_opcode_supported(probe, IORING_OP_READ) &&
                io_uring_opcode_supported(probe, IORING_OP_WRITE);
  if (probe)
    io_uring_free_probe(probe);
  if (!usable) {
    io_uring_queue_exit(&ring);
    return;
  }
  haveRing = true;
#endif
}

void NvmeStore::Impl::checkRange(const char *verb, uint64_t offset,
                                 uint64_t bytes) const {
  if (bytes > size || offset > size - bytes)
    throw Error("nvme file '" + path + "': " + verb + " of " +
                std::to_string(bytes) + " bytes at offset " +
                std::to_string(offset) + " is past its end (" +
                std::to_string(size) + " bytes)");
}

std::vector<Op> NvmeStore::Impl::split(uint64_t offset, char *buf,
                                       uint64_t bytes) const {
  std::vector<Op> ops;
  ops.reserve(size_t((bytes + options.blockBytes - 1) / options.blockBytes));
  for (uint64_t done = 0; done < bytes; done += options.blockBytes)
    ops.push_back({offset + done, buf + done,
                   std::min(options.blockBytes, bytes - done)});
  return ops;
}

std::string NvmeStore::Impl::failure(const Request &request, const Op &op,
                                     const std::string &why) const {
  return "nvme file '" + path + "': " + request.verb + " of " +
         std::to_string(request.bytes) + " bytes at offset " +
         std::to_string(request.offset) + " failed at offset " +
         std::to_string(op.offset) + " (" + std::to_string(op.left) +
         " bytes): " + why;
}

void NvmeStore::Impl::transfer(std::vector<Op> &ops, bool isWrite,
                               const Request &request) {
  // DSC_NVME_FAIL_AFTER_BYTES=N (for tests): the request that would take
  // the file past N bytes moved fails as a failing disk's would (EIO), so
  // what a run does with an I/O error mid-run can be tested.
  if (const char *limit = std::getenv("DSC_NVME_FAIL_AFTER_BYTES");
      limit && !ops.empty()) {
    uint64_t bytes = 0;
    for (const Op &op : ops)
      bytes += op.left;
    if (requested + bytes > std::strtoull(limit, nullptr, 10))
      throw Error(failure(request, ops.front(),
                          std::string(std::strerror(EIO)) +
                              " (injected by DSC_NVME_FAIL_AFTER_BYTES)"));
    requested += bytes;
  }
#if DSC_HAVE_LIBURING
  if (haveRing)
    return transferRing(ops, isWrite, request);
#endif
  transferSync(ops, isWrite, request);
}

void NvmeStore::Impl::transferSync(std::vector<Op> &ops, bool isWrite,
                                   const Request &request) {
  for (Op &op : ops) {
    while (op.left > 0) {
      ssize_t n = isWrite ? ::pwrite(fd, op.buf, op.left, off_t(op.offset))
                          : ::pread(fd, op.buf, op.left, off_t(op.offset));
      if (n < 0) {
        int err = errno;
        if (err == EINTR || err == EAGAIN)
          continue;
        throw Error(failure(request, op, std::strerror(err)));
      }
      if (n == 0)
        throw Error(failure(request, op,
                            isWrite ? "short write (0 bytes written)"
                                    : "short read (unexpected end of file)"));
      op.offset += uint64_t(n);
      op.buf += n;
      op.left -= uint64_t(n);
    }
  }
}

#if DSC_HAVE_LIBURING
void NvmeStore::Impl::transferRing(std::vector<Op> &ops, bool isWrite,
                                   const Request &request) {
  size_t next = 0;
  unsigned inFlight = 0, queued = 0;
  std::string error;
  bool ringBroken = false;
  auto queue = [&](size_t i) {
    io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    // The ring has queueDepth entries and at most that many ops are in
    // flight, so there is always a free one.
    Op &op = ops[i];
    if (isWrite)
      io_uring_prep_write(sqe, fd, op.buf, unsigned(op.left), op.offset);
    else
      io_uring_prep_read(sqe, fd, op.buf, unsigned(op.left), op.offset);
    io_uring_sqe_set_data64(sqe, uint64_t(i));
    ++inFlight;
    ++queued;
  };
  auto submit = [&] {
    while (queued > 0) {
      int r = io_uring_submit(&ring);
      if (r >= 0) {
        queued -= std::min(queued, unsigned(r));
        continue;
      }
      if (r == -EINTR || r == -EAGAIN || r == -EBUSY)
        continue;
      // Nothing was taken: those ops never run. The ring still holds them,
      // so it is not used again.
      if (error.empty())
        error = "nvme file '" + path + "': " + request.verb + " of " +
                std::to_string(request.bytes) + " bytes at offset " +
                std::to_string(request.offset) +
                " failed: io_uring_submit: " + std::strerror(-r);
      inFlight -= queued;
      queued = 0;
      ringBroken = true;
    }
  };

  while (next < ops.size() && inFlight < unsigned(options.queueDepth))
    queue(next++);
  submit();
  while (inFlight > 0) {
    io_uring_cqe *cqe = nullptr;
    int r = io_uring_wait_cqe(&ring, &cqe);
    if (r == -EINTR || r == -EAGAIN)
      continue;
    if (r < 0) {
      // Cannot happen on a live ring; there is no way to wait for what is
      // in flight, so stop using the ring altogether.
      io_uring_queue_exit(&ring);
      haveRing = false;
      throw Error("nvme file '" + path + "': " + request.verb + " of " +
                  std::to_string(request.bytes) + " bytes at offset " +
                  std::to_string(request.offset) +
                  " failed: io_uring_wait_cqe: " + std::strerror(-r));
    }
    // Take every completion that is ready, then submit what they free.
    do {
      size_t i = size_t(io_uring_cqe_get_data64(cqe));
      int res = cqe->res;
      io_uring_cqe_seen(&ring, cqe);
      --inFlight;
      Op &op = ops[i];
      if (res == -EAGAIN || res == -EINTR) {
        if (error.empty() && !ringBroken)
          queue(i);
      } else if (res < 0) {
        if (error.empty())
          error = failure(request, op, std::strerror(-res));
      } else if (res == 0) {
        if (error.empty())
          error = failure(request, op,
                          isWrite ? "short write (0 bytes written)"
                                  : "short read (unexpected end of file)");
      } else {
        op.offset += uint64_t(res);
        op.buf += res;
        op.left -= uint64_t(res);
        if (!error.empty() || ringBroken)
          continue;
        if (op.left > 0)
          queue(i);
        else if (next < ops.size())
          queue(next++);
      }
    } while (io_uring_peek_cqe(&ring, &cqe) == 0 && cqe);
    submit();
  }
  if (ringBroken) {
    io_uring_queue_exit(&ring);
    haveRing = false;
  }
  if (!error.empty())
    throw Error(error);
}
#endif

NvmeStore::NvmeStore(const std::string &directory, const std::string &fileName,
                     uint64_t bytes, NvmeOptions options)
    : impl(std::make_unique<Impl>()) {
  struct stat st {};
  if (::stat(directory.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR)
      throw Error("nvme-path '" + directory + "' does not exist");
    throw Error("nvme-path '" + directory +
                "' cannot be examined: " + std::strerror(err));
  }
  if (!S_ISDIR(st.st_mode))
    throw Error("nvme-path '" + directory +
                "' does not exist as a directory (it is a file)");
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    int err = errno;
    throw Error("nvme-path '" + directory +
                "' is not writable: " + std::strerror(err));
  }
  struct statvfs vfs {};
  if (::statvfs(directory.c_str(), &vfs) != 0) {
    int err = errno;
    throw Error("nvme-path '" + directory +
                "': cannot read its free space: " + std::strerror(err));
  }
  uint64_t freeBytes = uint64_t(vfs.f_bavail) * uint64_t(vfs.f_frsize);
  if (vfs.f_frsize != 0 && freeBytes / vfs.f_frsize != vfs.f_bavail)
    freeBytes = UINT64_MAX;
  if (freeBytes < bytes)
    throw Error(
        "nvme-path '" + directory + "' has " + std::to_string(freeBytes) +
        " bytes free; the nvme tier needs " + std::to_string(bytes) + " bytes");
  if (fileName.empty() || fileName == "." || fileName == ".." ||
      fileName.find('/') != std::string::npos)
    throw Error("nvme file name '" + fileName +
                "' must name a file in nvme-path '" + directory + "'");
  if (options.blockBytes == 0 || options.blockBytes > kMaxBlockBytes)
    throw Error("nvme block size " + std::to_string(options.blockBytes) +
                " must be between 1 byte and 1 GiB");
  if (options.queueDepth < 1 || options.queueDepth > kMaxQueueDepth)
    throw Error("nvme queue depth " + std::to_string(options.queueDepth) +
                " must be between 1 and " + std::to_string(kMaxQueueDepth));

  Impl &s = *impl;
  s.path = directory;
  if (s.path.empty() || s.path.back() != '/')
    s.path += '/';
  s.path += fileName;
  s.size = bytes;

  int flags = O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC;
  if (options.useDirectIo) {
    s.fd = ::open(s.path.c_str(), flags | O_DIRECT, 0600);
    s.direct = s.fd >= 0;
  }
  if (s.fd < 0 && (!options.useDirectIo || errno == EINVAL))
    s.fd = ::open(s.path.c_str(), flags, 0600);
  if (s.fd < 0) {
    int err = errno;
    throw Error("nvme file '" + s.path +
                "' cannot be created: " + std::strerror(err));
  }

  // Aligned I/O at the end must stay inside the file.
  uint64_t fileBytes = s.direct ? alignUp(bytes) : bytes;
  if (fileBytes > 0) {
    int r = ::posix_fallocate(s.fd, 0, off_t(fileBytes));
    if (r == EOPNOTSUPP || r == EINVAL)
      r = ::ftruncate(s.fd, off_t(fileBytes)) == 0 ? 0 : errno;
    if (r != 0)
      throw Error("nvme file '" + s.path + "': cannot allocate " +
                  std::to_string(bytes) + " bytes: " + std::strerror(r));
  }

  s.options = options;
  if (s.direct) {
    s.options.blockBytes = alignUp(options.blockBytes);
    s.bounceBytes = s.options.blockBytes * uint64_t(options.queueDepth);
    void *p = nullptr;
    if (::posix_memalign(&p, kAlign, s.bounceBytes) != 0)
      throw Error("nvme file '" + s.path + "': cannot allocate its " +
                  std::to_string(s.bounceBytes) + "-byte bounce buffer");
    s.bounce.reset(static_cast<char *>(p));
  }
  if (options.useIoUring)
    s.initRing();
}

NvmeStore::~NvmeStore() = default;
NvmeStore::NvmeStore(NvmeStore &&other) noexcept = default;
NvmeStore &NvmeStore::operator=(NvmeStore &&other) noexcept = default;

void NvmeStore::read(uint64_t offset, void *data, uint64_t bytes) {
  Impl &s = *impl;
  s.checkRange("read", offset, bytes);
  if (bytes == 0)
    return;
  auto start = std::chrono::steady_clock::now();
  Request request{"read", offset, bytes};
  char *out = static_cast<char *>(data);
  if (!s.direct) {
    std::vector<Op> ops = s.split(offset, out, bytes);
    s.transfer(ops, /*isWrite=*/false, request);
  } else {
    uint64_t end = offset + bytes, alignedEnd = alignUp(end);
    for (uint64_t w0 = alignDown(offset); w0 < alignedEnd;
         w0 += s.bounceBytes) {
      uint64_t w1 = std::min(alignedEnd, w0 + s.bounceBytes);
      std::vector<Op> ops = s.split(w0, s.bounce.get(), w1 - w0);
      s.transfer(ops, /*isWrite=*/false, request);
      uint64_t c0 = std::max(w0, offset), c1 = std::min(w1, end);
      std::memcpy(out + (c0 - offset), s.bounce.get() + (c0 - w0), c1 - c0);
    }
  }
  s.stats.bytesRead += bytes;
  s.stats.readSeconds += secondsSince(start);
}

void NvmeStore::write(uint64_t offset, const void *data, uint64_t bytes) {
  Impl &s = *impl;
  s.checkRange("write", offset, bytes);
  if (bytes == 0)
    return;
  auto start = std::chrono::steady_clock::now();
  Request request{"write", offset, bytes};
  const char *in = static_cast<const char *>(data);
  if (!s.direct) {
    // pwrite and io_uring only read from the buffer.
    std::vector<Op> ops = s.split(offset, const_cast<char *>(in), bytes);
    s.transfer(ops, /*isWrite=*/true, request);
  } else {
    uint64_t end = offset + bytes, alignedEnd = alignUp(end);
    for (uint64_t w0 = alignDown(offset); w0 < alignedEnd;
         w0 += s.bounceBytes) {
      uint64_t w1 = std::min(alignedEnd, w0 + s.bounceBytes);
      uint64_t c0 = std::max(w0, offset), c1 = std::min(w1, end);
      // The first window may start inside a block and the last end inside
      // one: read those blocks so that the bytes around the range survive.
      std::vector<Op> partial;
      if (c0 > w0)
        partial.push_back({w0, s.bounce.get(), kAlign});
      if (c1 < w1 && (partial.empty() || w1 - kAlign != w0))
        partial.push_back(
            {w1 - kAlign, s.bounce.get() + (w1 - kAlign - w0), kAlign});
      if (!partial.empty())
        s.transfer(partial, /*isWrite=*/false, request);
      std::memcpy(s.bounce.get() + (c0 - w0), in + (c0 - offset), c1 - c0);
      std::vector<Op> ops = s.split(w0, s.bounce.get(), w1 - w0);
      s.transfer(ops, /*isWrite=*/true, request);
    }
  }
  s.stats.bytesWritten += bytes;
  s.stats.writeSeconds += secondsSince(start);
}

const std::string &NvmeStore::path() const { return impl->path; }
uint64_t NvmeStore::size() const { return impl->size; }
const char *NvmeStore::engine() const {
#if DSC_HAVE_LIBURING
  if (impl->haveRing)
    return "io_uring";
#endif
  return "pread/pwrite";
}
bool NvmeStore::directIo() const { return impl->direct; }
const NvmeStats &NvmeStore::stats() const { return impl->stats; }
