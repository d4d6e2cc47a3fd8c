//===- Manifest.cpp - sharded checkpoints: manifest and boxes -------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// A manifest is untrusted input: parseManifest checks every field's type and
// range, every piece's box against its tensor, and that the pieces of each
// tensor cover its elements exactly once, before a loader reads any data.
// Coverage is checked on runs of consecutive flat indices (a box row, or
// more when trailing dims are whole), not element by element.
//
//===----------------------------------------------------------------------===//

#include "FileIO.h"
#include "Shapes.h"
#include "dsc/Runtime/Checkpoint.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Fnv1a.h"
#include "dsc/Runtime/Safetensors.h"

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <set>

using namespace dsc::rt;
using namespace dsc::rt::checkpoint;
using Json = nlohmann::json;

namespace {

/// A tensor split into more runs than this is refused (a hostile manifest
/// must not make the check run for hours).
constexpr int64_t kMaxRunsPerTensor = int64_t(1) << 24;
constexpr int64_t kMaxDim = int64_t(1) << 50;

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

} // namespace

//===----------------------------------------------------------------------===//
// Boxes
//===----------------------------------------------------------------------===//

int64_t TensorBox::count() const {
  if (flatCount >= 0)
    return flatCount;
  return elementCount(sizes);
}

std::string dsc::rt::checkTensorBox(const TensorBox &box,
                                    int64_t wholeElements) {
  const size_t rank = box.view.size();
  if (box.offsets.size() != rank || box.sizes.size() != rank)
    return "view " + shapeText(box.view) + " has " +
           std::to_string(box.offsets.size()) + " offsets and " +
           std::to_string(box.sizes.size()) + " sizes";
  for (size_t d = 0; d < rank; ++d)
    if (box.view[d] < 1 || box.view[d] > kMaxDim)
      return "view " + shapeText(box.view) +
             " has a dimension outside [1, "
             "2^50]";
  const int64_t viewElements = elementCount(box.view);
  if (viewElements != wholeElements)
    return "view " + shapeText(box.view) + " has " +
           std::to_string(viewElements) + " elements but the tensor has " +
           std::to_string(wholeElements);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t off = box.offsets[d], size = box.sizes[d];
    if (off < 0 || size < 1 || off > box.view[d] || size > box.view[d] - off)
      return "box offset " + std::to_string(off) + " + size " +
             std::to_string(size) + " is outside view dimension " +
             std::to_string(d) + " (" + std::to_string(box.view[d]) + ")";
  }
  const int64_t boxElements = elementCount(box.sizes);
  if (box.flatCount == -1) {
    if (box.flatOffset != 0)
      return "flat offset " + std::to_string(box.flatOffset) +
             " without a flat count";
    return "";
  }
  if (box.flatOffset < 0 || box.flatCount < 1 || box.flatOffset > boxElements ||
      box.flatCount > boxElements - box.flatOffset)
    return "flat range [" + std::to_string(box.flatOffset) + ", +" +
           std::to_string(box.flatCount) + ") is outside the box's " +
           std::to_string(boxElements) + " elements";
  return "";
}

BoxIndexer::BoxIndexer(const TensorBox &box)
    : view(box.view), offsets(box.offsets), sizes(box.sizes),
      flatOffset(box.flatOffset), elements(box.count()) {
  if (view.empty()) {
    view = offsets = sizes = {1};
    offsets = {0};
  }
  size_t d = view.size();
  while (d > 1 && sizes[d - 1] == view[d - 1])
    --d;
  for (size_t e = d - 1; e < view.size(); ++e)
    inner *= sizes[e];
}

int64_t BoxIndexer::whole(int64_t j) const {
  int64_t b = flatOffset + j, w = 0, stride = 1;
  for (size_t d = view.size(); d-- > 0;) {
    w += (offsets[d] + b % sizes[d]) * stride;
    b /= sizes[d];
    stride *= view[d];
  }
  return w;
}

