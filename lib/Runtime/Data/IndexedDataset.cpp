//===- IndexedDataset.cpp - Megatron MMapIndexedDataset reader/writer -----===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Reads the PREFIX.idx/PREFIX.bin pair that Megatron-LM and GPT-NeoX
// preprocess into. Both files are untrusted: every field is checked before use.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Data.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace dsc::rt;

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kVersion = 1;
/// magic (9) + version (8) + dtype (1) + sequence count (8) + doc count (8).
constexpr size_t kHeaderSize = 34;

[[noreturn]] void fail(const std::string &path, const std::string &what) {
  throw Error("'" + path + "': " + what);
}

/// A read-only mapping of a whole file; an empty file maps to nothing.
struct Mapping {
  const uint8_t *data = nullptr;
  size_t size = 0;

  static Mapping map(const std::string &path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      fail(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int e = errno;
      ::close(fd);
      fail(path, std::string("cannot stat: ") + std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      fail(path, "not a regular file");
    }
    Mapping m;
    m.size = size_t(st.st_size);
    if (m.size > 0) {
      void *p = ::mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        int e = errno;
        ::close(fd);
        fail(path, std::string("cannot mmap: ") + std::strerror(e));
      }
      m.data = static_cast<const uint8_t *>(p);
    }
    ::close(fd);
    return m;
  }
  static void unmap(const uint8_t *data, size_t size) {
    if (data)
      ::munmap(const_cast<uint8_t *>(data), size);
  }
};

/// Unaligned little-endian loads (the .idx arrays start at odd offsets).
template <typename T> T load(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

const char *dtypeName(uint8_t code) {
  switch (code) {
  case 1:
    return "uint8";
  case 2:
    return "int8";
  case 3:
    return "int16";
  case 4:
    return "int32";
  case 5:
    return "int64";
  case 6:
    return "float64";
  case 7:
    return "float32";
  case 8:
    return "uint16";
  default:
    return "unknown";
  }
}

std::string printable(const uint8_t *p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') {
      s += char(p[i]);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", p[i]);
      s += buf;
    }
  }
  return s;
}

/// Reads one token of the given dtype as int64.
int64_t loadToken(const uint8_t *p, IndexedDType t) {
  switch (t) {
  case IndexedDType::UInt8:
    return *p;
  case IndexedDType::Int8:
    return int8_t(*p);
  case IndexedDType::Int16:
    return load<int16_t>(p);
  case IndexedDType::Int32:
    return load<int32_t>(p);
  case IndexedDType::Int64:
    return load<int64_t>(p);
  case IndexedDType::UInt16:
    return load<uint16_t>(p);
  default:
    return -1;
  }
}

} // namespace

int dsc::rt::indexedDTypeSize(uint8_t code) {
  switch (code) {
  case 1:
  case 2:
    return 1;
  case 3:
  case 8:
    return 2;
  case 4:
    return 4;
  case 5:
    return 8;
  default:
    return 0; // unknown, or float64/float32: not token types
  }
}

