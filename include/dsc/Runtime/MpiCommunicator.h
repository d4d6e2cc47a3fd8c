//===- MpiCommunicator.h - Ranks as MPI processes ---------------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The communicator behind `mpirun -np N dsc-run ...`: one rank per process,
// collectives through Open MPI on host buffers, groups by MPI_Comm_split.
// This header does not include mpi.h, so dsc-run compiles the same with or
// without MPI; without it (haveMpiCommunicator() false) the factory throws.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_MPICOMMUNICATOR_H
#define DSC_RUNTIME_MPICOMMUNICATOR_H

#include "dsc/Runtime/Communicator.h"

#include <memory>

namespace dsc::rt {

/// MPI_COMM_WORLD as a Communicator. Initializes MPI (MPI_THREAD_SERIALIZED:
/// the executor's collectives may run on a thread beside compute, one thread
/// calling MPI at a time; the CPU kernels' OpenMP threads never do) unless the program already did, and then finalizes it when the
/// returned object is destroyed; communicators split from it must be
/// destroyed first (later ones skip MPI_Comm_free). Errors are returned, not
/// fatal (MPI_ERRORS_RETURN), and thrown as Error naming the MPI call. Only
/// the object whose call initialized MPI finalizes it.
std::unique_ptr<Communicator> createMpiWorldCommunicator(int *argc,
                                                         char ***argv);

} // namespace dsc::rt

#endif // DSC_RUNTIME_MPICOMMUNICATOR_H
