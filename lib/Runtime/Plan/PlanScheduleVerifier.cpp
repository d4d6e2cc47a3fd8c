//===- PlanScheduleVerifier.cpp - the ranks of a plan agree -----*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// verifyPlanSchedule: what --dsc-verify-collectives proves of a compiled
// module, proved again of the plan a rank is about to run, since a plan file
// may have been edited or corrupted after the compiler verified it.
// validatePlan's checkStep sees one rank's step program at a time; this file
// runs the communication of all ranks together.
//
//===----------------------------------------------------------------------===//
//
// A world rank runs the programs of its pp coordinate r: the step program of
// stage r (its messages in order, and the collectives of the stage programs
// each PipelineForward / PipelineBackward / PipelineBackwardWeight runs),
// then the optimizer of stage r. The simulation steps every rank whose next
// event can complete, as the communicators would: a collective completes
// when every member of its group has it next, a send when its peer's next
// event is the receive from it (the transport has no tags: the order pairs
// them). Whatever is left when nothing can move is a deadlock.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/PlanScheduleVerifier.h"

#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Instructions.h"
#include "dsc/Runtime/ReduceOp.h"
#include "dsc/Runtime/ShapeMath.h"
#include "dsc/Runtime/ShardLayout.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace dsc::rt;

namespace {

/// One thing a rank asks of a communicator, and the instruction that asks.
struct Event {
  enum class Kind { Collective, Send, Recv };
  Kind kind = Kind::Collective;
  /// The instruction; for one of a stage program, also the step
  /// instruction that runs that program. Null for the executor's own
  /// collective between the step and the optimizer (`executorCall`).
  const Program *program = nullptr;
  const char *executorCall = nullptr;
  size_t index = 0;
  const Program *step = nullptr;
  size_t stepIndex = 0;
  /// A collective: what every member of the group must agree on.
  const char *call = "";
  int64_t axes = 0; // mesh-axes mask of the group
  int64_t count = 0;
  DType dtype = DType::F32;
  int reduce = -1; // ReduceOp, -1 when it does not reduce
  /// A message: the peer's pp coordinate, the stage whose boundary buffer
  /// it moves, and which one.
  int64_t peer = -1;
  int64_t stage = -1, microBatch = -1;
  bool gradient = false;
  uint32_t buffer = 0;

  bool isMessage() const { return kind != Kind::Collective; }
  /// What issues it: the instruction's opcode name, or the executor's.
  std::string issuer() const {
    return program ? opcodeName(program->instructions[index].opcode)
                   : std::string(executorCall);
  }
};

//===----------------------------------------------------------------------===//
// The world
//===----------------------------------------------------------------------===//

/// The ranks of the plan's mesh (row-major, the last axis innermost).
/// Ranks that differ only off the pp axis run the same programs, so on a
/// large mesh two coordinates of such an axis stand for all of them (each
/// group that spans several still does): the simulation's size does not
/// grow with the data- or tensor-parallel degree. Ranks are named by their
/// rank in the plan's mesh all the same.
class World {
public:
  explicit World(const Plan &plan) : plan(plan) {
    constexpr int64_t kWholeWorld = 64;
    const bool collapse = meshRanks(plan.mesh) > kWholeWorld;
    for (size_t axis = 0; axis < plan.mesh.size(); ++axis) {
      const int64_t size = plan.mesh[axis].size;
      if (plan.mesh[axis].name == "pp")
        ppAxis = axis;
      sizes.push_back(collapse && plan.mesh[axis].name != "pp"
                          ? std::min<int64_t>(size, 2)
                          : size);
      numRanks *= sizes.back();
    }
    for (int64_t rank = 0; rank < numRanks; ++rank) {
      std::vector<int64_t> coords(sizes.size());
      for (size_t axis = sizes.size(), rest = size_t(rank); axis-- > 0;) {
        coords[axis] = int64_t(rest % size_t(sizes[axis]));
        rest /= size_t(sizes[axis]);
      }
      table.push_back(std::move(coords));
    }
  }

  int64_t size() const { return numRanks; }

