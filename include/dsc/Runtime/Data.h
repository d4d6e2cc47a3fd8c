//===- Data.h - Token sources and the training batch sampler ----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Where training tokens come from (a byte file, the embedded corpus, a
// Megatron/GPT-NeoX indexed dataset) and how they become [B, S] batches.
//
// Every reader treats its file as untrusted: a malformed file raises a
// dsc::rt::Error whose message names the file and what is wrong.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_DATA_H
#define DSC_RUNTIME_DATA_H

#include "dsc/Runtime/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dsc::rt {

//===----------------------------------------------------------------------===//
// TokenSource
//===----------------------------------------------------------------------===//

/// A flat stream of token ids, readable at any offset. Multi-document
/// sources present their documents concatenated in file order (as Megatron's
/// GPT dataset does before windowing).
class TokenSource {
public:
  virtual ~TokenSource();
  /// Number of tokens in the stream.
  virtual int64_t size() const = 0;
  /// Every id read is < vocabSize() (checked on read where the format
  /// cannot guarantee it).
  virtual int64_t vocabSize() const = 0;
  /// Copies tokens [offset, offset + count) to out. Throws Error on a range
  /// outside [0, size()) or on an id outside [0, vocabSize()).
  virtual void read(int64_t offset, int64_t count, int32_t *out) const = 0;
  /// A short name for messages, e.g. "byte file 'input.txt'".
  virtual std::string describe() const = 0;
};

//===----------------------------------------------------------------------===//
// Byte-level tokens (vocab 256)
//===----------------------------------------------------------------------===//

/// Each byte is a token; vocabSize() is 256.
class ByteTokens : public TokenSource {
public:
  /// Reads a whole file. Throws Error if it cannot be read or is empty.
  static std::unique_ptr<ByteTokens> fromFile(const std::string &path);
  /// Tokens of `text`; `name` appears in messages.
  static std::unique_ptr<ByteTokens> fromText(std::string text,
                                              std::string name);

  int64_t size() const override { return int64_t(bytes.size()); }
  int64_t vocabSize() const override { return 256; }
  void read(int64_t offset, int64_t count, int32_t *out) const override;
  std::string describe() const override { return name; }
  const std::string &text() const { return bytes; }

private:
  ByteTokens(std::string bytes, std::string name)
      : bytes(std::move(bytes)), name(std::move(name)) {}
  std::string bytes;
  std::string name;
};

/// The embedded default corpus: chapters I-III of "Alice's Adventures in
/// Wonderland" (public domain, ~32 KB of English prose).
std::string_view defaultCorpus();
/// defaultCorpus() as byte tokens.
std::unique_ptr<ByteTokens> defaultCorpusTokens();

//===----------------------------------------------------------------------===//
// Megatron / GPT-NeoX MMapIndexedDataset (PREFIX.bin + PREFIX.idx)
//===----------------------------------------------------------------------===//

/// The dtype codes of the .idx header (megatron/data/indexed_dataset.py).
enum class IndexedDType : uint8_t {
  UInt8 = 1,
  Int8 = 2,
  Int16 = 3,
  Int32 = 4,
  Int64 = 5,
  Float64 = 6,
  Float32 = 7,
  UInt16 = 8,
};

/// Bytes per element of an integer token dtype; 0 for an unknown or float
/// code (which are not token types).
int indexedDTypeSize(uint8_t code);

/// A read-only view of PREFIX.bin through mmap, with the index in memory.
/// Layout of PREFIX.idx (little-endian):
///   magic "MMIDIDX\0\0" (9 bytes), version u64 = 1, dtype code u8,
///   sequence count N u64, document count M u64,
///   sizes int32[N] (tokens per sequence), pointers int64[N] (byte offsets
///   into .bin), doc_idx int64[M] (sequence index where each document starts;
///   non-decreasing, within [0, N]).
class IndexedDataset : public TokenSource {
public:
  /// Opens and validates PREFIX.idx and PREFIX.bin: magic, version, dtype,
  /// counts against the file size, every (pointer, size) inside .bin, and
  /// doc_idx. Token ids are checked against `modelVocab` as they are read.
  static std::unique_ptr<IndexedDataset> open(const std::string &prefix,
                                              int64_t modelVocab);
  ~IndexedDataset() override;

