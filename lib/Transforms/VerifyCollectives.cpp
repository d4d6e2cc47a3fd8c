//===- VerifyCollectives.cpp - --dsc-verify-collectives ---------*- C++ -*-===//
//
// A static proof that the ranks of a plan agree on their communication: the
// events every rank issues in one step are run together, as the
// communicators would run them, until all ranks finish or the first two
// ranks that disagree (or wait on each other forever) are reported.
//
//===----------------------------------------------------------------------===//
//
// The pass changes nothing. On a 2-rank pipeline whose stages exchange two
// tensors in opposite orders,
//
//   dsc.mesh @mesh axes = ["pp"] shape = [2]
//   func.func @stage0(...) attributes {dsc.stage = 0 : i64} {
//     dsc.send %a on @mesh axis = "pp" to 1 tag = 0 : tensor<4xf32>
//     dsc.send %b on @mesh axis = "pp" to 1 tag = 1 : tensor<4xf32>
//   }
//   func.func @stage1() attributes {dsc.stage = 1 : i64} {
//     %b = dsc.recv on @mesh axis = "pp" from 0 tag = 1 : tensor<4xf32>
//     %a = dsc.recv on @mesh axis = "pp" from 0 tag = 0 : tensor<4xf32>
//   }
//
// it reports, at the first send (with a note at the first recv):
//
//   error: deadlock: rank 0 (pp=0) and rank 1 (pp=1) wait on each other:
//   rank 0 (pp=0) issues send of tensor<4xf32> to pp=1 tag 0 in @stage0 at
//   loc(...), rank 1 (pp=1) issues recv of tensor<4xf32> from pp=0 tag 1 in
//   @stage1 at loc(...)
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <map>
#include <string>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCVERIFYCOLLECTIVESPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// The mesh axis whose coordinate is a program's pipeline stage
/// (kStageAttr).
constexpr StringLiteral kStageAxis = "pp";

//===----------------------------------------------------------------------===//
// The world
//===----------------------------------------------------------------------===//

/// The ranks of the plan's mesh: row-major, the last axis innermost.
class World {
public:
  explicit World(MeshOp mesh) : mesh(mesh) {
    for (StringRef axis : mesh.getAxes().getAsValueRange<StringAttr>())
      axes.push_back(axis);
    llvm::append_range(shape, mesh.getShape());
    for (int64_t size : shape)
      numRanks *= size;
  }

  MeshOp getMesh() const { return mesh; }
  int64_t size() const { return numRanks; }
  StringRef axisName(unsigned axis) const { return axes[axis]; }
  int64_t axisSize(unsigned axis) const { return shape[axis]; }

  std::optional<unsigned> axisIndex(StringRef name) const {
    for (auto [index, axis] : llvm::enumerate(axes))
      if (axis == name)
        return index;
    return std::nullopt;
  }

  SmallVector<int64_t> coordsOf(int64_t rank) const {
    SmallVector<int64_t> coords(shape.size());
    for (int64_t axis = shape.size() - 1; axis >= 0; --axis) {
      coords[axis] = rank % shape[axis];
      rank /= shape[axis];
    }
    return coords;
  }

  int64_t rankOf(ArrayRef<int64_t> coords) const {
    int64_t rank = 0;
    for (auto [coord, size] : llvm::zip(coords, shape))
      rank = rank * size + coord;
    return rank;
  }

  /// `rank 3 (dp=1, tp=1)`: how every diagnostic names a rank.
  std::string describe(int64_t rank) const {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "rank " << rank << " (";
    SmallVector<int64_t> coords = coordsOf(rank);
    for (auto [index, axis] : llvm::enumerate(axes))
      os << (index ? ", " : "") << axis << "=" << coords[index];
    os << ")";
    return text;
  }

  std::string describeAxes(ArrayRef<unsigned> groupAxes) const {
    std::string text = "[";
    for (auto [index, axis] : llvm::enumerate(groupAxes))
      text += (index ? ", " : "") + axes[axis].str();
    return text + "]";
  }