std::unique_ptr<IndexedDataset> IndexedDataset::open(const std::string &prefix,
                                                     int64_t modelVocab) {
  const std::string idxPath = prefix + ".idx", binPath = prefix + ".bin";
  std::unique_ptr<IndexedDataset> ds(new IndexedDataset());
  ds->prefix = prefix;
  ds->vocab = modelVocab;

  Mapping idx = Mapping::map(idxPath);
  // Unmap the index on every exit; its contents are copied out below.
  struct Unmap {
    Mapping &m;
    ~Unmap() { Mapping::unmap(m.data, m.size); }
  } unmapIdx{idx};

  if (idx.size < kHeaderSize)
    fail(idxPath, "truncated header: the file has " + std::to_string(idx.size) +
                      " bytes, an index header "
                      "needs " +
                      std::to_string(kHeaderSize));
  // Megatron's older, non-mmap IndexedDataset: say how to convert.
  if (std::memcmp(idx.data, "TNTIDX\0\0", 8) == 0)
    fail(idxPath, "this is the old IndexedDataset format (magic 'TNTIDX'); "
                  "preprocess again with --dataset-impl mmap to get the "
                  "MMapIndexedDataset format ('MMIDIDX')");
  if (std::memcmp(idx.data, kMagic, sizeof(kMagic)) != 0)
    fail(idxPath, "bad magic '" + printable(idx.data, sizeof(kMagic)) +
                      "': expected 'MMIDIDX\\x00\\x00' (a Megatron "
                      "MMapIndexedDataset index)");
  uint64_t version = load<uint64_t>(idx.data + 9);
  if (version != kVersion)
    fail(idxPath, "unsupported index version " + std::to_string(version) +
                      " (expected 1)");
  uint8_t code = idx.data[17];
  int elem = indexedDTypeSize(code);
  if (elem == 0)
    fail(idxPath, "dtype code " + std::to_string(code) + " (" +
                      dtypeName(code) +
                      ") is not an integer token type (expected 1-5 or 8)");
  ds->type = IndexedDType(code);
  ds->elemSize = elem;

  uint64_t n = load<uint64_t>(idx.data + 18);
  uint64_t m = load<uint64_t>(idx.data + 26);
  // Bound the counts by the file size before multiplying, so a hostile
  // header cannot overflow the expected-size computation.
  const uint64_t body = idx.size - kHeaderSize;
  if (n > body / 12 || m > body / 8 || 12 * n + 8 * m != body)
    fail(idxPath,
         "size mismatch: the header declares " + std::to_string(n) +
             " sequences and " + std::to_string(m) + " documents, which take " +
             (n > body / 12 || m > body / 8
                  ? std::string("more than the file holds")
                  : std::to_string(kHeaderSize + 12 * n + 8 * m) + " bytes") +
             ", but the file has " + std::to_string(idx.size) +
             " bytes (truncated or corrupt)");

  Mapping bin = Mapping::map(binPath);
  ds->bin = bin.data;
  ds->binSize = bin.size;

  const uint8_t *sizesAt = idx.data + kHeaderSize;
  const uint8_t *pointersAt = sizesAt + 4 * n;
  const uint8_t *docAt = pointersAt + 8 * n;
  ds->sizes.resize(n);
  ds->pointers.resize(n);
  ds->starts.resize(n + 1);
  ds->starts[0] = 0;
  for (uint64_t i = 0; i < n; ++i) {
    int32_t size = load<int32_t>(sizesAt + 4 * i);
    int64_t ptr = load<int64_t>(pointersAt + 8 * i);
    if (size < 0)
      fail(idxPath, "sequence " + std::to_string(i) + " has negative size " +
                        std::to_string(size));
    if (ptr < 0 || uint64_t(ptr) > bin.size ||
        uint64_t(size) > (bin.size - uint64_t(ptr)) / uint64_t(elem))
      fail(binPath, "sequence " + std::to_string(i) + " (pointer " +
                        std::to_string(ptr) + ", " + std::to_string(size) +
                        " tokens of " + std::to_string(elem) +
                        " bytes) lies outside the file, which has " +
                        std::to_string(bin.size) + " bytes (from '" + idxPath +
                        "')");
    ds->sizes[i] = size;
    ds->pointers[i] = ptr;
    ds->starts[i + 1] = ds->starts[i] + size;
  }
  ds->docIdx.resize(m);
  int64_t prev = 0;
  for (uint64_t i = 0; i < m; ++i) {
    int64_t d = load<int64_t>(docAt + 8 * i);
    if (d < prev || uint64_t(d) > n)
      fail(idxPath, "document index entry " + std::to_string(i) + " is " +
                        std::to_string(d) +
                        ": entries must be non-decreasing "
                        "sequence indices within [0, " +
                        std::to_string(n) + "]");
    ds->docIdx[i] = prev = d;
  }
  return ds;
}

IndexedDataset::~IndexedDataset() { Mapping::unmap(bin, binSize); }

std::string IndexedDataset::describe() const {
  return "indexed dataset '" + prefix + "'";
}

void IndexedDataset::readSequence(int64_t i, int64_t offset, int64_t count,
                                  int32_t *out) const {
  if (i < 0 || i >= numSequences() || offset < 0 || count < 0 ||
      offset > sizes[i] || count > sizes[i] - offset)
    throw Error(describe() + ": read of tokens [" + std::to_string(offset) +
                ", " + std::to_string(offset + count) + ") of sequence " +
                std::to_string(i) + " is out of range");
  const uint8_t *p = bin + pointers[i] + offset * elemSize;
  for (int64_t j = 0; j < count; ++j) {
    int64_t t = loadToken(p + j * elemSize, type);
    if (t < 0 || t >= vocab)
      throw Error("'" + prefix + ".bin': token id " + std::to_string(t) +
                  " (sequence " + std::to_string(i) + ", position " +
                  std::to_string(offset + j) +
                  ") is outside the model's vocab of " + std::to_string(vocab) +
                  " (was the data tokenized for another model?)");
    out[j] = int32_t(t);
  }
}