int64_t BoxIndexer::local(int64_t w) const {
  int64_t b = 0, stride = 1;
  for (size_t d = view.size(); d-- > 0;) {
    const int64_t i = w % view[d] - offsets[d];
    w /= view[d];
    if (i < 0 || i >= sizes[d])
      return -1;
    b += i * stride;
    stride *= sizes[d];
  }
  const int64_t j = b - flatOffset;
  return j >= 0 && j < elements ? j : -1;
}

int64_t BoxIndexer::runFrom(int64_t j) const {
  const int64_t b = flatOffset + j;
  return std::min(elements - j, inner - b % inner);
}

bool dsc::rt::shapesCompatible(const std::vector<int64_t> &a,
                               const std::vector<int64_t> &b) {
  if (elementCount(a) != elementCount(b) || elementCount(a) < 0)
    return false;
  auto products = [](const std::vector<int64_t> &s) {
    std::set<int64_t> out;
    int64_t p = 1;
    for (int64_t d : s)
      out.insert(p *= d);
    return out;
  };
  std::set<int64_t> pa = products(a), pb = products(b);
  // A dim of 1 adds a product already there; ignore such differences.
  return std::includes(pa.begin(), pa.end(), pb.begin(), pb.end()) ||
         std::includes(pb.begin(), pb.end(), pa.begin(), pa.end());
}

//===----------------------------------------------------------------------===//
// The manifest
//===----------------------------------------------------------------------===//

const CheckpointTensor *
CheckpointManifest::find(const std::string &name) const {
  for (const CheckpointTensor &t : tensors)
    if (t.name == name)
      return &t;
  return nullptr;
}

uint64_t dsc::rt::checkpointChecksum(const uint8_t *data, size_t size) {
  return XXH3_64bits(data, size);
}

std::string
dsc::rt::modelFingerprint(const std::vector<CheckpointTensor> &tensors) {
  std::vector<const CheckpointTensor *> sorted;
  for (const CheckpointTensor &t : tensors)
    sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](auto *a, auto *b) { return a->name < b->name; });
  std::string text;
  for (const CheckpointTensor *t : sorted)
    text += t->name + " " + safetensorsDTypeName(t->dtype) + " " +
            shapeText(t->shape) + "\n";
  return hex16(
      fnv1a64(reinterpret_cast<const uint8_t *>(text.data()), text.size()));
}

std::string dsc::rt::formatManifest(const CheckpointManifest &m) {
  // ordered_json keeps our key order (format and version first); each
  // piece goes on one line so a manifest reads like a table.
  using Ordered = nlohmann::ordered_json;
  Ordered head;
  head["format"] = "dsc-checkpoint";
  head["version"] = m.version;
  head["fingerprint"] = m.fingerprint;
  head["iteration"] = m.iteration;
  head["optimizer_steps"] = m.optimizerSteps;
  head["consumed_samples"] = m.consumedSamples;
  head["seed"] = m.seed;
  head["plan"] = {{"mesh", m.mesh}, {"ranks", m.ranks}};
  head["loss_scaler"] = nullptr;
  if (m.lossScaler)
    head["loss_scaler"] = {
        {"scale", m.lossScaler->scale},
        {"hysteresis_left", m.lossScaler->hysteresisLeft},
        {"iteration", m.lossScaler->iteration},
        {"last_overflow_iteration", m.lossScaler->lastOverflowIteration},
        {"skipped_steps", m.lossScaler->skippedSteps}};
  if (m.tokens)
    head["tokens"] = {{"consumed", m.tokens->consumed},
                      {"scheduler", m.tokens->scheduler},
                      {"warmup_end", m.tokens->warmupEnd}};
  head["files"] = m.files;
  head[kManifestChecksumKey] = kManifestChecksumPlaceholder;
  std::string text = "{\n";
  for (auto it = head.begin(); it != head.end(); ++it)
    text += " " + Ordered(it.key()).dump() + ": " + it.value().dump() + ",\n";
  text += " \"tensors\": [";
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const CheckpointTensor &t = m.tensors[i];
    Ordered tensor;
    tensor["name"] = t.name;
    tensor["role"] = t.role;
    tensor["dtype"] = safetensorsDTypeName(t.dtype);
    tensor["shape"] = t.shape;
    std::string head = tensor.dump();
    head.pop_back(); // the closing brace: pieces follow
    text += (i ? ",\n  " : "\n  ") + head + ", \"pieces\": [";
    for (size_t k = 0; k < t.pieces.size(); ++k) {
      const CheckpointPiece &p = t.pieces[k];
      Ordered piece;
      piece["file"] = p.file;
      piece["key"] = p.key;
      piece["view"] = p.box.view;
      piece["offsets"] = p.box.offsets;
      piece["sizes"] = p.box.sizes;
      if (p.box.flatCount >= 0)
        piece["flat"] = {p.box.flatOffset, p.box.flatCount};
      piece["byte_offset"] = p.byteOffset;
      piece["byte_length"] = p.byteLength;
      piece["xxh3_64"] = hex16(p.checksum);
      text += (k ? ",\n    " : "\n    ") + piece.dump();
    }
    text += "]}";
  }
  text += "\n ]\n}\n";
  // The manifest's own numbers (iteration, optimizer steps, samples, seed)
  // are protected like the pieces' bytes: the hash of the text with the
  // placeholder in place of the hash.
  const size_t at = text.find(kManifestChecksumPlaceholder);
  text.replace(
      at, std::strlen(kManifestChecksumPlaceholder),
      hex16(checkpointChecksum(reinterpret_cast<const uint8_t *>(text.data()),
                               text.size())));
  return text;
}