  /// The ranks that differ from `rank` only on `groupAxes`, in group-rank
  /// order (the first listed axis outermost).
  SmallVector<int64_t> groupOf(int64_t rank,
                               ArrayRef<unsigned> groupAxes) const {
    SmallVector<int64_t> coords = coordsOf(rank);
    SmallVector<int64_t> members;
    int64_t count = 1;
    for (unsigned axis : groupAxes)
      count *= shape[axis];
    for (int64_t index = 0; index < count; ++index) {
      int64_t rest = index;
      for (unsigned axis : llvm::reverse(groupAxes)) {
        coords[axis] = rest % shape[axis];
        rest /= shape[axis];
      }
      members.push_back(rankOf(coords));
    }
    return members;
  }

private:
  MeshOp mesh;
  SmallVector<StringRef> axes;
  SmallVector<int64_t> shape;
  int64_t numRanks = 1;
};

//===----------------------------------------------------------------------===//
// Programs and their events
//===----------------------------------------------------------------------===//

/// One communication a program issues, the op that issues it, and the
/// pipeline stage of its program.
struct ProgramEvent {
  CommunicationEvent event;
  Operation *op = nullptr;
  std::optional<int64_t> stage;
  /// The event's axes as indices into the world's axes, as listed (resolved
  /// once the world is known).
  SmallVector<unsigned, 2> axes;
  /// The same, sorted: the communicator, which a runtime identifies by the
  /// set of axes; the order only says how the group's ranks are numbered.
  SmallVector<unsigned, 2> group;
};

/// A function a rank runs `repeat` times in a row, on every rank or only on
/// one stage's.
struct Program {
  func::FuncOp func;
  int64_t repeat = 1;
  std::optional<int64_t> stage;
  SmallVector<ProgramEvent> events;
};

/// What a rank issues next: an event of a program in one of its repeats.
struct Issue {
  const ProgramEvent *event;
  const Program *program;
  int64_t iteration;
};

/// Collects the events of functions in program order, following calls and
/// the pipeline step's stage programs.
class EventCollector {
public:
  explicit EventCollector(SymbolTableCollection &tables) : tables(tables) {}

  /// The pipeline's last stage (-1 without one).
  int64_t lastStage = -1;

  LogicalResult collect(func::FuncOp func, std::optional<int64_t> stage,
                        SmallVectorImpl<ProgramEvent> &out) {
    if (func.isExternal())
      return success();
    if (!active.insert(func).second)
      return func.emitError("--dsc-verify-collectives: @")
             << func.getSymName()
             << " calls itself; only non-recursive programs have one "
                "sequence of communication to verify";
    LogicalResult result = collect(func.getBody(), stage, out);
    active.erase(func);
    return result;
  }

private:
  LogicalResult collect(Region &region, std::optional<int64_t> stage,
                        SmallVectorImpl<ProgramEvent> &out) {
    for (Block &block : region) {
      for (Operation &op : block) {
        if (auto comm = dyn_cast<CommunicationOpInterface>(op)) {
          SmallVector<CommunicationEvent> events;
          comm.getCommunicationEvents(tables, events);
          for (CommunicationEvent &event : events)
            out.push_back({std::move(event), &op, stage, {}});
          continue;
        }
        if (auto call = dyn_cast<CallOpInterface>(op)) {
          if (auto callee = dyn_cast_or_null<func::FuncOp>(
                  call.resolveCallableInTable(&tables)))
            if (failed(collect(callee, stage, out)))
              return failure();
          continue;
        }
        // A pipeline step's forwards and backwards (and weight-gradient
        // parts) run their stage's programs, except the last stage's forward,
        // which runs inside its backward (the runtime only keeps its input).
        if (isa<PipelineForwardOp, PipelineBackwardOp,
                PipelineBackwardWeightOp>(op)) {
          auto callee = tables.lookupNearestSymbolFrom<func::FuncOp>(
              &op, op.getAttrOfType<FlatSymbolRefAttr>("callee"));
          const bool lastForward =
              isa<PipelineForwardOp>(op) && callee &&
              getPipelineStage(callee) == std::optional<int64_t>(lastStage);
          if (callee && !lastForward && failed(collect(callee, stage, out)))
            return failure();
          continue;
        }
        if (op.getNumRegions() != 0 && failed(rejectNested(op)))
          return failure();
      }
    }
    return success();
  }