  const std::vector<int64_t> &coordsOf(int64_t rank) const {
    return table[size_t(rank)];
  }
  int64_t rankOf(const std::vector<int64_t> &coords) const {
    int64_t rank = 0;
    for (size_t axis = 0; axis < sizes.size(); ++axis)
      rank = rank * sizes[axis] + coords[axis];
    return rank;
  }
  int64_t ppOf(int64_t rank) const { return coordsOf(rank)[ppAxis]; }
  /// The rank that differs from `rank` only in its pp coordinate `pp`.
  int64_t withPp(int64_t rank, int64_t pp) const {
    std::vector<int64_t> coords = coordsOf(rank);
    coords[ppAxis] = pp;
    return rankOf(coords);
  }

  /// The ranks that differ from `rank` only on the axes of `mask`.
  std::vector<int64_t> groupOf(int64_t rank, int64_t mask) const {
    std::vector<int64_t> members;
    const std::vector<int64_t> &coords = coordsOf(rank);
    for (int64_t other = 0; other < numRanks; ++other) {
      const std::vector<int64_t> &theirs = coordsOf(other);
      bool same = true;
      for (size_t axis = 0; axis < sizes.size() && same; ++axis)
        same = (mask >> axis & 1) || coords[axis] == theirs[axis];
      if (same)
        members.push_back(other);
    }
    return members;
  }

  /// The size of the group of `mask` in the plan's (not the simulated)
  /// mesh: element counts are the plan's.
  int64_t groupSize(int64_t mask) const {
    return dsc::rt::groupSize(plan.mesh, mask);
  }

  /// `rank 3 (dp=1, pp=1)`, its rank in the plan's mesh.
  std::string describe(int64_t rank) const {
    const std::vector<int64_t> &coords = coordsOf(rank);
    int64_t real = 0;
    std::string axes;
    for (size_t axis = 0; axis < coords.size(); ++axis) {
      real = real * plan.mesh[axis].size + coords[axis];
      axes += (axis ? ", " : "") + plan.mesh[axis].name + "=" +
              std::to_string(coords[axis]);
    }
    return "rank " + std::to_string(real) + " (" + axes + ")";
  }

  std::string describeAxes(int64_t mask) const {
    std::string text = "[";
    bool first = true;
    for (size_t axis = 0; axis < plan.mesh.size(); ++axis)
      if (mask >> axis & 1) {
        text += (first ? "" : ", ") + plan.mesh[axis].name;
        first = false;
      }
    return text + "]";
  }

  const Plan &plan;

private:
  std::vector<int64_t> sizes;
  /// Each rank's coordinates.
  std::vector<std::vector<int64_t>> table;
  size_t ppAxis = 0;
  int64_t numRanks = 1;
};

//===----------------------------------------------------------------------===//
// One pipeline rank's events
//===----------------------------------------------------------------------===//

/// The events of pipeline rank r's step, in the order it issues them.
class Sequence {
public:
  /// With `compressed`, a step of a 1-bit optimizer after its warm-up
  /// (the rank's compressed optimizer program in place of its optimizer).
  Sequence(const World &world, int64_t rank, bool compressed)
      : world(world), rank(rank), compressed(compressed) {}

  /// The first send whose buffer holds another micro-batch's data than
  /// the one it names, as an error ("" when none): reported after the
  /// ranks are run together, whose message names both ends when the edit
  /// also breaks the pairing.
  std::string staleSend;

