//===- Checkpoint.cpp - Saving and restoring training state ---------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A checkpoint holds what a step leaves behind (parameters, optimizer
// state, the step and the samples consumed), keyed by buffer name so it
// survives a re-planned memory layout. Like a plan file it is untrusted: a
// load checks everything before it changes anything.
//
// Layout (little-endian): magic "DSCCKPT\0", u32 version, u32 reserved (0),
// u64 body length, u64 FNV-1a 64 of the body; body: i64 step, i64 consumed
// samples, u64 seed, u32 count, then per buffer u32 name length + name,
// u32 role, u32 dtype, u32 rank + i64 dims[rank], u64 bytes + the bytes;
// from version 2, then u32 1 and the loss scaler's state (f64 scale bits,
// u32 hysteresis left, i64 iteration, i64 last overflow, i64 skipped) for a
// plan that scales its loss (fp16), or u32 0. Version 1 files still load.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/PlanIO.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>

using namespace dsc::rt;

namespace {

constexpr char kMagic[8] = {'D', 'S', 'C', 'C', 'K', 'P', 'T', '\0'};
constexpr uint32_t kVersion = 2;
constexpr uint32_t kOldestVersion = 1;
constexpr size_t kHeader = 32;

bool checkpointed(BufferRole role) {
  return role == BufferRole::Parameter || role == BufferRole::OptimizerState;
}

void putLE(std::vector<uint8_t> &out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i)
    out.push_back(uint8_t(v >> (8 * i)));
}

/// Bounds-checked little-endian reads; errors name the file and field.
struct Cursor {
  const uint8_t *data;
  size_t size, pos = 0;
  std::string what;

  [[noreturn]] void fail(const std::string &msg) const {
    throw Error(what + ": " + msg);
  }
  uint64_t le(int n, const std::string &field) {
    if (size - pos < size_t(n))
      fail("truncated in " + field + " at offset " +
           std::to_string(kHeader + pos));
    uint64_t v = 0;
    for (int i = 0; i < n; ++i)
      v |= uint64_t(data[pos + i]) << (8 * i);
    pos += n;
    return v;
  }
  const uint8_t *bytes(uint64_t n, const std::string &field) {
    if (n > size - pos)
      fail("truncated in " + field + ": " + std::to_string(n) +
           " bytes needed, " + std::to_string(size - pos) + " remain");
    const uint8_t *p = data + pos;
    pos += n;
    return p;
  }
};

struct Entry {
  uint32_t buffer;
  const uint8_t *data;
};

} // namespace

void Executor::refuseShardedCheckpoint(const std::string &verb,
                                      const std::string &path) const {
  // A rank holds only its part of these; saving rank 0's part as the whole
  // would lose the others' (distributed checkpoints are not built yet).
  for (const Buffer &b : thePlan.buffers)
    if (!b.layout.isWhole())
      throw Error("cannot " + verb + " checkpoint '" + path + "': buffer '" +
                  b.name +
                  "' is sharded over the mesh (ZeRO or tensor slicing) and "
                  "dsc checkpoints hold whole tensors; train without "
                  "--save/--load or with zero=0 and tp=1");
}