  /// A region of an op the verifier does not model may run any number of
  /// times, or not at all, so no sequence of its events can be proved.
  LogicalResult rejectNested(Operation &parent) {
    Operation *found = nullptr;
    parent.walk([&](Operation *nested) {
      if (nested == &parent)
        return WalkResult::advance();
      bool communicates = isa<CommunicationOpInterface>(nested);
      if (auto call = dyn_cast<CallOpInterface>(nested)) {
        SmallVector<ProgramEvent> events;
        if (auto callee = dyn_cast_or_null<func::FuncOp>(
                call.resolveCallableInTable(&tables)))
          communicates = failed(collect(callee, std::nullopt, events)) ||
                         !events.empty();
      }
      if (!communicates)
        return WalkResult::advance();
      found = nested;
      return WalkResult::interrupt();
    });
    if (!found)
      return success();
    InFlightDiagnostic diag =
        found->emitError("--dsc-verify-collectives: cannot order the "
                         "communication inside '")
        << parent.getName()
        << "', whose regions may run any number of times; the verifier "
           "models straight-line programs";
    diag.attachNote(parent.getLoc()) << "region op here";
    return failure();
  }

  SymbolTableCollection &tables;
  llvm::SmallPtrSet<Operation *, 4> active;
};

//===----------------------------------------------------------------------===//
// Simulation
//===----------------------------------------------------------------------===//

/// Runs every rank's sequence of events as the communicators would, with
/// blocking collectives and rendezvous send/recv, and reports the first
/// disagreement or the deadlock that stops all ranks.
class Simulation {
public:
  Simulation(const World &world, ArrayRef<SmallVector<Issue>> sequences)
      : world(world), sequences(sequences), position(world.size(), 0) {}

  LogicalResult run();

  /// Completed collectives per group: by the group's axes, then by the
  /// group's first rank.
  std::map<std::string, std::map<int64_t, int64_t>> collectivesPerGroup;
  /// Completed send/recv pairs by axis.
  std::map<std::string, int64_t> transfersPerAxis;

private:
  enum class Progress { Advanced, Blocked, Failed };

  const Issue *head(int64_t rank) const {
    return position[rank] < sequences[rank].size()
               ? &sequences[rank][position[rank]]
               : nullptr;
  }

  Progress step(int64_t rank, SmallVectorImpl<int64_t> &moved);
  Progress stepCollective(int64_t rank, const Issue &issue,
                          SmallVectorImpl<int64_t> &moved);
  Progress stepPointToPoint(int64_t rank, const Issue &issue,
                            SmallVectorImpl<int64_t> &moved);
  /// The rank of the point-to-point peer of `rank`'s `issue`.
  int64_t peerOf(int64_t rank, const Issue &issue) const;
  /// Whether `candidate`, issued by `peer`, is the other half of `issue`,
  /// issued by `rank` (same axis, each naming the other, same tag).
  bool pairs(int64_t rank, const Issue &issue, int64_t peer,
             const Issue &candidate) const;
  /// A rank that `rank`'s next event waits for.
  int64_t blockerOf(int64_t rank) const;
  LogicalResult reportDeadlock();

  std::string describe(const Issue &issue) const;
  /// Reports that `rankA` and `rankB` disagree at their next events.
  LogicalResult reportPair(StringRef headline, int64_t rankA, int64_t rankB,
                           StringRef detail = {});

  const World &world;
  ArrayRef<SmallVector<Issue>> sequences;
  SmallVector<size_t> position;
};

std::string Simulation::describe(const Issue &issue) const {
  std::string text;
  llvm::raw_string_ostream os(text);
  issue.event->event.print(os);
  func::FuncOp func = issue.program->func;
  os << " in @" << func.getSymName();
  if (issue.program->repeat > 1)
    os << " (micro-batch " << issue.iteration + 1 << ")";
  os << " at " << issue.event->op->getLoc();
  return text;
}

LogicalResult Simulation::reportPair(StringRef headline, int64_t rankA,
                                     int64_t rankB, StringRef detail) {
  const Issue &a = *head(rankA);
  const Issue &b = *head(rankB);
  InFlightDiagnostic diag = a.event->op->emitError()
                            << headline << ": " << world.describe(rankA)
                            << " issues " << describe(a) << ", "
                            << world.describe(rankB) << " issues "
                            << describe(b) << detail;
  diag.attachNote(b.event->op->getLoc())
      << world.describe(rankB) << " issues " << describe(b);
  return failure();
}