void IndexedDataset::read(int64_t offset, int64_t count, int32_t *out) const {
  if (offset < 0 || count < 0 || offset > size() || count > size() - offset)
    throw Error(describe() + ": read of " + std::to_string(count) +
                " tokens at offset " + std::to_string(offset) +
                " is outside its " + std::to_string(size()) + " tokens");
  // The sequence holding `offset`: the last start <= offset.
  int64_t i = int64_t(std::upper_bound(starts.begin(), starts.end(), offset) -
                      starts.begin()) -
              1;
  while (count > 0) {
    int64_t within = offset - starts[i];
    int64_t take = std::min<int64_t>(count, sizes[i] - within);
    if (take > 0)
      readSequence(i, within, take, out);
    out += take;
    offset += take;
    count -= take;
    ++i;
  }
}

void dsc::rt::writeIndexedDataset(
    const std::string &prefix,
    const std::vector<std::vector<int64_t>> &documents, IndexedDType dtype) {
  const int elem = indexedDTypeSize(uint8_t(dtype));
  if (elem == 0)
    throw Error("cannot write '" + prefix + ".idx': dtype " +
                dtypeName(uint8_t(dtype)) + " is not a token type");
  int64_t lo = 0, hi = 0;
  switch (dtype) {
  case IndexedDType::UInt8:
    hi = 255;
    break;
  case IndexedDType::Int8:
    lo = -128, hi = 127;
    break;
  case IndexedDType::Int16:
    lo = -32768, hi = 32767;
    break;
  case IndexedDType::UInt16:
    hi = 65535;
    break;
  case IndexedDType::Int32:
    lo = INT32_MIN, hi = INT32_MAX;
    break;
  default:
    lo = INT64_MIN, hi = INT64_MAX;
  }

  auto openOut = [](const std::string &path) {
    std::FILE *f = std::fopen(path.c_str(), "wb");
    if (!f)
      throw Error("cannot write '" + path + "': " + std::strerror(errno));
    return f;
  };
  auto put = [](std::FILE *f, const void *p, size_t n,
                const std::string &path) {
    if (n && std::fwrite(p, 1, n, f) != n) {
      std::fclose(f);
      throw Error("cannot write '" + path + "': " + std::strerror(errno));
    }
  };

  const std::string binPath = prefix + ".bin", idxPath = prefix + ".idx";
  std::FILE *bin = openOut(binPath);
  std::vector<int32_t> sizes;
  std::vector<int64_t> pointers;
  int64_t offset = 0;
  for (size_t d = 0; d < documents.size(); ++d) {
    const auto &doc = documents[d];
    std::vector<uint8_t> bytes(doc.size() * elem);
    for (size_t j = 0; j < doc.size(); ++j) {
      int64_t t = doc[j];
      if (t < lo || t > hi) {
        std::fclose(bin);
        throw Error("cannot write '" + binPath + "': token " +
                    std::to_string(t) + " of document " + std::to_string(d) +
                    " does not fit " + dtypeName(uint8_t(dtype)));
      }
      // Little-endian truncation to elem bytes (x86 and ARM hosts).
      std::memcpy(bytes.data() + j * elem, &t, elem);
    }
    put(bin, bytes.data(), bytes.size(), binPath);
    sizes.push_back(int32_t(doc.size()));
    pointers.push_back(offset);
    offset += int64_t(bytes.size());
  }
  if (std::fclose(bin) != 0)
    throw Error("cannot write '" + binPath + "': " + std::strerror(errno));

  // One document per sequence: doc_idx = 0, 1, ..., N (Megatron's layout).
  std::vector<int64_t> docIdx(documents.size() + 1);
  for (size_t i = 0; i < docIdx.size(); ++i)
    docIdx[i] = int64_t(i);
  std::FILE *idx = openOut(idxPath);
  uint64_t version = kVersion, n = sizes.size(), m = docIdx.size();
  uint8_t code = uint8_t(dtype);
  put(idx, kMagic, sizeof(kMagic), idxPath);
  put(idx, &version, 8, idxPath);
  put(idx, &code, 1, idxPath);
  put(idx, &n, 8, idxPath);
  put(idx, &m, 8, idxPath);
  put(idx, sizes.data(), 4 * n, idxPath);
  put(idx, pointers.data(), 8 * n, idxPath);
  put(idx, docIdx.data(), 8 * m, idxPath);
  if (std::fclose(idx) != 0)
    throw Error("cannot write '" + idxPath + "': " + std::strerror(errno));
}