  std::vector<Event> build() {
    const Plan &plan = world.plan;
    const PipelineStage &own = plan.stages[size_t(rank)];
    if (const Program *step = plan.findProgram(own.step))
      addStep(*step);
    // dsc-run's loss scaler votes on skipping the step over all ranks
    // (LossScaling::unscaleOrSkip) between the step and the optimizer; a plan
    // file does not say whether the run scales, so the proof assumes it.
    if (meshRanks(plan.mesh) > 1) {
      Event vote;
      vote.executorCall = "the loss scaler's overflow vote";
      vote.call = "all_reduce";
      vote.axes = (int64_t(1) << plan.mesh.size()) - 1;
      vote.count = 1;
      vote.dtype = DType::I32;
      vote.reduce = int(ReduceOp::Max);
      events.push_back(vote);
    }
    if (const Program *optimizer = plan.findProgram(
            compressed ? own.compressedOptimizer : own.optimizer))
      addProgram(*optimizer, nullptr, 0);
    return std::move(events);
  }

private:
  void addStep(const Program &step);
  void addProgram(const Program &prog, const Program *step, size_t stepIndex);
  void addCollective(const Program &prog, size_t index, const Program *step,
                     size_t stepIndex, const char *call, int64_t axes,
                     int64_t count, DType dtype, int reduce) {
    Event event;
    event.program = &prog;
    event.index = index;
    event.step = step;
    event.stepIndex = stepIndex;
    event.call = call;
    event.axes = axes;
    event.count = count;
    event.dtype = dtype;
    event.reduce = reduce;
    events.push_back(event);
  }