  int64_t numSequences() const { return int64_t(sizes.size()); }
  int64_t numDocuments() const { return int64_t(docIdx.size()); }
  int64_t sequenceLength(int64_t i) const { return sizes[i]; }
  const std::vector<int64_t> &documentIndex() const { return docIdx; }
  IndexedDType dtype() const { return type; }
  /// Tokens [offset, offset + count) of sequence i.
  void readSequence(int64_t i, int64_t offset, int64_t count,
                    int32_t *out) const;

  int64_t size() const override { return starts.back(); }
  int64_t vocabSize() const override { return vocab; }
  void read(int64_t offset, int64_t count, int32_t *out) const override;
  std::string describe() const override;

private:
  IndexedDataset() = default;
  std::string prefix;
  int64_t vocab = 0;
  IndexedDType type = IndexedDType::UInt16;
  int elemSize = 2;
  std::vector<int32_t> sizes;
  std::vector<int64_t> pointers, docIdx;
  /// starts[i] is the stream offset of sequence i; starts[N] = size().
  std::vector<int64_t> starts;
  const uint8_t *bin = nullptr;
  size_t binSize = 0;
};

/// Writes documents (one sequence per document) as PREFIX.bin/.idx in the
/// Megatron format, for tests and small preprocessing tools. Throws Error if
/// a file cannot be written or a token does not fit `dtype`.
void writeIndexedDataset(const std::string &prefix,
                         const std::vector<std::vector<int64_t>> &documents,
                         IndexedDType dtype);

//===----------------------------------------------------------------------===//
// Choosing a source
//===----------------------------------------------------------------------===//

/// The token source a `--data` argument names:
///   "" or "default"            the embedded corpus, byte-level;
///   PREFIX, PREFIX.bin or PREFIX.idx, when PREFIX.idx exists
///                              a Megatron indexed dataset (ids are checked
///                              against modelVocab as they are read);
///   any other readable file    its bytes, byte-level.
/// Throws Error naming `spec` when it is none of these.
std::unique_ptr<TokenSource> openTokenSource(const std::string &spec,
                                             int64_t modelVocab);

//===----------------------------------------------------------------------===//
// Batch sampler
//===----------------------------------------------------------------------===//

/// A half-open range [begin, end) of a token stream; end = -1 means the end
/// of the stream.
struct TokenRange {
  int64_t begin = 0, end = -1;
};

/// Splits a stream of `total` tokens into a training range and a validation
/// range holding the last `validFraction` of it (Megatron's --split without
/// a test part). The ranges do not overlap, so no validation window shares
/// a token with a training window.
std::pair<TokenRange, TokenRange> splitTrainValid(int64_t total,
                                                  double validFraction);

/// Cuts a token range into windows of seq + 1 tokens (window w is tokens
/// [begin + w*seq, begin + w*seq + seq + 1), so consecutive windows share one
/// token, as in Megatron's GPT dataset) and visits them in a seeded
/// pseudo-random order, a fresh permutation each epoch. Sample i is a pure
/// function of (seed, i): no state to checkpoint beyond the consumed-sample
/// count, and data-parallel ranks can take disjoint sample ranges.
class BatchSampler {
public:
  /// Throws Error if the range is shorter than one window or not inside the
  /// source, if batch or seq is not positive, or if the source's vocab
  /// exceeds `modelVocab`. The source must outlive the sampler.
  BatchSampler(const TokenSource &source, int64_t batch, int64_t seq,
               uint64_t seed, int64_t modelVocab, TokenRange range = {});

  int64_t batchSize() const { return batch; }
  int64_t seqLength() const { return seq; }
  /// Windows per epoch.
  int64_t numWindows() const { return windows; }
  /// The window that global sample `i` reads (epoch i / numWindows()).
  int64_t windowOf(int64_t sample) const;
  /// The stream offset of window w's first token.
  int64_t windowStart(int64_t w) const { return begin + w * seq; }

  /// Fills inputs and targets, each [count, seq], with samples
  /// [firstSample, firstSample + count): targets are inputs shifted by one.
  void sample(int64_t firstSample, int64_t count, int32_t *inputs,
              int32_t *targets) const;
  /// Batch `step` (samples [step*batch, (step+1)*batch)).
  void batchAt(int64_t step, int32_t *inputs, int32_t *targets) const {
    sample(step * batch, batch, inputs, targets);
  }

private:
  const TokenSource &source;
  int64_t batch, seq, windows, begin;
  uint64_t seed;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_DATA_H
