//===- FileIO.h - POSIX files for checkpoints -------------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The few POSIX calls a checkpoint needs, each throwing an Error that names
// the path: positioned reads (a rank reads only the byte ranges it needs),
// durable writes (data fsynced before a rename publishes it), directory
// fsync, rename and removal.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_LIB_RUNTIME_CHECKPOINT_FILEIO_H
#define DSC_LIB_RUNTIME_CHECKPOINT_FILEIO_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dsc::rt {

/// A file open for positioned reads.
class ReadFile {
public:
  /// `what` names the file in errors ("safetensors file").
  ReadFile(const std::string &path, const std::string &what);
  ~ReadFile();
  ReadFile(const ReadFile &) = delete;
  ReadFile &operator=(const ReadFile &) = delete;
  uint64_t size() const { return bytes; }
  /// Reads exactly `size` bytes at `offset`; an Error when the file is
  /// shorter.
  void read(uint64_t offset, void *out, uint64_t size) const;

private:
  std::string path, what;
  int fd = -1;
  uint64_t bytes = 0;
};

/// Bytes in memory: one part of a file to write.
struct ByteSpan {
  const void *data;
  size_t size;
};
/// Creates `path` (or truncates it), writes the parts one after another,
/// fsyncs, closes.
void writeFileDurably(const std::string &path,
                      const std::vector<ByteSpan> &parts);
/// Creates `path` (or truncates it), writes `size` bytes, fsyncs, closes.
void writeFileDurably(const std::string &path, const void *data, size_t size);
/// Reads a whole (small) file: manifests and markers.
std::vector<uint8_t> readWholeFile(const std::string &path,
                                   const std::string &what);
/// fsync on a directory, so the names created in it are durable.
void syncDirectory(const std::string &path);
/// mkdir, with an Error unless it was created or `mayExist` and it exists.
void makeDirectory(const std::string &path, bool mayExist);
/// mkdir -p: `path` and any missing parents.
void makeDirectories(const std::string &path);
/// rename(2): atomic within one file system.
void renamePath(const std::string &from, const std::string &to);
/// Removes a file, or a directory and what it holds; no error when absent.
void removeTree(const std::string &path);
bool pathExists(const std::string &path);
bool isDirectory(const std::string &path);
/// The names in a directory (not "." and ".."); empty when it is absent.
std::vector<std::string> listDirectory(const std::string &path);

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_CHECKPOINT_FILEIO_H
