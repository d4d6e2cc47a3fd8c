//===- CollectiveBytes.h - Collective kinds and ring bytes ------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The one definition of the collective kinds and of what each moves under
// the ring algorithms, shared by the three sides that must agree on it: the
// dialect's plan summary (the planned bytes a plan file carries), the cost
// model (nccl-tests' bus-bandwidth factors and ring latency steps), and the
// runtime's communicators (the bytes they count, which dsc-run compares with
// the planned ones). Header-only, no LLVM and no MLIR: the runtime-only
// build on a GPU machine includes it too.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_SUPPORT_COLLECTIVEBYTES_H
#define DSC_SUPPORT_COLLECTIVEBYTES_H

#include <cstddef>
#include <cstdint>

namespace dsc {

/// The kinds of collective and point-to-point calls, the index of a
/// communicator's counters (CommStats). Send and Recv are the two halves of
/// a point-to-point transfer (a sendRecv counts under both).
enum class CollectiveKind : uint32_t {
  AllReduce = 0,
  ReduceScatter,
  AllGather,
  AllToAll,
  Broadcast,
  Send,
  Recv,
  Barrier,
};
inline constexpr size_t kNumCollectiveKinds = 8;

/// "all_reduce", "reduce_scatter", ... (the spelling of logs and metrics).
constexpr const char *collectiveKindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::AllToAll:
    return "all_to_all";
  case CollectiveKind::Broadcast:
    return "broadcast";
  case CollectiveKind::Send:
    return "send";
  case CollectiveKind::Recv:
    return "recv";
  case CollectiveKind::Barrier:
    return "barrier";
  }
  return "unknown-collective";
}

/// Chunk `c` of a ring over `n` ranks when `elements` are split into n
/// near-equal chunks, the first elements % n one element longer: its first
/// element and its length. The thread communicator's rings split buffers
/// this way and the byte formulas below assume it.
struct RingChunk {
  uint64_t first = 0, length = 0;
};
constexpr RingChunk ringChunk(uint64_t elements, int64_t n, int64_t c) {
  const uint64_t un = uint64_t(n), uc = uint64_t(c);
  const uint64_t base = elements / un, extra = elements % un;
  return {uc * base + (uc < extra ? uc : extra), base + (uc < extra ? 1 : 0)};
}

/// floor((n-1)/n * bytes) without overflow: what one rank of n sends in a
/// reduce-scatter, all-gather or all-to-all over `bytes` in all.
constexpr uint64_t ringShareBytes(uint64_t bytes, int64_t n) {
  const uint64_t un = uint64_t(n);
  return bytes / un * (un - 1) + bytes % un * (un - 1) / un;
}

/// Bytes that rank `rank` of `n` sends in the ring algorithm of `kind` over
/// `bytes` bytes (the whole buffer for AllReduce, the whole gathered / the
/// whole input buffer for AllGather / ReduceScatter, the input buffer of
/// AllToAll, the message of Broadcast rooted at `root`). All-reduce splits
/// the buffer into n chunks of `elementSize`-aligned sizes (ringChunk) and
/// sends all chunks but its own (reduce-scatter) and then all but its
/// successor's (all-gather): 2(n-1)/n·S when n divides the elements.
/// Reduce-scatter, all-gather and all-to-all send (n-1)/n·S; broadcast is a
/// chain from the root, every rank but the one before the root forwards S.
constexpr uint64_t ringBytesSent(CollectiveKind kind, uint64_t bytes,
                                 size_t elementSize, int64_t n, int64_t rank,
                                 int64_t root = 0) {
  if (n <= 1 || elementSize == 0)
    return 0;
  switch (kind) {
  case CollectiveKind::AllReduce: {
    const uint64_t elements = bytes / elementSize;
    return 2 * bytes - ringChunk(elements, n, rank).length * elementSize -
           ringChunk(elements, n, (rank + 1) % n).length * elementSize;
  }
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllGather:
  case CollectiveKind::AllToAll:
    return ringShareBytes(bytes, n);
  case CollectiveKind::Broadcast:
    return (rank + 1) % n == root ? 0 : bytes;
  case CollectiveKind::Send:
    return bytes;
  case CollectiveKind::Recv:
  case CollectiveKind::Barrier:
    return 0;
  }
  return 0;
}