  const World &world;
  int64_t rank;
  bool compressed;
  std::vector<Event> events;
};

/// The calls the executor (Exec/Collectives.cpp) and the backends'
/// group kernels make of the communicator for each instruction.
void Sequence::addProgram(const Program &prog, const Program *step,
                          size_t stepIndex) {
  const Plan &plan = world.plan;
  for (size_t i = 0; i < prog.instructions.size(); ++i) {
    const Instruction &inst = prog.instructions[i];
    const int64_t axes = groupAxesOf(inst);
    auto add = [&](const char *call, int64_t count, DType dtype, int reduce) {
      addCollective(prog, i, step, stepIndex, call, axes, count, dtype, reduce);
    };
    auto buf = [&](uint32_t id) -> const Buffer & { return plan.buffers[id]; };
    auto numel = [&](uint32_t id) { return numElements(buf(id).shape); };
    switch (inst.opcode) {
    case Opcode::AllReduce: {
      // Runs of buffers contiguous in one arena are one bucket, one call.
      const int reduce = int(ops::AllReduce::decode(inst).reduce);
      const std::vector<uint32_t> &ids = inst.inputs;
      for (size_t a = 0; a < ids.size();) {
        const Buffer &first = buf(ids[a]);
        uint64_t end = first.offset + first.bytes;
        size_t b = a + 1;
        for (; b < ids.size(); ++b) {
          const Buffer &next = buf(ids[b]);
          if (next.arena != first.arena || next.offset != end ||
              next.dtype != first.dtype)
            break;
          end += next.bytes;
        }
        if (end > first.offset)
          add("all_reduce",
              int64_t((end - first.offset) / dtypeSize(first.dtype)),
              first.dtype, reduce);
        a = b;
      }
      break;
    }
    case Opcode::AllGather:
    case Opcode::ReduceScatter: {
      const bool gather = inst.opcode == Opcode::AllGather;
      const int reduce =
          gather ? -1 : int(ops::ReduceScatter::decode(inst).reduce);
      for (uint32_t id : inst.inputs)
        add(gather ? "all_gather" : "reduce_scatter",
            numel(id) / world.groupSize(axes), buf(id).dtype, reduce);
      break;
    }
    case Opcode::GatherParameter:
    case Opcode::GatherChunks:
      add("all_gather", numel(inst.inputs[0]), buf(inst.inputs[0]).dtype, -1);
      break;
    case Opcode::ReduceScatterAccumulate:
      add("reduce_scatter", numel(inst.outputs[0]), buf(inst.inputs[0]).dtype,
          int(ops::ReduceScatterAccumulate::decode(inst).reduce));
      break;
    case Opcode::ReduceScatterChunks:
      add("reduce_scatter", numel(inst.outputs[0]), buf(inst.inputs[0]).dtype,
          int(ops::ReduceScatterChunks::decode(inst).reduce));
      break;
    case Opcode::AllToAll:
      // One call, whatever the packing: n/D elements per rank.
      add("all_to_all", numel(inst.inputs[0]) / world.groupSize(axes),
          buf(inst.inputs[0]).dtype, -1);
      break;
    case Opcode::CompressedAllReduce: {
      int64_t count = 0;
      for (size_t i = 2; i < inst.outputs.size(); ++i)
        count += numel(inst.outputs[i]);
      add("compressed_all_reduce", count, DType::F32, -1);
      break;
    }
    case Opcode::GlobalNormClipParts:
      // The sums of squares of the rank's parts.
      add("all_reduce", 1, DType::F64, int(ReduceOp::Sum));
      break;
    case Opcode::VocabParallelCrossEntropy:
    case Opcode::VocabParallelCrossEntropyGrad: {
      // Per row of logits: the max, the sum of exponentials and (the
      // loss) the target's logit.
      const std::vector<int64_t> &shape = buf(inst.inputs[0]).shape;
      const int64_t columns =
          shape.empty() ? 1 : std::max<int64_t>(1, shape.back());
      const int64_t rows = numel(inst.inputs[0]) / columns;
      add("all_reduce", rows, DType::F64, int(ReduceOp::Max));
      add("all_reduce", rows, DType::F64, int(ReduceOp::Sum));
      if (inst.opcode == Opcode::VocabParallelCrossEntropy)
        add("all_reduce", rows, DType::F64, int(ReduceOp::Sum));
      break;
    }
    default:
      // A collective this file does not model yet still has to come in
      // the same order on every member.
      if (isCollective(inst.opcode)) {
        int64_t count = 0;
        for (uint32_t id : inst.inputs)
          count += numel(id);
        add("collective", count,
            inst.inputs.empty() ? DType::F32 : buf(inst.inputs[0]).dtype, -1);
      }
      break;
    }
  }
}

void Sequence::addStep(const Program &step) {
  const Plan &plan = world.plan;
  const int64_t stages = int64_t(plan.stages.size());
  // The micro-batch whose output (forward) and input's gradient (backward)
  // each stage's boundary buffers hold now.
  std::map<int64_t, int64_t> lastForward, lastBackward;
  auto run = [&](const std::string &name, size_t i) {
    if (const Program *prog = plan.findProgram(name))
      addProgram(*prog, &step, i);
  };
  for (size_t i = 0; i < step.instructions.size(); ++i) {
    const Instruction &inst = step.instructions[i];
    switch (inst.opcode) {
    case Opcode::PipelineForward: {
      const ops::PipelineForward f = ops::PipelineForward::decode(inst);
      lastForward[f.stage] = f.microBatch;
      // The last stage's forward runs inside its backward.
      if (f.stage != stages - 1)
        run(plan.stages[size_t(f.stage)].forward, i);
      break;
    }
    case Opcode::PipelineBackward: {
      const ops::PipelineBackward b = ops::PipelineBackward::decode(inst);
      lastBackward[b.stage] = b.microBatch;
      run(plan.stages[size_t(b.stage)].forwardBackward, i);
      break;
    }
    case Opcode::PipelineBackwardWeight: {
      const ops::PipelineBackwardWeight w =
          ops::PipelineBackwardWeight::decode(inst);
      run(plan.stages[size_t(w.stage)].backwardWeight, i);
      break;
    }
    case Opcode::PipelineSend:
    case Opcode::PipelineRecv: {
      Event event;
      event.program = &step;
      event.index = i;
      if (inst.opcode == Opcode::PipelineSend) {
        const ops::PipelineSend s = ops::PipelineSend::decode(inst);
        event.kind = Event::Kind::Send;
        event.stage = s.stage;
        event.peer = s.peer;
        event.microBatch = s.microBatch;
        event.buffer = inst.inputs[0];
        event.gradient =
            int64_t(event.buffer) == plan.stages[size_t(s.stage)].inputGrad;
        // The stage's boundary buffer holds what its last forward (or
        // backward) computed: a send of another micro-batch sends that
        // one's data under this one's name.
        const std::map<int64_t, int64_t> &last =
            event.gradient ? lastBackward : lastForward;
        auto it = last.find(s.stage);
        if ((it == last.end() || it->second != s.microBatch) &&
            staleSend.empty())
          staleSend =
              "pipeline rank " + std::to_string(rank) + "'s step program '" +
              step.name + "' instruction " + std::to_string(i) +
              " (PipelineSend): sends the " +
              (event.gradient ? "input's gradient" : "activation") +
              " of micro-batch " + std::to_string(s.microBatch) + " of stage " +
              std::to_string(s.stage) + ", but " +
              (it == last.end()
                   ? std::string("no ") +
                         (event.gradient ? "backward" : "forward") +
                         " of the stage has run before it"
                   : "the stage's last " +
                         std::string(event.gradient ? "backward" : "forward") +
                         " ran micro-batch " + std::to_string(it->second) +
                         ", whose result the buffer holds");
      } else {
        const ops::PipelineRecv r = ops::PipelineRecv::decode(inst);
        event.kind = Event::Kind::Recv;
        event.stage = r.stage;
        event.peer = r.peer;
        event.microBatch = r.microBatch;
        event.buffer = inst.outputs[0];
        event.gradient =
            int64_t(event.buffer) == plan.stages[size_t(r.stage)].outputGrad;
      }
      events.push_back(event);
      break;
    }
    default:
      break;
    }
  }
}

//===----------------------------------------------------------------------===//
// Simulation
//===----------------------------------------------------------------------===//

class Simulation {
public:
  Simulation(const World &world, std::vector<const std::vector<Event> *> seqs)
      : world(world), sequences(std::move(seqs)),
        position(size_t(world.size()), 0) {}

