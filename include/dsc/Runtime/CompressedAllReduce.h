//===- CompressedAllReduce.h - 1-bit error-compensated all-reduce -*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// DeepSpeed's compressed all-reduce (1-bit Adam, Tang et al. 2021;
// deepspeed/runtime/comm/nccl.py's compressed_allreduce), the collective of
// the 1-bit optimizers (docs/onebit.md):
//
//   worker:  x += e_w;  s = ‖x‖₂ / √n;  signs of x (sign(0) = +1);
//            e_w = x − s·sign(x)
//   phase 1: an all-to-all of the sign chunks (rank j gets chunk j of every
//            rank) and an all-gather of the scales; rank j is the server of
//            chunk j: M = Σ_i sign_i · (s_i / p) in rank order;  M += e_s;
//            S = ‖M‖₂ / √c;  e_s = M − S·sign(M)   (c = n / p)
//   phase 2: an all-gather of the servers' signs and scales; x = the
//            chunks S_j · sign_j in order
//
// Every rank ends with the same x, the compressed average of the ranks'
// inputs. n must be DeepSpeed's padded length (a multiple of p·lcm(p, 8):
// onebitPaddedSize). Signs travel as 32-bit words, 32 signs each (the
// communicators move 4-byte elements), so a chunk of c signs moves
// ceil(c / 32) words. Arithmetic in f32 as DeepSpeed's torch code does it;
// the norms sum in f64 and round once. Checked against an independent numpy
// reference (scripts/onebit-reference, goldens in
// test/Runtime/Inputs/onebit).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_COMPRESSEDALLREDUCE_H
#define DSC_RUNTIME_COMPRESSEDALLREDUCE_H

#include "dsc/Support/CollectiveBytes.h"

#include <cstdint>

namespace dsc::rt {

class Communicator;

using ::dsc::onebitPaddedSize;

/// 32-bit words holding `count` signs.
inline int64_t signWords(int64_t count) { return (count + 31) / 32; }

/// x += error; returns s = ‖x‖₂ / √n; bit i % 32 of signs[i / 32] is set
/// when x[i] >= 0; error = x − s·sign(x).
float compressWithError(float *x, float *error, uint32_t *signs, int64_t n);

/// out[i] = scale · sign_i for the `count` signs of `signs`.
void expandSigns(const uint32_t *signs, float scale, int64_t count,
                 float *out);

/// The collective over `comm` (every rank calls it): x, the padded n
/// elements, becomes the compressed average; workerError (n) and
/// serverError (n / size) carry the errors to the next call.
void compressedAllReduce(Communicator &comm, float *x, float *workerError,
                         float *serverError, int64_t n);

/// The same on x's n elements (any n): padded with zeros to
/// onebitPaddedSize(n, size) in a buffer of its own; workerError holds the
/// padded length, serverError the padded length / size.
void compressedAllReduceUnpadded(Communicator &comm, float *x, int64_t n,
                                 float *workerError, float *serverError);

} // namespace dsc::rt

#endif // DSC_RUNTIME_COMPRESSEDALLREDUCE_H