Simulation::Progress Simulation::step(int64_t rank,
                                      SmallVectorImpl<int64_t> &moved) {
  const Issue *issue = head(rank);
  if (!issue)
    return Progress::Blocked;
  if (issue->event->event.isPointToPoint())
    return stepPointToPoint(rank, *issue, moved);
  return stepCollective(rank, *issue, moved);
}

Simulation::Progress
Simulation::stepCollective(int64_t rank, const Issue &issue,
                           SmallVectorImpl<int64_t> &moved) {
  const ProgramEvent &event = *issue.event;
  SmallVector<int64_t> members = world.groupOf(rank, event.group);
  bool ready = true;
  for (int64_t member : members) {
    if (member == rank)
      continue;
    const Issue *other = head(member);
    if (!other || other->event->event.isPointToPoint() ||
        other->event->group != event.group) {
      ready = false;
      continue;
    }
    // Every completion moves a whole group, so two members with a
    // collective of this group next have completed equally many on it:
    // these two are the same collective of the communicator and must agree,
    // whether or not the rest of the group has arrived.
    const CommunicationEvent &mine = event.event;
    const CommunicationEvent &theirs = other->event->event;
    if (mine.matchesCollective(theirs) && other->event->axes == event.axes)
      continue;
    std::string detail;
    if (other->event->axes != event.axes) {
      detail = "; they number the group's ranks in different axis orders";
    } else if (mine.payload.size() != theirs.payload.size()) {
      detail = "; they move " + std::to_string(mine.payload.size()) + " and " +
               std::to_string(theirs.payload.size()) + " buffers";
    } else {
      for (auto [index, types] :
           llvm::enumerate(llvm::zip(mine.payload, theirs.payload))) {
        auto [a, b] = types;
        if (a == b)
          continue;
        llvm::raw_string_ostream os(detail);
        os << "; buffer " << index << " is " << a << " on one and " << b
           << " on the other";
        break;
      }
    }
    (void)reportPair("collectives diverge in group " +
                         world.describeAxes(event.axes) + " of " +
                         world.describe(rank),
                     rank, member, detail);
    return Progress::Failed;
  }
  if (!ready)
    return Progress::Blocked;
  for (int64_t member : members) {
    ++position[member];
    moved.push_back(member);
  }
  ++collectivesPerGroup[world.describeAxes(event.group)][members.front()];
  return Progress::Advanced;
}

int64_t Simulation::peerOf(int64_t rank, const Issue &issue) const {
  SmallVector<int64_t> coords = world.coordsOf(rank);
  coords[issue.event->axes.front()] = issue.event->event.peer;
  return world.rankOf(coords);
}

bool Simulation::pairs(int64_t rank, const Issue &issue, int64_t peer,
                       const Issue &candidate) const {
  const CommunicationEvent &mine = issue.event->event;
  const CommunicationEvent &theirs = candidate.event->event;
  if (!theirs.isPointToPoint() || theirs.kind == mine.kind ||
      candidate.event->axes != issue.event->axes || theirs.tag != mine.tag ||
      theirs.parameters != mine.parameters)
    return false;
  return peerOf(peer, candidate) == rank;
}

Simulation::Progress
Simulation::stepPointToPoint(int64_t rank, const Issue &issue,
                             SmallVectorImpl<int64_t> &moved) {
  int64_t peer = peerOf(rank, issue);
  if (peer == rank) {
    issue.event->op->emitError()
        << world.describe(rank) << " issues " << describe(issue)
        << " with itself as the peer; a rendezvous with itself never "
           "completes";
    return Progress::Failed;
  }
  const Issue *other = head(peer);
  if (!other || !pairs(rank, issue, peer, *other))
    return Progress::Blocked;
  if (!llvm::equal(issue.event->event.payload, other->event->event.payload)) {
    bool sends = issue.event->event.kind == CommunicationEvent::Kind::Send;
    (void)reportPair(sends ? "send and recv disagree on the payload type"
                           : "recv and send disagree on the payload type",
                     rank, peer);
    return Progress::Failed;
  }
  ++position[rank];
  ++position[peer];
  moved.push_back(rank);
  moved.push_back(peer);
  ++transfersPerAxis[world.axisName(issue.event->axes.front()).str()];
  return Progress::Advanced;
}