  void run();

private:
  enum class Progress { Advanced, Blocked };

  const Event *head(int64_t rank) const {
    const std::vector<Event> &seq = *sequences[size_t(rank)];
    return position[size_t(rank)] < seq.size() ? &seq[position[size_t(rank)]]
                                               : nullptr;
  }
  int64_t peerOf(int64_t rank, const Event &event) const {
    return world.withPp(rank, event.peer);
  }

  Progress step(int64_t rank, std::vector<int64_t> &moved);
  Progress stepCollective(int64_t rank, const Event &event,
                          std::vector<int64_t> &moved);
  Progress stepMessage(int64_t rank, const Event &event,
                       std::vector<int64_t> &moved);
  int64_t blockerOf(int64_t rank) const;
  [[noreturn]] void reportDeadlock() const;

  std::string describe(const Event &event) const;
  [[noreturn]] void fail(const std::string &headline, int64_t a, int64_t b,
                         const std::string &detail) const {
    throw Error(headline + ": " + world.describe(a) + " issues " +
                describe(*head(a)) + ", " + world.describe(b) + " issues " +
                describe(*head(b)) + detail);
  }

  const World &world;
  std::vector<const std::vector<Event> *> sequences;
  std::vector<size_t> position;
};

std::string Simulation::describe(const Event &event) const {
  const Plan &plan = world.plan;
  std::string text = event.issuer();
  if (event.isMessage()) {
    const Buffer &b = plan.buffers[event.buffer];
    const bool send = event.kind == Event::Kind::Send;
    text += std::string(send ? " of" : " into") + " stage " +
            std::to_string(event.stage) + "'s " +
            (event.gradient ? (send ? "input's gradient" : "output's gradient")
                            : (send ? "output" : "input")) +
            " (micro-batch " + std::to_string(event.microBatch) + ", " +
            dtypeName(b.dtype) + " " + shapeString(b.shape) + ") " +
            (send ? "to" : "from") + " pp=" + std::to_string(event.peer);
  } else {
    text += std::string(": ") + event.call + " of " +
            std::to_string(event.count) + " " + dtypeName(event.dtype);
    if (event.reduce >= 0)
      text += std::string(" (") + reduceOpName(ReduceOp(event.reduce)) + ")";
    text += " over " + world.describeAxes(event.axes);
  }
  if (event.program)
    text += " at program '" + event.program->name + "' instruction " +
            std::to_string(event.index);
  else
    text += " after the step program";
  if (event.step) {
    const Instruction &runner = event.step->instructions[event.stepIndex];
    text += " (run by step program '" + event.step->name + "' instruction " +
            std::to_string(event.stepIndex) + ", " + opcodeName(runner.opcode) +
            " of micro-batch " +
            std::to_string(runner.ints.size() > 1 ? runner.ints[1] : -1) + ")";
  }
  return text;
}

Simulation::Progress Simulation::step(int64_t rank,
                                      std::vector<int64_t> &moved) {
  const Event *event = head(rank);
  if (!event)
    return Progress::Blocked;
  return event->isMessage() ? stepMessage(rank, *event, moved)
                            : stepCollective(rank, *event, moved);
}

Simulation::Progress Simulation::stepCollective(int64_t rank,
                                                const Event &event,
                                                std::vector<int64_t> &moved) {
  const std::vector<int64_t> members = world.groupOf(rank, event.axes);
  bool ready = true;
  for (int64_t member : members) {
    if (member == rank)
      continue;
    const Event *other = head(member);
    if (!other || other->isMessage() || other->axes != event.axes) {
      ready = false;
      continue;
    }
    // Every completion moves a whole group, so two members with a
    // collective of this group next have completed equally many on it:
    // they are the same call of the communicator and must agree.
    std::string differ;
    if (other->issuer() != event.issuer() ||
        std::string(other->call) != event.call)
      differ = "the instruction";
    else if (other->count != event.count)
      differ = "the element count";
    else if (other->dtype != event.dtype)
      differ = "the dtype";
    else if (other->reduce != event.reduce)
      differ = "the reduction";
    if (!differ.empty())
      fail("the members of group " + world.describeAxes(event.axes) +
               " disagree on their next collective",
           std::min(rank, member), std::max(rank, member),
           "; they differ in " + differ +
               " (every member must issue the same collectives in the same "
               "order)");
  }
  if (!ready)
    return Progress::Blocked;
  for (int64_t member : members) {
    ++position[size_t(member)];
    moved.push_back(member);
  }
  return Progress::Advanced;
}

Simulation::Progress Simulation::stepMessage(int64_t rank, const Event &event,
                                             std::vector<int64_t> &moved) {
  const int64_t peer = peerOf(rank, event);
  if (peer == rank)
    throw Error(world.describe(rank) + " issues " + describe(event) +
                " with itself as the peer; a rendezvous with itself never "
                "completes");
  const Event *other = head(peer);
  // The transport pairs a send with the peer's next receive from this rank,
  // whatever either says it moves.
  if (!other || !other->isMessage() || other->kind == event.kind ||
      other->peer != world.ppOf(rank))
    return Progress::Blocked;
  const bool sends = event.kind == Event::Kind::Send;
  const Event &send = sends ? event : *other;
  const Event &recv = sends ? *other : event;
  const int64_t sender = sends ? rank : peer, receiver = sends ? peer : rank;
  const Buffer &x = world.plan.buffers[send.buffer];
  const Buffer &y = world.plan.buffers[recv.buffer];
  const int64_t wantStage = send.gradient ? send.stage - 1 : send.stage + 1;
  std::string differ;
  if (recv.gradient != send.gradient || recv.stage != wantStage)
    differ = std::string("the receive expects another message (stage ") +
             std::to_string(send.stage) + "'s " +
             (send.gradient ? "input's gradient goes to stage "
                            : "output goes to stage ") +
             std::to_string(wantStage) + ")";
  else if (recv.microBatch != send.microBatch)
    differ = "they disagree on the micro-batch (" +
             std::to_string(send.microBatch) + " sent, " +
             std::to_string(recv.microBatch) + " expected)";
  else if (x.dtype != y.dtype || x.shape != y.shape)
    differ = std::string("they disagree on the message's dtype or shape (") +
             dtypeName(x.dtype) + " " + shapeString(x.shape) + " sent, " +
             dtypeName(y.dtype) + " " + shapeString(y.shape) + " expected)";
  if (!differ.empty())
    fail("a send meets a receive of another message", sender, receiver,
         "; " + differ);
  ++position[size_t(rank)];
  ++position[size_t(peer)];
  moved.push_back(rank);
  moved.push_back(peer);
  return Progress::Advanced;
}

int64_t Simulation::blockerOf(int64_t rank) const {
  const Event &event = *head(rank);
  if (event.isMessage())
    return peerOf(rank, event);
  for (int64_t member : world.groupOf(rank, event.axes)) {
    const Event *other = head(member);
    if (member != rank &&
        (!other || other->isMessage() || other->axes != event.axes))
      return member;
  }
  return rank; // unreachable: a collective whose group is ready completes
}

void Simulation::reportDeadlock() const {
  // Follow "waits for" from the first stuck rank: the chain ends at a rank
  // that has finished, or closes a cycle of ranks waiting on each other.
  int64_t rank = 0;
  while (!head(rank))
    ++rank;
  std::map<int64_t, size_t> seen;
  while (!seen.count(rank)) {
    const size_t order = seen.size();
    seen[rank] = order;
    const int64_t next = blockerOf(rank);
    if (!head(next)) {
      const Event &event = *head(rank);
      throw Error(world.describe(rank) + " issues " + describe(event) +
                  ", but " +
                  (event.isMessage() ? "its peer " + world.describe(next)
                                     : world.describe(next) + " of its group " +
                                           world.describeAxes(event.axes)) +
                  " has no more communication in the step");
    }
    rank = next;
  }
  const size_t cycle = seen.size() - seen[rank];
  const int64_t waitedOn = blockerOf(rank);
  fail("deadlock: " + world.describe(rank) +
           (cycle == 2
                ? " and " + world.describe(waitedOn) + " wait on each other"
                : " waits for " + world.describe(waitedOn) + " in a cycle of " +
                      std::to_string(cycle) + " ranks that wait on each other"),
       rank, waitedOn, "");
}

void Simulation::run() {
  // A rank only waits for ranks that have not reached its event yet, and
  // the last one to arrive completes it, so only ranks that moved need
  // another look.
  std::vector<int64_t> worklist, moved;
  std::vector<bool> queued(size_t(world.size()), true);
  for (int64_t rank = world.size() - 1; rank >= 0; --rank)
    worklist.push_back(rank);
  while (!worklist.empty()) {
    const int64_t rank = worklist.back();
    worklist.pop_back();
    queued[size_t(rank)] = false;
    moved.clear();
    if (step(rank, moved) == Progress::Blocked)
      continue;
    // The lowest rank looked at first, so that the first disagreement
    // found is between the lowest ranks that have one.
    for (int64_t member : std::vector<int64_t>(moved.rbegin(), moved.rend()))
      if (!queued[size_t(member)]) {
        queued[size_t(member)] = true;
        worklist.push_back(member);
      }
  }
  for (int64_t rank = 0; rank < world.size(); ++rank)
    if (head(rank))
      reportDeadlock();
}

} // namespace

void dsc::rt::verifyPlanSchedule(const Plan &plan) {
  const int64_t ranks = plan.pipelineRanks();
  if (plan.stages.empty() || ranks < 1)
    return;
  World world(plan);
  // A 1-bit optimizer's steps after its warm-up run other optimizer
  // programs, on every rank from the same step: a step of each kind.
  for (bool compressed : {false, true}) {
    if (compressed && plan.compressionFromStep <= 0)
      break;
    std::vector<std::vector<Event>> perPipelineRank;
    std::string staleSend;
    for (int64_t r = 0; r < ranks; ++r) {
      Sequence sequence(world, r, compressed);
      perPipelineRank.push_back(sequence.build());
      if (staleSend.empty())
        staleSend = sequence.staleSend;
    }
    std::vector<const std::vector<Event> *> sequences;
    for (int64_t rank = 0; rank < world.size(); ++rank)
      sequences.push_back(&perPipelineRank[size_t(world.ppOf(rank))]);
    Simulation(world, std::move(sequences)).run();
    if (!staleSend.empty())
      throw Error(staleSend);
  }
}