namespace {

/// Typed access to the manifest's JSON with errors naming the file and the
/// field.
struct Fields {
  std::string what;

  [[noreturn]] void fail(const std::string &msg) const {
    throw Error(what + ": " + msg);
  }
  const Json &get(const Json &obj, const char *key,
                  const std::string &ctx) const {
    auto it = obj.find(key);
    if (it == obj.end())
      fail(ctx + "has no \"" + key + "\"");
    return *it;
  }
  int64_t integer(const Json &obj, const char *key, const std::string &ctx,
                  int64_t lo = 0) const {
    const Json &v = get(obj, key, ctx);
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) ||
        v.get<int64_t>() < lo)
      fail(ctx + "\"" + key + "\" is not an integer >= " + std::to_string(lo));
    return v.get<int64_t>();
  }
  uint64_t unsignedInteger(const Json &obj, const char *key,
                           const std::string &ctx) const {
    const Json &v = get(obj, key, ctx);
    if (!v.is_number_unsigned())
      fail(ctx + "\"" + key + "\" is not an unsigned integer");
    return v.get<uint64_t>();
  }
  std::string string(const Json &obj, const char *key,
                     const std::string &ctx) const {
    const Json &v = get(obj, key, ctx);
    if (!v.is_string())
      fail(ctx + "\"" + key + "\" is not a string");
    return v.get<std::string>();
  }
  std::vector<int64_t> integers(const Json &obj, const char *key,
                                const std::string &ctx) const {
    const Json &v = get(obj, key, ctx);
    if (!v.is_array() || v.size() > 64)
      fail(ctx + "\"" + key + "\" is not an array of at most 64 integers");
    std::vector<int64_t> out;
    for (const Json &e : v) {
      if (!e.is_number_integer() ||
          (e.is_number_unsigned() && e.get<uint64_t>() > uint64_t(kMaxDim)) ||
          e.get<int64_t>() < 0 || e.get<int64_t>() > kMaxDim)
        fail(ctx + "\"" + key + "\" holds a value outside [0, 2^50]");
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
};

/// A file name inside the step directory: no path, nothing hidden.
bool plainFileName(const std::string &name) {
  if (name.empty() || name.size() > 255 || name[0] == '.')
    return false;
  for (char c : name)
    if (c == '/' || c == '\\' || c == '\0')
      return false;
  return true;
}

/// Checks that the pieces of `t` cover its elements exactly once.
void checkCoverage(const CheckpointTensor &t, const Fields &f) {
  const std::string ctx = "tensor '" + t.name + "': ";
  const int64_t whole = elementCount(t.shape);
  std::vector<std::pair<int64_t, int64_t>> runs; // [begin, end)
  int64_t total = 0;
  for (size_t p = 0; p < t.pieces.size(); ++p) {
    BoxIndexer box(t.pieces[p].box);
    total += box.count();
    if (total > whole)
      f.fail(ctx + "its pieces hold " + std::to_string(total) +
             " or more elements, more than its " + std::to_string(whole) +
             " (overlapping pieces)");
    for (int64_t j = 0; j < box.count();) {
      const int64_t w = box.whole(j), n = box.runFrom(j);
      if (!runs.empty() && runs.back().second == w)
        runs.back().second = w + n;
      else
        runs.push_back({w, w + n});
      if (int64_t(runs.size()) > kMaxRunsPerTensor)
        f.fail(ctx + "its pieces are split into more than 2^24 runs");
      j += n;
    }
  }
  std::sort(runs.begin(), runs.end());
  int64_t at = 0;
  for (const auto &[begin, end] : runs) {
    if (begin < at)
      f.fail(ctx + "pieces overlap at element " + std::to_string(begin) +
             " (flat index)");
    if (begin > at)
      f.fail(ctx + "no piece holds elements " + std::to_string(at) + " to " +
             std::to_string(begin - 1) + " (flat index): a gap");
    at = end;
  }
  if (at != whole)
    f.fail(ctx + "no piece holds elements " + std::to_string(at) + " to " +
           std::to_string(whole - 1) + " (flat index): a gap");
}

} // namespace

