//===- FileIO.cpp - POSIX files for checkpoints ---------------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//

#include "FileIO.h"
#include "dsc/Runtime/Error.h"

#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace dsc::rt;

namespace {

std::string errnoText() { return std::strerror(errno); }

} // namespace

ReadFile::ReadFile(const std::string &path, const std::string &what)
    : path(path), what(what) {
  // Non-blocking, so that a named pipe (or a device) put where a file
  // belongs is refused below instead of blocking the open until a writer
  // comes; a regular file reads the same either way.
  fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw Error("cannot open " + what + " '" + path + "': " + errnoText());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool fifo = S_ISFIFO(st.st_mode);
    ::close(fd);
    fd = -1;
    throw Error(what + " '" + path + "' is not a regular file" +
                (fifo ? " (a named pipe)" : ""));
  }
  bytes = uint64_t(st.st_size);
}

ReadFile::~ReadFile() {
  if (fd >= 0)
    ::close(fd);
}

void ReadFile::read(uint64_t offset, void *out, uint64_t size) const {
  auto *p = static_cast<uint8_t *>(out);
  while (size) {
    ssize_t n = ::pread(fd, p, size, off_t(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw Error("cannot read " + what + " '" + path + "': " + errnoText());
    if (n == 0)
      throw Error(what + " '" + path + "' is truncated: no bytes at offset " +
                  std::to_string(offset));
    p += n;
    offset += uint64_t(n);
    size -= uint64_t(n);
  }
}

void dsc::rt::writeFileDurably(const std::string &path,
                               const std::vector<ByteSpan> &parts) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error("cannot create '" + path + "': " + errnoText());
  for (const ByteSpan &part : parts) {
    const auto *p = static_cast<const uint8_t *>(part.data);
    size_t left = part.size;
    while (left) {
      ssize_t n = ::write(fd, p, left);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        std::string why = n == 0 ? "no bytes written" : errnoText();
        ::close(fd);
        throw Error("cannot write '" + path + "': " + why);
      }
      p += n;
      left -= size_t(n);
    }
  }
  if (::fsync(fd) != 0) {
    std::string why = errnoText();
    ::close(fd);
    throw Error("cannot fsync '" + path + "': " + why);
  }
  if (::close(fd) != 0)
    throw Error("cannot close '" + path + "': " + errnoText());
}

void dsc::rt::writeFileDurably(const std::string &path, const void *data,
                               size_t size) {
  writeFileDurably(path, {{data, size}});
}

std::vector<uint8_t> dsc::rt::readWholeFile(const std::string &path,
                                            const std::string &what) {
  ReadFile f(path, what);
  if (f.size() > (uint64_t(1) << 30))
    throw Error(what + " '" + path + "' is larger than 1 GiB");
  std::vector<uint8_t> bytes(f.size());
  f.read(0, bytes.data(), bytes.size());
  return bytes;
}

void dsc::rt::syncDirectory(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw Error("cannot open directory '" + path + "': " + errnoText());
  int rc = ::fsync(fd);
  std::string why = rc ? errnoText() : "";
  ::close(fd);
  // Some file systems refuse fsync on directories (EINVAL): nothing to do.
  if (rc != 0 && why != std::strerror(EINVAL))
    throw Error("cannot fsync directory '" + path + "': " + why);
}

void dsc::rt::makeDirectory(const std::string &path, bool mayExist) {
  if (::mkdir(path.c_str(), 0755) == 0)
    return;
  if (errno == EEXIST && mayExist && isDirectory(path))
    return;
  throw Error("cannot create directory '" + path + "': " + errnoText());
}

void dsc::rt::makeDirectories(const std::string &path) {
  if (path.empty() || isDirectory(path))
    return;
  const size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0)
    makeDirectories(path.substr(0, slash));
  makeDirectory(path, /*mayExist=*/true);
}

void dsc::rt::renamePath(const std::string &from, const std::string &to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw Error("cannot rename '" + from + "' to '" + to + "': " + errnoText());
}

bool dsc::rt::pathExists(const std::string &path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool dsc::rt::isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> dsc::rt::listDirectory(const std::string &path) {
  std::vector<std::string> names;
  DIR *dir = ::opendir(path.c_str());
  if (!dir)
    return names;
  while (struct dirent *e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name != "." && name != "..")
      names.push_back(name);
  }
  ::closedir(dir);
  return names;
}

void dsc::rt::removeTree(const std::string &path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0)
    return;
  if (S_ISDIR(st.st_mode)) {
    for (const std::string &name : listDirectory(path))
      removeTree(path + "/" + name);
    if (::rmdir(path.c_str()) != 0)
      throw Error("cannot remove directory '" + path + "': " + errnoText());
    return;
  }
  if (::unlink(path.c_str()) != 0)
    throw Error("cannot remove '" + path + "': " + errnoText());
}