/// Bytes that rank `rank` receives in the same algorithms: equal to what it
/// sends except for uneven all-reduce chunks (it receives all chunks but its
/// own and its predecessor's), the broadcast chain (every rank but the root
/// receives S) and point-to-point.
constexpr uint64_t ringBytesReceived(CollectiveKind kind, uint64_t bytes,
                                     size_t elementSize, int64_t n,
                                     int64_t rank, int64_t root = 0) {
  if (n <= 1 || elementSize == 0)
    return kind == CollectiveKind::Recv ? bytes : 0;
  switch (kind) {
  case CollectiveKind::AllReduce: {
    const uint64_t elements = bytes / elementSize;
    return 2 * bytes - ringChunk(elements, n, rank).length * elementSize -
           ringChunk(elements, n, (rank + n - 1) % n).length * elementSize;
  }
  case CollectiveKind::Broadcast:
    return rank != root ? bytes : 0;
  case CollectiveKind::Send:
    return 0;
  case CollectiveKind::Recv:
    return bytes;
  default:
    return ringBytesSent(kind, bytes, elementSize, n, rank, root);
  }
}

/// nccl-tests' busBw/algBw factor (doc/PERFORMANCE.md): the bytes a rank
/// moves over its slowest link per byte of the collective's size, i.e.
/// ringBytesSent / bytes when n divides the buffer. All-reduce 2(n-1)/n,
/// reduce-scatter, all-gather and all-to-all (n-1)/n, broadcast and
/// point-to-point 1, barrier 0; 0 for n <= 1.
constexpr double busBandwidthFactor(CollectiveKind kind, int64_t n) {
  if (n <= 1)
    return 0.0;
  const double nd = double(n);
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2.0 * (nd - 1.0) / nd;
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllGather:
  case CollectiveKind::AllToAll:
    return (nd - 1.0) / nd;
  case CollectiveKind::Broadcast:
  case CollectiveKind::Send:
  case CollectiveKind::Recv:
    return 1.0;
  case CollectiveKind::Barrier:
    return 0.0;
  }
  return 0.0;
}

/// Latency steps of the ring algorithms: all-reduce 2(n-1), reduce-scatter,
/// all-gather, all-to-all, broadcast (a chain) and barrier n-1,
/// point-to-point 1; 0 for n <= 1.
constexpr int64_t ringSteps(CollectiveKind kind, int64_t n) {
  if (n <= 1)
    return 0;
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2 * (n - 1);
  case CollectiveKind::Send:
  case CollectiveKind::Recv:
    return 1;
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllGather:
  case CollectiveKind::AllToAll:
  case CollectiveKind::Broadcast:
  case CollectiveKind::Barrier:
    return n - 1;
  }
  return 0;
}

/// DeepSpeed's padded length of an n-element tensor compressed over p ranks
/// (1-bit Adam): the next multiple of p·lcm(p, 8), so that every rank's
/// chunk is whole bytes of signs.
constexpr int64_t onebitPaddedSize(int64_t n, int64_t p) {
  int64_t a = p, b = 8;
  while (b != 0) {
    const int64_t t = a % b;
    a = b;
    b = t;
  }
  const int64_t unit = p * (p / a * 8);
  return (n + unit - 1) / unit * unit;
}

/// Bytes one rank of p sends in a compressed all-reduce of n elements
/// (padded to onebitPaddedSize): signs travel as 32-bit words, ceil(c/32)
/// words for a chunk of c = padded/p; an all-to-all of the sign chunks, an
/// all-gather of the scales, an all-gather of the servers' signs and one of
/// their scales.
constexpr uint64_t compressedAllReduceBytesSent(int64_t n, int64_t p) {
  if (p <= 1)
    return 0;
  const int64_t chunk = onebitPaddedSize(n, p) / p;
  const uint64_t signBytes = uint64_t((chunk + 31) / 32) * 4;
  return 2 * uint64_t(p - 1) * (signBytes + 4);
}

} // namespace dsc

#endif // DSC_SUPPORT_COLLECTIVEBYTES_H
