//===- Safetensors.h - read and write the safetensors layout ----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The safetensors file layout (Hugging Face's, no pickles): an 8-byte
// little-endian header length N, N bytes of JSON {name: {"dtype", "shape",
// "data_offsets": [begin, end]}, "__metadata__": {str: str}} padded with
// spaces, then the raw little-endian tensor bytes, offsets relative to the
// first byte after the header. Checkpoints store their pieces in it and the
// model import reads weights from it. A file is untrusted: the reader checks
// every field against the file's size and names the file and the tensor.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_SAFETENSORS_H
#define DSC_RUNTIME_SAFETENSORS_H

#include "dsc/Runtime/Plan.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dsc::rt {

/// "F32", "F64", "I32", "BF16", "F16": the safetensors names of the dtypes
/// dsc has.
const char *safetensorsDTypeName(DType t);
/// The dtype called `name` in a safetensors header; false for one dsc does
/// not have ("F8_E4M3", "I64", ...).
bool parseSafetensorsDType(const std::string &name, DType &out);

/// One tensor of a file, its byte range absolute in the file.
struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct SafetensorsHeader {
  /// Bytes before the first tensor's data: 8 + the header length.
  uint64_t dataStart = 0;
  /// In the order of their data offsets.
  std::vector<SafetensorsTensor> tensors;
  std::map<std::string, std::string> metadata;
  /// The tensor called `name`, or null.
  const SafetensorsTensor *find(const std::string &name) const;
};

/// Parses and checks the header at the start of a file of `fileSize` bytes;
/// `prefix` holds its first bytes (at least the 8-byte length and, when
/// given more, the header). Every tensor's dtype is known, its shape's
/// elements times the dtype's size equal its byte length, the byte ranges
/// lie inside the file and do not overlap, and, as the safetensors package
/// requires, they cover the data area without gaps. Throws Error naming
/// `file` (and the tensor).
SafetensorsHeader parseSafetensorsHeader(const uint8_t *prefix,
                                         size_t prefixSize, uint64_t fileSize,
                                         const std::string &file);
/// Reads and checks the header of the file at `path` (not its data).
SafetensorsHeader readSafetensorsHeader(const std::string &path);

/// Builds a file: add tensors, then write. The file holds them as the
/// safetensors package writes them (by dtype, then by name, its header's
/// text byte for byte), whatever the add order. The data is copied at add
/// time, so the caller's buffers may change afterwards.
class SafetensorsWriter {
public:
  /// `bytes` must be numElements(shape) * dtypeSize(dtype) long; a name
  /// given twice is an Error.
  void add(const std::string &name, DType dtype,
           const std::vector<int64_t> &shape, const void *bytes, uint64_t size);
  /// Adds a tensor whose bytes the caller writes at the returned address
  /// (numElements(shape) * dtypeSize(dtype) of them, stable until the
  /// writer is destroyed): one copy from a device straight into the file's
  /// data (an asynchronous checkpoint's snapshot).
  uint8_t *reserve(const std::string &name, DType dtype,
                   const std::vector<int64_t> &shape);
  void setMetadata(const std::string &key, const std::string &value) {
    metadata[key] = value;
  }
  /// The bytes of the tensor added `index`-th.
  const std::vector<uint8_t> &bytesOf(size_t index) const {
    return data[index];
  }
  /// The data bytes held (the host memory a snapshot costs).
  uint64_t dataBytes() const;
  /// Hands over the tensors' buffers, and takes an earlier writer's to
  /// fill again (reserve reuses them in order): a snapshot taken again and
  /// again then costs the copy, not fresh pages.
  std::vector<std::vector<uint8_t>> takeStorage() { return std::move(data); }
  void reuseStorage(std::vector<std::vector<uint8_t>> storage) {
    spare = std::move(storage);
  }
  /// Writes the file, fsyncs it and closes it; returns the tensors with
  /// their absolute byte ranges. Throws Error naming `path`.
  SafetensorsHeader write(const std::string &path) const;
  /// The header and data as one byte string (the bytes write() writes).
  std::vector<uint8_t> serialize(SafetensorsHeader *layout = nullptr) const;

private:
  /// The header text, padded, with its 8-byte length in front.
  std::string headerBytes(SafetensorsHeader *layout) const;
  /// The add indices in the order the file holds them (the safetensors
  /// package's: by dtype, then name).
  std::vector<size_t> fileOrder() const;
  std::vector<SafetensorsTensor> tensors; // begin/end relative to data
  /// Each tensor's bytes, in add order (contiguous in the file).
  std::vector<std::vector<uint8_t>> data, spare;
  uint64_t dataSize = 0;
  std::map<std::string, std::string> metadata;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_SAFETENSORS_H
