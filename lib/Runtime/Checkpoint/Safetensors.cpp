//===- Safetensors.cpp - read and write the safetensors layout ------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The header is JSON (nlohmann/json, header-only: the runtime has no LLVM);
// every number in it is checked against the file's size before any byte of
// data is trusted, so a hostile header gives an Error, never a crash.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Safetensors.h"
#include "FileIO.h"
#include "Shapes.h"
#include "dsc/Runtime/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

using namespace dsc::rt;
using namespace dsc::rt::checkpoint;
using Json = nlohmann::json;

namespace {

/// The safetensors package refuses headers above 100 MB; so do we.
constexpr uint64_t kMaxHeader = 100ull << 20;

} // namespace

const char *dsc::rt::safetensorsDTypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "F32";
  case DType::F64:
    return "F64";
  case DType::I32:
    return "I32";
  case DType::BF16:
    return "BF16";
  case DType::F16:
    return "F16";
  }
  return "unknown";
}

bool dsc::rt::parseSafetensorsDType(const std::string &name, DType &out) {
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::BF16, DType::F16})
    if (name == safetensorsDTypeName(t)) {
      out = t;
      return true;
    }
  return false;
}

const SafetensorsTensor *
SafetensorsHeader::find(const std::string &name) const {
  for (const SafetensorsTensor &t : tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

SafetensorsHeader dsc::rt::parseSafetensorsHeader(const uint8_t *prefix,
                                                  size_t prefixSize,
                                                  uint64_t fileSize,
                                                  const std::string &file) {
  const std::string what = "safetensors file '" + file + "'";
  auto fail = [&](const std::string &msg) -> Error {
    return Error(what + ": " + msg);
  };
  if (fileSize < 8 || prefixSize < 8)
    throw fail("truncated: " + std::to_string(fileSize) +
               " bytes, less than the 8-byte header length");
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= uint64_t(prefix[i]) << (8 * i);
  if (length > kMaxHeader)
    throw fail("header length " + std::to_string(length) +
               " is above the 100 MiB limit");
  if (length > fileSize - 8)
    throw fail("truncated: the header needs " + std::to_string(length) +
               " bytes after the length, the file has " +
               std::to_string(fileSize - 8));
  if (prefixSize - 8 < length)
    throw fail("header of " + std::to_string(length) +
               " bytes was not read whole");
  const char *text = reinterpret_cast<const char *>(prefix + 8);
  Json header = Json::parse(text, text + length, nullptr,
                            /*allow_exceptions=*/false);
  if (header.is_discarded())
    throw fail("the header is not valid JSON");
  if (!header.is_object())
    throw fail("the header is not a JSON object");

  SafetensorsHeader out;
  out.dataStart = 8 + length;
  const uint64_t dataSize = fileSize - out.dataStart;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string &name = it.key();
    const Json &value = it.value();
    if (name == "__metadata__") {
      if (!value.is_object())
        throw fail("__metadata__ is not an object");
      for (auto m = value.begin(); m != value.end(); ++m) {
        if (!m.value().is_string())
          throw fail("__metadata__ entry '" + m.key() + "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string field = "tensor '" + name + "'";
    if (!value.is_object())
      throw fail(field + " is not an object");
    auto dtype = value.find("dtype");
    auto shape = value.find("shape");
    auto offsets = value.find("data_offsets");
    if (dtype == value.end() || !dtype->is_string())
      throw fail(field + " has no dtype string");
    if (shape == value.end() || !shape->is_array())
      throw fail(field + " has no shape array");
    if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2)
      throw fail(field + " has no data_offsets [begin, end]");
    SafetensorsTensor t;
    t.name = name;
    if (!parseSafetensorsDType(dtype->get<std::string>(), t.dtype))
      throw fail(field + " has dtype '" + dtype->get<std::string>() +
                 "', which dsc does not read (F32, F64, I32, BF16, F16)");
    if (shape->size() > 64)
      throw fail(field + " has rank " + std::to_string(shape->size()));
    for (const Json &d : *shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t(1) << 50))
        throw fail(field + " has a shape dimension that is not an integer "
                           "in [0, 2^50]");
      t.shape.push_back(int64_t(d.get<uint64_t>()));
    }
    for (const Json &o : *offsets)
      if (!o.is_number_unsigned())
        throw fail(field + " has a data offset that is not an unsigned "
                           "integer");
    const uint64_t begin = (*offsets)[0].get<uint64_t>();
    const uint64_t end = (*offsets)[1].get<uint64_t>();
    if (begin > end || end > dataSize)
      throw fail(field + " has data_offsets [" + std::to_string(begin) + ", " +
                 std::to_string(end) + "] outside the " +
                 std::to_string(dataSize) + " data bytes (truncated?)");
    const int64_t elements = elementCount(t.shape);
    if (elements < 0 || uint64_t(elements) > end - begin ||
        uint64_t(elements) * dtypeSize(t.dtype) != end - begin)
      throw fail(field + " is " + dtype->get<std::string>() + " " +
                 shapeText(t.shape) + " but has " +
                 std::to_string(end - begin) + " bytes");
    t.begin = out.dataStart + begin;
    t.end = out.dataStart + end;
    out.tensors.push_back(std::move(t));
  }
  std::sort(out.tensors.begin(), out.tensors.end(),
            [](const SafetensorsTensor &a, const SafetensorsTensor &b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t at = out.dataStart;
  for (const SafetensorsTensor &t : out.tensors) {
    if (t.begin < at)
      throw fail("tensor '" + t.name +
                 "' overlaps the tensor before it (bytes " +
                 std::to_string(t.begin - out.dataStart) + " to " +
                 std::to_string(t.end - out.dataStart) + ")");
    if (t.begin > at)
      throw fail("a gap of " + std::to_string(t.begin - at) +
                 " bytes before tensor '" + t.name + "'");
    at = t.end;
  }
  if (at != fileSize)
    throw fail(std::to_string(fileSize - at) +
               " bytes after the last tensor's data");
  return out;
}

SafetensorsHeader dsc::rt::readSafetensorsHeader(const std::string &path) {
  ReadFile f(path, "safetensors file");
  uint8_t lengthBytes[8] = {};
  const uint64_t size = f.size();
  if (size < 8)
    return parseSafetensorsHeader(lengthBytes, 0, size, path);
  f.read(0, lengthBytes, 8);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= uint64_t(lengthBytes[i]) << (8 * i);
  if (length > kMaxHeader || length > size - 8)
    return parseSafetensorsHeader(lengthBytes, 8, size, path);
  std::vector<uint8_t> prefix(8 + length);
  f.read(0, prefix.data(), prefix.size());
  return parseSafetensorsHeader(prefix.data(), prefix.size(), size, path);
}

uint8_t *SafetensorsWriter::reserve(const std::string &name, DType dtype,
                                    const std::vector<int64_t> &shape) {
  if (name == "__metadata__")
    throw Error("a safetensors tensor cannot be called '__metadata__'");
  for (const SafetensorsTensor &t : tensors)
    if (t.name == name)
      throw Error("safetensors tensor '" + name + "' added twice");
  const int64_t elements = elementCount(shape);
  if (elements < 0)
    throw Error("safetensors tensor '" + name + "' has a malformed shape " +
                shapeText(shape));
  SafetensorsTensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = shape;
  t.begin = dataSize;
  t.end = t.begin + uint64_t(elements) * dtypeSize(dtype);
  dataSize = t.end;
  if (data.size() < spare.size()) {
    data.push_back(std::move(spare[data.size()]));
    data.back().resize(t.end - t.begin);
  } else {
    data.emplace_back(t.end - t.begin);
  }
  tensors.push_back(std::move(t));
  return data.back().data();
}

void SafetensorsWriter::add(const std::string &name, DType dtype,
                            const std::vector<int64_t> &shape,
                            const void *bytes, uint64_t size) {
  const int64_t elements = elementCount(shape);
  if (elements < 0 || uint64_t(elements) * dtypeSize(dtype) != size)
    throw Error("safetensors tensor '" + name + "' is " + dtypeName(dtype) +
                " " + shapeText(shape) + " but was given " +
                std::to_string(size) + " bytes");
  uint8_t *out = reserve(name, dtype, shape);
  if (size)
    std::memcpy(out, bytes, size);
}

uint64_t SafetensorsWriter::dataBytes() const { return dataSize; }

namespace {

/// The rank of `t` in the safetensors package's Dtype enum, whose order
/// (BOOL, U8, ..., F16, BF16, I32, U32, F32, F64, I64, U64) its writer
/// sorts the tensors by, largest first.
int packageDTypeRank(DType t) {
  switch (t) {
  case DType::F16:
    return 0;
  case DType::BF16:
    return 1;
  case DType::I32:
    return 2;
  case DType::F32:
    return 3;
  case DType::F64:
    return 4;
  }
  return -1;
}

} // namespace

std::vector<size_t> SafetensorsWriter::fileOrder() const {
  // The package's order (safetensors' serialize): by dtype, the larger
  // enum value first, then by name; its header lists the tensors in that
  // order, so a file written from transformers' tensors is its bytes.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int ra = packageDTypeRank(tensors[a].dtype),
              rb = packageDTypeRank(tensors[b].dtype);
    if (ra != rb)
      return ra > rb;
    return tensors[a].name < tensors[b].name;
  });
  return order;
}

std::string SafetensorsWriter::headerBytes(SafetensorsHeader *layout) const {
  // The package's text: "__metadata__" first, then each tensor in file
  // order with its fields as the package writes them (dtype, shape,
  // data_offsets), no spaces. nlohmann would sort the fields, so the
  // object is written here and only the strings and the metadata go
  // through it.
  const std::vector<size_t> order = fileOrder();
  std::vector<SafetensorsTensor> placed = tensors;
  uint64_t at = 0;
  for (size_t i : order) {
    const uint64_t size = tensors[i].end - tensors[i].begin;
    placed[i].begin = at;
    placed[i].end = at + size;
    at += size;
  }
  std::string text = "{";
  if (!metadata.empty())
    text += "\"__metadata__\":" + Json(metadata).dump();
  for (size_t i : order) {
    const SafetensorsTensor &t = placed[i];
    if (text.size() > 1)
      text += ",";
    text += Json(t.name).dump() + ":{\"dtype\":\"" +
            safetensorsDTypeName(t.dtype) + "\",\"shape\":" +
            Json(t.shape).dump() + ",\"data_offsets\":[" +
            std::to_string(t.begin) + "," + std::to_string(t.end) + "]}";
  }
  text += "}";
  // Pad with spaces so the data starts 8-byte aligned, as the package does.
  while ((8 + text.size()) % 8)
    text += ' ';
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = char(uint8_t(uint64_t(text.size()) >> (8 * i)));
  out += text;
  if (layout) {
    layout->dataStart = out.size();
    layout->tensors = placed; // in add order, at their places in the file
    for (SafetensorsTensor &t : layout->tensors) {
      t.begin += layout->dataStart;
      t.end += layout->dataStart;
    }
    layout->metadata = metadata;
  }
  return out;
}

std::vector<uint8_t>
SafetensorsWriter::serialize(SafetensorsHeader *layout) const {
  const std::string header = headerBytes(layout);
  std::vector<uint8_t> out(header.begin(), header.end());
  out.reserve(header.size() + dataSize);
  for (size_t i : fileOrder())
    out.insert(out.end(), data[i].begin(), data[i].end());
  return out;
}

SafetensorsHeader SafetensorsWriter::write(const std::string &path) const {
  SafetensorsHeader layout;
  const std::string header = headerBytes(&layout);
  std::vector<ByteSpan> parts{{header.data(), header.size()}};
  for (size_t i : fileOrder())
    parts.push_back({data[i].data(), data[i].size()});
  writeFileDurably(path, parts);
  return layout;
}