void Executor::saveCheckpoint(const std::string &path,
                              int64_t consumedSamples) {
  refuseShardedCheckpoint("save to", path);
  std::vector<uint8_t> body;
  putLE(body, uint64_t(currentStep), 8);
  putLE(body, uint64_t(consumedSamples), 8);
  putLE(body, seed, 8);
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < thePlan.buffers.size(); ++i)
    if (checkpointed(thePlan.buffers[i].role))
      ids.push_back(i);
  putLE(body, ids.size(), 4);
  for (uint32_t id : ids) {
    const Buffer &b = thePlan.buffers[id];
    putLE(body, b.name.size(), 4);
    body.insert(body.end(), b.name.begin(), b.name.end());
    putLE(body, uint32_t(b.role), 4);
    putLE(body, uint32_t(b.dtype), 4);
    putLE(body, b.shape.size(), 4);
    for (int64_t d : b.shape)
      putLE(body, uint64_t(d), 8);
    putLE(body, b.bytes, 8);
    // Appended through the backend: the buffer may be device memory.
    const size_t at = body.size();
    body.resize(at + b.bytes);
    if (b.bytes)
      backendImpl->copyOut(body.data() + at, buffer(id).data, b.bytes);
  }
  // The loss scaler, so a resumed fp16 run goes on at its scale.
  putLE(body, scaler ? 1 : 0, 4);
  if (scaler) {
    const LossScalerState st = scaler->state();
    uint64_t bits;
    std::memcpy(&bits, &st.scale, sizeof bits);
    putLE(body, bits, 8);
    putLE(body, uint64_t(st.hysteresisLeft), 4);
    putLE(body, uint64_t(st.iteration), 8);
    putLE(body, uint64_t(st.lastOverflowIteration), 8);
    putLE(body, uint64_t(st.skippedSteps), 8);
  }
  std::vector<uint8_t> file(kMagic, kMagic + 8);
  putLE(file, kVersion, 4);
  putLE(file, 0, 4);
  putLE(file, body.size(), 8);
  putLE(file, fnv1a64(body.data(), body.size()), 8);

  // Write a sibling file and rename it over the target, so a crash while
  // saving never destroys the previous checkpoint.
  std::string tmp = path + ".tmp";
  {
    std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
    if (!os)
      throw Error("cannot open checkpoint file '" + tmp +
                  "' for writing: " + std::strerror(errno));
    os.write(reinterpret_cast<const char *>(file.data()),
             std::streamsize(file.size()));
    os.write(reinterpret_cast<const char *>(body.data()),
             std::streamsize(body.size()));
    os.close();
    if (!os) {
      std::remove(tmp.c_str());
      throw Error("cannot write checkpoint file '" + tmp + "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw Error("cannot move checkpoint '" + tmp + "' to '" + path +
                "': " + std::strerror(err));
  }
}

