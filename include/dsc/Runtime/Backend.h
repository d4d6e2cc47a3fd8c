//===- Backend.h - Where an executor's instructions run ---------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The executor (Executor.h) holds what a plan means: its steps, micro-batches,
// pipeline schedule, mesh groups and collectives' buckets. A Backend holds
// where it runs: the memory the arenas live in and the kernels behind each
// compute instruction. The CPU backend (createCpuBackend) runs the CPU
// kernels on host memory; the CUDA backend (CudaBackend.h) runs the CUDA
// kernels on device memory and hands the executor an NCCL world, so the
// same collectives code moves device buffers.
//
// Memory a backend hands out may not be host-addressable: the executor only
// touches it through copyIn / copyOut / copy / fillZero.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_BACKEND_H
#define DSC_RUNTIME_BACKEND_H

#include "dsc/Runtime/Communicator.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Plan.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dsc::rt {

namespace ops {
struct LearningRate;
} // namespace ops

/// A buffer of the plan and where it lives in the executor's arenas. `data`
/// is the backend's memory: dereference it only when the backend is
/// hostAddressable() (the CPU's); else use read / setTokens / checkpoints.
struct BufferView {
  const Buffer *desc = nullptr;
  void *data = nullptr;
  int64_t size() const { return numElements(desc->shape); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// What a backend may ask while it runs an instruction, and nothing more:
/// the plan, its buffers' memory, the rank's place on the mesh and the
/// groups of its mesh axes, the optimizer step and the dropout streams. The
/// executor implements it; steps, schedules, collectives' buckets, loss
/// scaling and checkpoints stay out of a backend's sight.
class InstructionContext {
public:
  virtual ~InstructionContext();
  virtual const Plan &plan() const = 0;
  virtual BufferView buffer(uint32_t id) = 0;
  /// This rank's coordinates on the plan's mesh (empty without a mesh).
  virtual const std::vector<int64_t> &meshCoordinates() const = 0;
  /// The group of mesh axes `axes` for instruction `index` of `prog`; an
  /// unsplit mask is an error naming the instruction.
  virtual Communicator &requireGroup(const Program &prog, size_t index,
                                     int64_t axes) const = 0;
  /// The 1-based optimizer step (LearningRate, AdamW).
  virtual int64_t step() const = 0;
  /// The rate a LearningRate instruction writes at this step: its schedule
  /// at step(), or on the tokens consumed under a token schedule
  /// (TokenSchedule.h), which the executor holds.
  virtual double learningRate(const ops::LearningRate &lr) const;
  /// The run's dropout seed of an instruction's `instructionSeed` in the
  /// current step and micro-batch.
  virtual uint64_t dropoutSeed(int64_t instructionSeed) const = 0;
  /// An MoE router's expert loads (MoeRoute, instruction `index` of `prog`):
  /// `experts` counts of (token, choice) pairs before dropping, which the
  /// step's report sums over its micro-batches. Ignored by default.
  virtual void noteExpertLoads(const Program &prog, size_t index,
                               const int64_t *loads, int64_t experts);
};

class Backend {
public:
  virtual ~Backend();

  /// "cpu", "cuda".
  virtual const char *name() const = 0;
  /// True when the memory it allocates is ordinary host memory (then
  /// BufferView::data may be dereferenced).
  virtual bool hostAddressable() const = 0;

  /// Checks that every instruction and buffer of `plan` can run here and
  /// sizes the backend's scratch; throws Error naming the first instruction
  /// or buffer it cannot run, or the memory the plan needs beyond what the
  /// machine has. Called once, before any allocation.
  virtual void prepare(const Plan &plan) = 0;
  /// Scratch the backend keeps outside the plan's arenas (bytes).
  virtual uint64_t scratchBytes() const = 0;

  /// `bytes` of memory for `tier`, aligned for any element type; throws
  /// Error("cannot allocate <what>: ...") when it cannot.
  virtual void *allocate(uint64_t bytes, Tier tier, const std::string &what) = 0;
  virtual void release(void *memory) = 0;
  virtual void fillZero(void *memory, uint64_t bytes) = 0;
  /// Host memory into this backend's memory, and back; both have completed
  /// when they return (so the host side may be reused or read).
  virtual void copyIn(void *dst, const void *hostSrc, uint64_t bytes) = 0;
  virtual void copyOut(void *hostDst, const void *src, uint64_t bytes) = 0;
  /// Within this backend's memory; the ranges may overlap.
  virtual void copy(void *dst, const void *src, uint64_t bytes) = 0;
  /// acc[i] += x[i] for `count` elements of float type `dtype`.
  virtual void accumulate(DType dtype, void *acc, const void *x,
                          int64_t count) = 0;
  /// Loss scaling's first pass over an f32 gradient: the sum of its
  /// squares (non-finite when an element is).
  virtual double sumOfSquares(const float *x, int64_t count) = 0;
  /// x *= factor for `count` elements of float type `dtype` (loss scaling's
  /// f32 gradients; an all-to-all's scaled output, bf16 and f16 under mixed
  /// precision). Throws Error for a dtype the backend does not scale.
  virtual void scale(DType dtype, void *x, int64_t count, double factor) = 0;

  /// The world whose collectives take this backend's memory, made over the
  /// host world (a collective call every rank makes); null when the host
  /// world's collectives already do (host-memory backends).
  virtual std::unique_ptr<Communicator> makeWorld(Communicator &hostWorld);
  /// The world makeWorld returned is about to be destroyed.
  virtual void forgetWorld() {}

  /// Collectives beside compute. launchCollective runs `issue` (one
  /// collective instruction's communicator calls and the copies it makes)
  /// after the compute issued so far, and beside the compute issued after
  /// it, when setOverlap(true) was called and the backend can; it returns a
  /// ticket that waitCollective makes later compute (and the host) wait
  /// for, with every earlier launch. Launches run in launch order. Without
  /// overlap (the default), `issue` runs at once and the ticket is 0.
  virtual void setOverlap(bool on) { (void)on; }
  /// Whether the executor overlaps by default: where communication runs on
  /// its own engine (a GPU's copy engines and NCCL's kernels), not where
  /// it would compete with compute for the same cores.
  virtual bool overlapsByDefault() const { return false; }
  virtual uint64_t launchCollective(const std::function<void()> &issue) {
    issue();
    return 0;
  }
  virtual void waitCollective(uint64_t ticket) { (void)ticket; }
  /// Waits for every launch; rethrows the first failure among them.
  virtual void waitCollectives() {}

  /// Runs compute instruction `index` of `prog` (not a collective, not
  /// Zero, which the executor runs) over `ctx`'s buffers. Throws Error (see
  /// instructionError) for what only run time can find.
  virtual void run(InstructionContext &ctx, const Program &prog,
                   size_t index) = 0;
  /// Waits until everything issued has finished; throws Error for a failure
  /// found meanwhile (an asynchronous kernel fault, a bad token id).
  virtual void synchronize() {}
};

/// The CPU kernels (CpuKernels.h) on 64-byte-aligned host memory, for f32
/// and f64 plans.
std::unique_ptr<Backend> createCpuBackend();

/// Error("program 'P' instruction I 'name' (Opcode): msg").
Error instructionError(const Program &prog, size_t index,
                       const std::string &msg);

} // namespace dsc::rt

#endif // DSC_RUNTIME_BACKEND_H