/// Checks `text`'s own hash (formatManifest's), when it has one: a
/// manifest written before manifests were hashed has none.
static void checkManifestChecksum(const std::string &text, const Fields &f) {
  const std::string key = std::string("\"") + kManifestChecksumKey + "\": \"";
  const size_t at = text.find(key);
  if (at == std::string::npos)
    return;
  const size_t value = at + key.size();
  const size_t digits = std::strlen(kManifestChecksumPlaceholder);
  if (text.size() < value + digits)
    f.fail("\"" + std::string(kManifestChecksumKey) + "\" is cut short");
  const std::string saved = text.substr(value, digits);
  std::string unhashed = text;
  unhashed.replace(value, digits, kManifestChecksumPlaceholder);
  const std::string actual = hex16(checkpointChecksum(
      reinterpret_cast<const uint8_t *>(unhashed.data()), unhashed.size()));
  if (saved != actual)
    f.fail("its text hashes to " + actual + ", not its \"" +
           std::string(kManifestChecksumKey) + "\" " + saved +
           ": it was changed or damaged after it was written");
}

CheckpointManifest dsc::rt::parseManifest(const std::string &text,
                                          const std::string &file) {
  Fields f{"checkpoint manifest '" + file + "'"};
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    f.fail("not valid JSON");
  if (!j.is_object())
    f.fail("not a JSON object");
  if (f.string(j, "format", "") != "dsc-checkpoint")
    f.fail("\"format\" is not \"dsc-checkpoint\"");
  CheckpointManifest m;
  m.version = f.integer(j, "version", "");
  if (m.version != kCheckpointFormatVersion)
    f.fail("format version " + std::to_string(m.version) +
           " is not supported: this runtime reads version " +
           std::to_string(kCheckpointFormatVersion));
  m.fingerprint = f.string(j, "fingerprint", "");
  m.iteration = f.integer(j, "iteration", "");
  m.optimizerSteps = f.integer(j, "optimizer_steps", "");
  m.consumedSamples = f.integer(j, "consumed_samples", "");
  m.seed = f.unsignedInteger(j, "seed", "");
  if (m.optimizerSteps > m.iteration)
    f.fail("optimizer_steps " + std::to_string(m.optimizerSteps) +
           " exceeds iteration " + std::to_string(m.iteration));
  const Json &plan = f.get(j, "plan", "");
  if (!plan.is_object())
    f.fail("\"plan\" is not an object");
  m.mesh = f.string(plan, "mesh", "plan ");
  m.ranks = f.integer(plan, "ranks", "plan ", 1);

  const Json &scaler = f.get(j, "loss_scaler", "");
  if (!scaler.is_null()) {
    if (!scaler.is_object())
      f.fail("\"loss_scaler\" is neither null nor an object");
    LossScalerState st;
    const Json &scale = f.get(scaler, "scale", "loss_scaler ");
    if (!scale.is_number())
      f.fail("loss_scaler \"scale\" is not a number");
    st.scale = scale.get<double>();
    st.hysteresisLeft = int(std::min<int64_t>(
        f.integer(scaler, "hysteresis_left", "loss_scaler "), INT32_MAX));
    st.iteration = f.integer(scaler, "iteration", "loss_scaler ");
    st.lastOverflowIteration =
        f.integer(scaler, "last_overflow_iteration", "loss_scaler ", -1);
    st.skippedSteps = f.integer(scaler, "skipped_steps", "loss_scaler ");
    // Any scaler's settings may have saved it (a config's fp16 section):
    // check it against the widest; the executor checks its own.
    LossScalerConfig widest;
    widest.minScale = std::numeric_limits<double>::min();
    widest.hysteresis = 1000000;
    if (!DynamicLossScaler(widest).restore(st))
      f.fail("loss_scaler state (scale " + std::to_string(st.scale) +
             ", hysteresis " + std::to_string(st.hysteresisLeft) +
             ", iteration " + std::to_string(st.iteration) +
             ") is not one a loss scaler can reach");
    m.lossScaler = st;
    // Each skipped step is an iteration without an optimizer step (a
    // checkpoint's earlier runs without loss scaling may add more).
    if (m.iteration < m.optimizerSteps + st.skippedSteps)
      f.fail("iteration " + std::to_string(m.iteration) +
             " is less than optimizer_steps " +
             std::to_string(m.optimizerSteps) + " + the loss scaler's " +
             std::to_string(st.skippedSteps) + " skipped steps");
  }

  if (j.contains("tokens")) {
    const Json &tokens = f.get(j, "tokens", "");
    if (!tokens.is_object())
      f.fail("\"tokens\" is not an object");
    TokenCounts t;
    t.consumed = f.integer(tokens, "consumed", "tokens ");
    t.scheduler = f.integer(tokens, "scheduler", "tokens ");
    t.warmupEnd = f.integer(tokens, "warmup_end", "tokens ", -1);
    if (t.scheduler > t.consumed || t.warmupEnd > t.scheduler)
      f.fail("tokens: consumed " + std::to_string(t.consumed) + ", scheduler " +
             std::to_string(t.scheduler) + ", warmup_end " +
             std::to_string(t.warmupEnd) +
             " are not in order (warmup_end <= scheduler <= consumed)");
    m.tokens = t;
  }

  const Json &files = f.get(j, "files", "");
  if (!files.is_array())
    f.fail("\"files\" is not an array");
  std::set<std::string> fileSet;
  for (const Json &name : files) {
    if (!name.is_string() || !plainFileName(name.get<std::string>()))
      f.fail("\"files\" holds something other than a plain file name");
    if (!fileSet.insert(name.get<std::string>()).second)
      f.fail("file '" + name.get<std::string>() + "' is listed twice");
    m.files.push_back(name.get<std::string>());
  }

  const Json &tensors = f.get(j, "tensors", "");
  if (!tensors.is_array())
    f.fail("\"tensors\" is not an array");
  std::set<std::string> names;
  std::set<std::pair<std::string, std::string>> keys;
  for (const Json &tj : tensors) {
    if (!tj.is_object())
      f.fail("\"tensors\" holds something other than an object");
    CheckpointTensor t;
    t.name = f.string(tj, "name", "a tensor ");
    const std::string ctx = "tensor '" + t.name + "' ";
    if (!names.insert(t.name).second)
      f.fail(ctx + "is listed twice");
    t.role = f.string(tj, "role", ctx);
    if (t.role != "parameter" && t.role != "optimizer_state" &&
        t.role != "compression_error")
      f.fail(ctx + "has role '" + t.role +
             "' (not parameter, optimizer_state or compression_error)");
    std::string dtype = f.string(tj, "dtype", ctx);
    if (!parseSafetensorsDType(dtype, t.dtype))
      f.fail(ctx + "has dtype '" + dtype + "', which dsc does not know");
    t.shape = f.integers(tj, "shape", ctx);
    const int64_t whole = elementCount(t.shape);
    if (whole < 1)
      f.fail(ctx + "has shape " + shapeText(t.shape) +
             " with no elements or too many");
    const Json &pieces = f.get(tj, "pieces", ctx);
    if (!pieces.is_array() || pieces.empty())
      f.fail(ctx + "has no pieces");
    for (const Json &pj : pieces) {
      if (!pj.is_object())
        f.fail(ctx + "has a piece that is not an object");
      CheckpointPiece p;
      p.file = f.string(pj, "file", ctx + "piece ");
      p.key = f.string(pj, "key", ctx + "piece ");
      const std::string pctx = ctx + "piece in '" + p.file + "' ";
      // A piece is stored under its tensor's name (or that name and a
      // suffix, for a second piece in one file): pieces moved between two
      // tensors of one shape would load swapped.
      if (p.key != t.name && p.key.rfind(t.name + ".", 0) != 0)
        f.fail(pctx + "is stored under key '" + p.key +
               "', which is not the tensor's name");
      if (!fileSet.count(p.file))
        f.fail(pctx + "names a file not in \"files\"");
      if (!keys.insert({p.file, p.key}).second)
        f.fail(pctx + "reuses key '" + p.key + "' of that file");
      p.box.view = f.integers(pj, "view", pctx);
      p.box.offsets = f.integers(pj, "offsets", pctx);
      p.box.sizes = f.integers(pj, "sizes", pctx);
      if (pj.contains("flat")) {
        std::vector<int64_t> flat = f.integers(pj, "flat", pctx);
        if (flat.size() != 2)
          f.fail(pctx + "\"flat\" is not [offset, count]");
        p.box.flatOffset = flat[0];
        p.box.flatCount = flat[1];
      }
      std::string why = checkTensorBox(p.box, whole);
      if (!why.empty())
        f.fail(pctx + why);
      p.byteOffset = f.unsignedInteger(pj, "byte_offset", pctx);
      p.byteLength = f.unsignedInteger(pj, "byte_length", pctx);
      if (p.byteLength != uint64_t(p.box.count()) * dtypeSize(t.dtype))
        f.fail(pctx + "has " + std::to_string(p.byteLength) + " bytes but " +
               std::to_string(p.box.count()) + " " + dtype + " elements need " +
               std::to_string(uint64_t(p.box.count()) * dtypeSize(t.dtype)));
      if (p.byteOffset > (uint64_t(1) << 62))
        f.fail(pctx + "has byte offset " + std::to_string(p.byteOffset));
      std::string sum = f.string(pj, "xxh3_64", pctx);
      char *end = nullptr;
      p.checksum = std::strtoull(sum.c_str(), &end, 16);
      if (sum.size() != 16 || !end || *end)
        f.fail(pctx + "\"xxh3_64\" is not 16 hex digits");
      t.pieces.push_back(std::move(p));
    }
    checkCoverage(t, f);
    m.tensors.push_back(std::move(t));
  }
  // Last, so that a field out of range is named as such.
  checkManifestChecksum(text, f);
  return m;
}

std::string dsc::rt::checkpointStepName(int64_t iteration) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", (long long)iteration);
  return buf;
}

std::string dsc::rt::resolveCheckpointStep(const std::string &path) {
  if (pathExists(path + "/manifest.json"))
    return path;
  if (!isDirectory(path))
    throw Error("checkpoint '" + path +
                "' does not exist or is not a "
                "directory");
  const std::string marker = path + "/latest";
  if (!pathExists(marker))
    throw Error("checkpoint directory '" + path +
                "' has neither a manifest.json (a step directory) nor a "
                "'latest' marker (a directory of steps)");
  std::vector<uint8_t> bytes = readWholeFile(marker, "checkpoint marker");
  std::string name(bytes.begin(), bytes.end());
  while (!name.empty() && (name.back() == '\n' || name.back() == ' '))
    name.pop_back();
  if (!plainFileName(name))
    throw Error("checkpoint marker '" + marker +
                "' does not name a step "
                "directory");
  const std::string step = path + "/" + name;
  if (!pathExists(step + "/manifest.json"))
    throw Error("checkpoint marker '" + marker + "' names '" + name +
                "', which has no manifest.json");
  return step;
}