LogicalResult Simulation::run() {
  // A rank only waits for ranks that have not reached its event yet, and the
  // last one to arrive completes it, so only ranks that moved need another
  // look.
  SmallVector<int64_t> worklist;
  SmallVector<bool> queued(world.size(), true);
  for (int64_t rank = world.size() - 1; rank >= 0; --rank)
    worklist.push_back(rank);
  SmallVector<int64_t> moved;
  while (!worklist.empty()) {
    int64_t rank = worklist.pop_back_val();
    queued[rank] = false;
    moved.clear();
    switch (step(rank, moved)) {
    case Progress::Failed:
      return failure();
    case Progress::Blocked:
      break;
    case Progress::Advanced:
      for (int64_t member : moved) {
        if (queued[member])
          continue;
        queued[member] = true;
        worklist.push_back(member);
      }
      break;
    }
  }
  for (int64_t rank = 0; rank < world.size(); ++rank)
    if (head(rank))
      return reportDeadlock();
  return success();
}

int64_t Simulation::blockerOf(int64_t rank) const {
  const Issue &issue = *head(rank);
  if (issue.event->event.isPointToPoint())
    return peerOf(rank, issue);
  for (int64_t member : world.groupOf(rank, issue.event->group)) {
    const Issue *other = head(member);
    if (member != rank &&
        (!other || other->event->event.isPointToPoint() ||
         other->event->group != issue.event->group))
      return member;
  }
  llvm_unreachable("a collective whose whole group is ready completes");
}