int64_t Executor::loadCheckpoint(const std::string &path) {
  refuseShardedCheckpoint("load", path);
  const std::string what = "checkpoint '" + path + "'";
  std::ifstream is(path, std::ios::binary);
  if (!is)
    throw Error("cannot open " + what + ": " + std::strerror(errno));
  std::vector<uint8_t> file;
  try {
    file.assign(std::istreambuf_iterator<char>(is),
                std::istreambuf_iterator<char>());
  } catch (const std::exception &e) {
    throw Error("cannot read " + what + ": " + e.what());
  }
  if (file.size() < kHeader || std::memcmp(file.data(), kMagic, 8) != 0)
    throw Error(what + ": not a dsc checkpoint (no \"DSCCKPT\\0\" header)");
  Cursor h{file.data() + 8, kHeader - 8, 0, what};
  uint32_t version = uint32_t(h.le(4, "version"));
  if (version < kOldestVersion || version > kVersion)
    throw Error(what + ": checkpoint format version " +
                std::to_string(version) + " is not supported: this runtime " +
                "reads versions " + std::to_string(kOldestVersion) + " to " +
                std::to_string(kVersion));
  h.le(4, "reserved");
  uint64_t length = h.le(8, "body length");
  uint64_t checksum = h.le(8, "checksum");
  if (length != file.size() - kHeader)
    throw Error(what + ": body length " + std::to_string(length) + " but " +
                std::to_string(file.size() - kHeader) +
                " bytes follow the header (truncated?)");
  if (fnv1a64(file.data() + kHeader, length) != checksum)
    throw Error(what + ": checksum mismatch (the file is corrupt)");

  // Parse and check everything before touching any buffer.
  Cursor c{file.data() + kHeader, length, 0, what};
  int64_t step = int64_t(c.le(8, "step"));
  int64_t consumed = int64_t(c.le(8, "consumed samples"));
  c.le(8, "seed");
  if (step < 1 || consumed < 0)
    c.fail("step " + std::to_string(step) + " / consumed samples " +
           std::to_string(consumed) + " out of range");
  uint32_t count = uint32_t(c.le(4, "buffer count"));
  std::map<std::string, Entry> entries;
  for (uint32_t e = 0; e < count; ++e) {
    std::string field = "entry " + std::to_string(e);
    uint64_t nameLength = c.le(4, field + " name length");
    const uint8_t *nameData = c.bytes(nameLength, field + " name");
    std::string name(reinterpret_cast<const char *>(nameData), nameLength);
    field = "buffer '" + name + "'";
    uint32_t role = uint32_t(c.le(4, field + " role"));
    uint32_t dtype = uint32_t(c.le(4, field + " dtype"));
    uint64_t rank = c.le(4, field + " rank");
    if (rank > 64)
      c.fail(field + " has rank " + std::to_string(rank));
    std::vector<int64_t> shape(rank);
    for (int64_t &d : shape)
      d = int64_t(c.le(8, field + " shape"));
    uint64_t bytes = c.le(8, field + " bytes");
    const uint8_t *data = c.bytes(bytes, field + " data");
    int64_t id = thePlan.findBuffer(name);
    if (id < 0 || !checkpointed(thePlan.buffers[id].role))
      c.fail(field + " is not a parameter or optimizer state of this plan");
    const Buffer &b = thePlan.buffers[id];
    if (role != uint32_t(b.role) || dtype != uint32_t(b.dtype) ||
        shape != b.shape || bytes != b.bytes)
      c.fail(field + " is " +
             (dtype <= uint32_t(DType::F16) ? dtypeName(DType(dtype))
                                            : "an unknown dtype") +
             " " + shapeString(shape) + " in the checkpoint but " +
             dtypeName(b.dtype) + " " + shapeString(b.shape) + " in the plan");
    if (!entries.emplace(name, Entry{uint32_t(id), data}).second)
      c.fail(field + " appears twice");
  }
  std::optional<LossScalerState> scalerState;
  if (version >= 2 && c.le(4, "loss scaler flag") != 0) {
    LossScalerState st;
    uint64_t bits = c.le(8, "loss scale");
    std::memcpy(&st.scale, &bits, sizeof bits);
    st.hysteresisLeft = int(uint32_t(c.le(4, "loss scaler hysteresis")));
    st.iteration = int64_t(c.le(8, "loss scaler iteration"));
    st.lastOverflowIteration = int64_t(c.le(8, "loss scaler last overflow"));
    st.skippedSteps = int64_t(c.le(8, "loss scaler skipped steps"));
    // Checked now, whether or not this plan scales: the file is one whole.
    if (!DynamicLossScaler().restore(st))
      c.fail("loss scaler state (scale " + std::to_string(st.scale) +
             ", hysteresis " + std::to_string(st.hysteresisLeft) +
             ", iteration " + std::to_string(st.iteration) +
             ") is not one DeepSpeed's defaults can reach");
    scalerState = st;
  }
  if (c.pos != c.size)
    c.fail(std::to_string(c.size - c.pos) + " unexpected trailing bytes");
  for (const Buffer &b : thePlan.buffers)
    if (checkpointed(b.role) && !entries.count(b.name))
      c.fail("has no buffer '" + b.name + "' (" + roleName(b.role) +
             ") that the plan needs");

  for (const auto &[name, entry] : entries) {
    BufferView v = buffer(entry.buffer);
    if (v.desc->bytes)
      backendImpl->copyIn(v.data, entry.data, v.desc->bytes);
  }
  // Gradients are zero between steps; a checkpoint is taken between steps.
  for (uint32_t i = 0; i < thePlan.buffers.size(); ++i)
    if (thePlan.buffers[i].role == BufferRole::Gradient && buffer(i).data)
      backendImpl->fillZero(buffer(i).data, thePlan.buffers[i].bytes);
  // A plan without loss scaling ignores a saved scaler (an fp16 run
  // resumed in bf16 or fp32); a scaling plan without one starts afresh.
  if (scaler) {
    scaler.emplace();
    if (scalerState)
      scaler->restore(*scalerState);
  }
  currentStep = step;
  return consumed;
}
