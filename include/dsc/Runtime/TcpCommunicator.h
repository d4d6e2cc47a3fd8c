//===- TcpCommunicator.h - Ranks as processes joined by TCP -----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The communicator for processes started without MPI (torchrun, or by hand
// with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT): the ranks meet at a
// TcpStore, trade listening addresses through it, and connect every pair of
// a group directly. The collectives are the thread communicator's rings,
// step for step and in the same reduction order, so N processes train to
// the same bits as N threads. A peer that exits, is killed or aborts makes
// the calls waiting on it throw, naming it, instead of hanging.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_TCPCOMMUNICATOR_H
#define DSC_RUNTIME_TCPCOMMUNICATOR_H

#include "dsc/Runtime/Communicator.h"

#include <chrono>
#include <memory>

namespace dsc::rt {

class TcpStore;

/// The world of the ranks that met at `store` (rank and size are the
/// store's). Collective: every rank calls it. A call that waits longer than
/// `timeout` for a peer throws naming it (DSC_COMM_TIMEOUT's meaning, as
/// for threads). Splits set up their own connections through the same
/// store, so every rank's store must stay reachable until the groups are
/// made (the communicator keeps its store alive).
std::unique_ptr<Communicator>
createTcpWorldCommunicator(std::shared_ptr<TcpStore> store,
                           std::chrono::milliseconds timeout);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TCPCOMMUNICATOR_H
