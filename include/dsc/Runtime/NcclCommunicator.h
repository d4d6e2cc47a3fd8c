//===- NcclCommunicator.h - Ranks as GPUs, collectives by NCCL --*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The communicator of the CUDA backend: one rank per GPU, collectives on
// device buffers enqueued on the rank's stream through NCCL. The NCCL unique
// id travels over a host communicator (MPI under mpirun, threads in one
// process), so NCCL needs no launcher of its own. This header includes
// neither nccl.h nor the CUDA headers: dsc-run compiles the same without
// them, and haveNcclCommunicator() says whether the factory is there.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_NCCLCOMMUNICATOR_H
#define DSC_RUNTIME_NCCLCOMMUNICATOR_H

#include "dsc/Runtime/Communicator.h"

#include <memory>

// cuda_runtime_api.h's own declaration, repeated (a typedef may be declared
// twice with the same type), so users need not include CUDA.
struct CUstream_st;
typedef struct CUstream_st *cudaStream_t;

namespace dsc::rt {

/// Collective over `bootstrap` (any host communicator: the MPI world under
/// mpirun, or thread ranks with one GPU per thread): rank 0 makes an
/// ncclUniqueId and broadcasts it over `bootstrap`, then every rank calls
/// cudaSetDevice(device) and ncclCommInitRank with the bootstrap's rank and
/// size. Collectives take DEVICE pointers and are enqueued on `stream` (not
/// owned; it must outlive the communicator and its splits); they return
/// once enqueued, and errors surface in synchronizeNccl. worldRank() and
/// worldRanks() are the bootstrap's. `bootstrap` must outlive the result
/// (abort() forwards to it). Throws Error naming the NCCL or CUDA call and
/// the cause. Defined only when haveNcclCommunicator(): link DscRuntimeNccl.
std::unique_ptr<Communicator> createNcclCommunicator(Communicator &bootstrap,
                                                     int device,
                                                     cudaStream_t stream);

/// True when this runtime was built with the NCCL communicator
/// (DSC_HAVE_NCCL: CUDA and NCCL were found and DscRuntimeNccl exists).
/// Defined in DscRuntimeComm, so a program that does not link NCCL can ask.
bool haveNcclCommunicator();

/// Waits until every call enqueued on `comm`'s stream has finished, polling
/// cudaStreamQuery and ncclCommGetAsyncError. After `timeoutSeconds`
/// (negative: the environment's DSC_NCCL_TIMEOUT_S, else 600) it aborts the
/// NCCL communicators on that stream (ncclCommAbort: the world communicator
/// and its splits) and throws Error naming `comm` (backend, group's world
/// ranks, rank) and "timed out after N s waiting for ..."; an asynchronous
/// NCCL error aborts them too and throws Error with ncclGetErrorString and
/// ncclGetLastError. After either, every call on those communicators
/// throws. `comm` must come from createNcclCommunicator or its split (else
/// Error).
void synchronizeNccl(Communicator &comm, double timeoutSeconds = -1);

} // namespace dsc::rt

#endif // DSC_RUNTIME_NCCLCOMMUNICATOR_H