LogicalResult Simulation::reportDeadlock() {
  // Follow "waits for" from the first stuck rank: the chain ends at a rank
  // that has finished, or closes a cycle of ranks waiting on each other.
  int64_t start = 0;
  while (!head(start))
    ++start;
  llvm::DenseMap<int64_t, unsigned> seen;
  SmallVector<int64_t> chain;
  int64_t rank = start;
  while (!seen.count(rank)) {
    seen[rank] = chain.size();
    chain.push_back(rank);
    int64_t next = blockerOf(rank);
    if (!head(next)) {
      const Issue &issue = *head(rank);
      InFlightDiagnostic diag = issue.event->op->emitError();
      diag << world.describe(rank) << " issues " << describe(issue)
           << ", but ";
      if (issue.event->event.isPointToPoint())
        diag << "its peer ";
      diag << world.describe(next);
      if (!issue.event->event.isPointToPoint())
        diag << " of its group " << world.describeAxes(issue.event->axes);
      diag << " has no more communication in this schedule";
      return failure();
    }
    rank = next;
  }
  unsigned cycleLength = chain.size() - seen[rank];
  int64_t waiter = rank;
  int64_t waitedOn = blockerOf(rank);
  std::string headline;
  llvm::raw_string_ostream os(headline);
  os << "deadlock: " << world.describe(waiter);
  if (cycleLength == 2)
    os << " and " << world.describe(waitedOn) << " wait on each other";
  else
    os << " waits for " << world.describe(waitedOn) << " in a cycle of "
       << cycleLength << " ranks that wait on each other";
  return reportPair(headline, waiter, waitedOn);
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// An ordered list of programs that every rank runs without other programs
/// in between: one training step, or one evaluation.
struct Schedule {
  std::string name;
  SmallVector<unsigned> programs;
};

struct DscVerifyCollectivesPass
    : mlir::dsc::impl::DscVerifyCollectivesPassBase<
          DscVerifyCollectivesPass> {
  using Base::Base;

  void runOnOperation() override;

private:
  FailureOr<MeshOp> findWorld();
  LogicalResult resolve(const World &world);
  LogicalResult checkStage(const World &world, Operation *where,
                           int64_t stage);
  LogicalResult verify(const World &world, const Schedule &schedule);

  SmallVector<Program> programs;
};

/// The one mesh the events name; null when the plan does not communicate.
FailureOr<MeshOp> DscVerifyCollectivesPass::findWorld() {
  ModuleOp module = getOperation();
  const ProgramEvent *first = nullptr;
  for (const Program &program : programs) {
    for (const ProgramEvent &event : program.events) {
      if (!first) {
        first = &event;
        continue;
      }
      if (event.event.mesh == first->event.mesh)
        continue;
      InFlightDiagnostic diag =
          event.op->emitError("--dsc-verify-collectives: communicates over ")
          << event.event.mesh
          << ", but the plan already communicates over "
          << first->event.mesh
          << "; one world of ranks is one mesh, so name one mesh";
      diag.attachNote(first->op->getLoc()) << "first use of the other mesh";
      return failure();
    }
  }
  if (!first)
    return MeshOp();
  auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(module,
                                                           first->event.mesh);
  if (!mesh)
    return first->op->emitError("--dsc-verify-collectives: ")
           << first->event.mesh << " does not name a dsc.mesh";
  return mesh;
}

LogicalResult DscVerifyCollectivesPass::checkStage(const World &world,
                                                   Operation *where,
                                                   int64_t stage) {
  std::optional<unsigned> pp = world.axisIndex(kStageAxis);
  if (!pp)
    return where->emitError("--dsc-verify-collectives: runs on pipeline "
                            "stage ")
           << stage << ", but @" << world.getMesh().getSymName()
           << " has no mesh axis '" << kStageAxis << "' to run it on";
  if (stage < 0 || stage >= world.axisSize(*pp))
    return where->emitError("--dsc-verify-collectives: pipeline stage ")
           << stage << " is outside mesh axis '" << kStageAxis
           << "' of size " << world.axisSize(*pp);
  return success();
}

/// Maps events to the world's axes and checks what the op verifiers cannot
/// see: the stages programs run on exist in this world.
LogicalResult DscVerifyCollectivesPass::resolve(const World &world) {
  for (Program &program : programs) {
    if (program.stage &&
        failed(checkStage(world, program.func, *program.stage)))
      return failure();
    for (ProgramEvent &event : program.events) {
      if (event.stage && failed(checkStage(world, event.op, *event.stage)))
        return failure();
      for (StringRef name : event.event.axes) {
        std::optional<unsigned> axis = world.axisIndex(name);
        if (!axis)
          return event.op->emitError("--dsc-verify-collectives: '")
                 << name << "' is not an axis of @"
                 << world.getMesh().getSymName();
        event.axes.push_back(*axis);
      }
      event.group = event.axes;
      llvm::sort(event.group);
      if (llvm::adjacent_find(event.group) != event.group.end())
        return event.op->emitError("--dsc-verify-collectives: a mesh axis is "
                                   "listed twice in the group");
      if (event.event.isPointToPoint() &&
          (event.axes.size() != 1 || event.event.peer < 0 ||
           event.event.peer >= world.axisSize(event.axes.front())))
        return event.op->emitError("--dsc-verify-collectives: a send or "
                                   "recv needs one mesh axis and a peer "
                                   "coordinate on it");
      if (!event.event.isPointToPoint() && event.axes.empty())
        return event.op->emitError("--dsc-verify-collectives: a collective "
                                   "needs at least one mesh axis");
    }
  }
  return success();
}

LogicalResult DscVerifyCollectivesPass::verify(const World &world,
                                               const Schedule &schedule) {
  std::optional<unsigned> pp = world.axisIndex(kStageAxis);
  auto runsOn = [&](std::optional<int64_t> stage, ArrayRef<int64_t> coords) {
    return !stage || coords[*pp] == *stage;
  };
  SmallVector<SmallVector<Issue>> sequences(world.size());
  size_t fewest = SIZE_MAX, most = 0;
  for (int64_t rank = 0; rank < world.size(); ++rank) {
    SmallVector<int64_t> coords = world.coordsOf(rank);
    for (unsigned index : schedule.programs) {
      const Program &program = programs[index];
      if (!runsOn(program.stage, coords))
        continue;
      for (int64_t iteration = 0; iteration < program.repeat; ++iteration)
        for (const ProgramEvent &event : program.events)
          if (runsOn(event.stage, coords))
            sequences[rank].push_back({&event, &program, iteration});
    }
    numEvents += sequences[rank].size();
    fewest = std::min(fewest, sequences[rank].size());
    most = std::max(most, sequences[rank].size());
  }

  Simulation simulation(world, sequences);
  if (failed(simulation.run()))
    return failure();
  if (!report)
    return success();

  // At the mesh's location, without the op attached: the report is about
  // the whole plan.
  InFlightDiagnostic remark = mlir::emitRemark(world.getMesh().getLoc());
  remark << "verified " << schedule.name << " on " << world.size()
         << " ranks of @" << world.getMesh().getSymName() << ": " << fewest;
  if (most != fewest)
    remark << "-" << most;
  remark << " events per rank";
  for (const auto &[axes, groups] : simulation.collectivesPerGroup) {
    int64_t low = INT64_MAX, high = 0;
    for (const auto &[first, count] : groups) {
      low = std::min(low, count);
      high = std::max(high, count);
    }
    remark << "; group " << axes << ": " << groups.size()
           << (groups.size() == 1 ? " group x " : " groups x ") << low;
    if (high != low)
      remark << "-" << high;
    remark << " collectives";
  }
  for (const auto &[axis, count] : simulation.transfersPerAxis)
    remark << "; along " << axis << ": " << count << " send/recv pairs";
  return success();
}

void DscVerifyCollectivesPass::runOnOperation() {
  ModuleOp module = getOperation();
  programs.clear();

  // The dialect has checked it is an i64 >= 1.
  int64_t microbatches = 1;
  if (auto count = module->getAttrOfType<IntegerAttr>(kMicrobatchesAttr))
    microbatches = count.getInt();

  // Programs of one step (see the pass description for the order) and the
  // evaluation program, which runs on its own.
  Schedule step{"the training step", {}};
  func::FuncOp forwardBackward, optimizer, evaluation;
  SmallVector<func::FuncOp> stageFuncs, stepFuncs, stageOptimizers;
  // With the stages' step programs (--dsc-pipeline-schedule) a stage runs
  // its step, which runs its forwards and backwards, then its optimizer.
  const bool scheduled =
      !getProgramOps(module, ProgramRole::PipelineStep).empty();
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    std::optional<ProgramRole> role = getProgramRole(func);
    if (func->hasAttr(kStageAttr)) {
      if (!scheduled)
        stageFuncs.push_back(func);
      else if (role == ProgramRole::PipelineStep)
        stepFuncs.push_back(func);
      else if (role == ProgramRole::Optimizer)
        stageOptimizers.push_back(func);
    } else if (role == ProgramRole::ForwardBackward)
      forwardBackward = func;
    else if (role == ProgramRole::Optimizer)
      optimizer = func;
    else if (role == ProgramRole::Forward)
      evaluation = func;
  }
  // The steps before the optimizers, whatever the module order.
  llvm::append_range(stageFuncs, stepFuncs);
  llvm::append_range(stageFuncs, stageOptimizers);
  Schedule eval{
      ("evaluation @" + (evaluation ? evaluation.getSymName() : "")).str(),
      {}};
  if (microbatches > 1)
    step.name += " (" + std::to_string(microbatches) + " micro-batches)";

  SymbolTableCollection tables;
  EventCollector collector(tables);
  std::optional<PipelineShape> shape = getPipelineShape(module);
  if (shape)
    collector.lastStage = shape->stages - 1;
  auto addProgram = [&](func::FuncOp func, int64_t repeat,
                        Schedule &schedule) -> LogicalResult {
    Program program;
    program.func = func;
    program.repeat = repeat;
    // The dialect has checked it is an i64 >= 0. A program runs on its
    // stage's pp rank (interleaved, rank r holds stages r, r+P, ...).
    if (std::optional<int64_t> stage = getPipelineStage(func))
      program.stage = shape ? shape->rankOf(*stage) : *stage;
    if (failed(collector.collect(func, std::nullopt, program.events)))
      return failure();
    schedule.programs.push_back(programs.size());
    programs.push_back(std::move(program));
    return success();
  };
  if (forwardBackward &&
      failed(addProgram(forwardBackward, microbatches, step)))
    return signalPassFailure();
  for (func::FuncOp func : stageFuncs)
    if (failed(addProgram(func, 1, step)))
      return signalPassFailure();
  if (optimizer && failed(addProgram(optimizer, 1, step)))
    return signalPassFailure();
  if (evaluation && failed(addProgram(evaluation, 1, eval)))
    return signalPassFailure();

  FailureOr<MeshOp> mesh = findWorld();
  if (failed(mesh))
    return signalPassFailure();
  if (!*mesh) {
    // Without communication every rank trivially agrees.
    if (report)
      mlir::emitRemark(module.getLoc(), "--dsc-verify-collectives: the plan "
                                        "does not communicate; nothing to "
                                        "verify");
    return;
  }
  World world(*mesh);
  if (failed(resolve(world)))
    return signalPassFailure();
  if (failed(verify(world, step)))
    return signalPassFailure();
  if (evaluation && failed(verify(world, eval)))
    return signalPassFailure();
}

} // namespace
