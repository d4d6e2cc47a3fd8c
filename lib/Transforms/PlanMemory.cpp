//===- PlanMemory.cpp - --dsc-plan-memory -----------------------*- C++ -*-===//
//
// Static memory planning: persistent buffers end to end, then each program's
// temporaries by a linear scan over live ranges with best-fit reuse. The
// result is written into the IR as offsets, which is the plan form. A
// pipelined module is planned per pipeline rank (a domain each, plus the
// shared one), with each stage's kept values in banks of per-micro-batch
// slots sized by the rank's step (PipelineSlots.h).
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/PlanOptions.h"
#include "dsc/Support/PipelineSlots.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCPLANMEMORYPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;
using ::dsc::kActivationSlots;
using ::dsc::kGradientSlots;
using ::dsc::kWeightSlots;

namespace {

int64_t bytesOfType(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return tensor.getNumElements() * ((tensor.getElementTypeBitWidth() + 7) / 8);
}

/// Best-fit allocation over a free list kept sorted by offset; freed ranges
/// coalesce with their neighbours. Deterministic: ties go to the lowest
/// offset.
class RangeAllocator {
public:
  explicit RangeAllocator(int64_t alignment) : alignment(alignment) {}

  int64_t allocate(int64_t bytes, int64_t &reused) {
    bytes = alignUp(bytes);
    auto best = free.end();
    for (auto it = free.begin(); it != free.end(); ++it)
      if (it->second >= bytes &&
          (best == free.end() || it->second < best->second))
        best = it;
    if (best == free.end()) {
      // Grow, absorbing a free range that ends at the top.
      int64_t offset = top;
      if (!free.empty()) {
        auto last = std::prev(free.end());
        if (last->first + last->second == top) {
          offset = last->first;
          reused += last->second;
          free.erase(last);
        }
      }
      top = offset + bytes;
      return offset;
    }
    int64_t offset = best->first, size = best->second;
    free.erase(best);
    if (size > bytes)
      free[offset + bytes] = size - bytes;
    reused += bytes;
    return offset;
  }

  void release(int64_t offset, int64_t bytes) {
    bytes = alignUp(bytes);
    auto [it, inserted] = free.emplace(offset, bytes);
    assert(inserted && "double free in the memory planner");
    (void)inserted;
    if (auto next = std::next(it);
        next != free.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free.erase(next);
    }
    if (it != free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free.erase(it);
      }
    }
  }

  int64_t peak() const { return top; }
  int64_t alignUp(int64_t bytes) const {
    return (bytes + alignment - 1) / alignment * alignment;
  }

private:
  int64_t alignment;
  int64_t top = 0;
  std::map<int64_t, int64_t> free;
};

/// The type of a swapped NVMe declaration: a state or a ZeRO-3 chunk.
static Type swappedType(func::FuncOp func, Attribute name) {
  Operation *decl =
      SymbolTable::lookupNearestSymbolFrom(func, cast<FlatSymbolRefAttr>(name));
  if (auto param = dyn_cast<ParameterOp>(decl))
    return param.getType();
  return cast<StateOp>(decl).getType();
}

struct DscPlanMemoryPass
    : PlanReadingPass<DscPlanMemoryPass, mlir::dsc::impl::DscPlanMemoryPassBase<
                                             DscPlanMemoryPass>> {
  using PlanReadingPass::PlanReadingPass;

  /// The plan knobs this pass builds (readPlan, at the start of a run).
  bool prefetch{};

  /// A region of memory planned apart: the shared one (every rank's; the
  /// only one without pipeline stages) and, pipelined, each pipeline
  /// rank's, which only that rank allocates.
  struct Domain {
    /// Each tier's persistent bytes from its own offset 0 (its own arena).
    std::array<int64_t, 3> persistent = {0, 0, 0};
    int64_t temporaries = 0, staging = 0;
  };
  /// A stage's banks of per-micro-batch slots (PipelineStage::SlotBank):
  /// the values of each, in order, and the slots it needs.
  struct StageBanks {
    std::array<SmallVector<Type>, 3> types;
    std::array<int64_t, 3> slots = {1, 1, 1};
    std::array<int64_t, 3> offset = {0, 0, 0}, stride = {0, 0, 0};
  };

  int64_t alignUp(int64_t bytes) const {
    return (bytes + alignment - 1) / alignment * alignment;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    {
      const ::dsc::ParallelPlan plan = readPlan(module);
      prefetch = plan.prefetch;
    }
    if (alignment <= 0 || (alignment & (alignment - 1))) {
      module.emitError("--dsc-plan-memory: alignment must be a power of two");
      return signalPassFailure();
    }
    Builder b(module.getContext());
    const std::optional<PipelineShape> shape = getPipelineShape(module);
    std::map<int64_t, Domain> domains;
    domains[-1];
    if (shape)
      for (int64_t r = 0; r < shape->ranks(); ++r)
        domains[r];
    auto placeIn = [&](int64_t domain, MemoryTier tier, int64_t bytes) {
      int64_t &top = domains[domain].persistent[static_cast<unsigned>(tier)];
      int64_t offset = top;
      top += alignUp(bytes);
      ++numBuffers;
      return offset;
    };

    // Which domain each program and declaration is in: a stage's programs
    // in their rank's, a declaration in the one rank's whose stages alone
    // name it (the others' when several do, or none).
    SmallVector<func::FuncOp> programs;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (!func.getBody().hasOneBlock()) {
        func.emitError("--dsc-plan-memory: programs must have one block");
        return signalPassFailure();
      }
      programs.push_back(func);
    }
    auto domainOf = [&](func::FuncOp func) -> int64_t {
      std::optional<int64_t> stage = getPipelineStage(func);
      return shape && stage ? shape->rankOf(*stage) : -1;
    };
    // The pipeline ranks whose stages' programs name each declaration.
    llvm::DenseMap<Operation *, std::set<int64_t>> declRanks;
    if (shape)
      for (func::FuncOp func : programs) {
        const int64_t d = domainOf(func);
        if (d < 0)
          continue;
        std::optional<SymbolTable::UseRange> uses =
            SymbolTable::getSymbolUses(&func.getBody());
        if (!uses)
          continue;
        for (const SymbolTable::SymbolUse &use : *uses) {
          Operation *decl =
              SymbolTable::lookupNearestSymbolFrom(func, use.getSymbolRef());
          if (isa_and_nonnull<ParameterOp, StateOp>(decl))
            declRanks[decl].insert(d);
        }
      }
    // One rank's declarations go to its domain; those of some ranks but
    // not all (a tied embedding's parameter and moments: the first and
    // the last) to a domain of that set, allocated by those ranks only
    // (domains -2, -3, ... in declaration order); the rest are shared.
    llvm::DenseMap<Operation *, int64_t> declDomain;
    std::map<std::vector<int64_t>, int64_t> setDomains;
    for (Operation &op : module.getBody()->getOperations()) {
      auto it = declRanks.find(&op);
      if (it == declRanks.end())
        continue;
      const std::set<int64_t> &ranks = it->second;
      if (ranks.size() == 1) {
        declDomain[&op] = *ranks.begin();
      } else if (int64_t(ranks.size()) < shape->ranks()) {
        std::vector<int64_t> key(ranks.begin(), ranks.end());
        auto [at, inserted] =
            setDomains.try_emplace(key, -2 - int64_t(setDomains.size()));
        declDomain[&op] = at->second;
        domains[at->second];
      }
    }

    // Persistent: declarations, then each program's inputs, results and
    // constants. Program inputs of the same position and type share one
    // buffer (the loss function and @forward_backward read one batch; a
    // stage's forward and backward, its input).
    for (Operation &op : module.getBody()->getOperations()) {
      // An inference plan's KV caches: device memory beside the weights.
      if (auto cache = dyn_cast<KvCacheOp>(op)) {
        op.setAttr(kOffsetAttr,
                   b.getI64IntegerAttr(placeIn(-1, MemoryTier::Device,
                                               bytesOfType(cache.getType()))));
        continue;
      }
      if (!isa<ParameterOp, StateOp>(op))
        continue;
      const int64_t d = declDomain.lookup_or(&op, -1);
      MemoryTier tier = isa<ParameterOp>(op) ? cast<ParameterOp>(op).getTier()
                                             : cast<StateOp>(op).getTier();
      Type type = isa<ParameterOp>(op) ? Type(cast<ParameterOp>(op).getType())
                                       : Type(cast<StateOp>(op).getType());
      op.setAttr(kOffsetAttr,
                 b.getI64IntegerAttr(placeIn(d, tier, bytesOfType(type))));
      if (d >= 0)
        op.setAttr(kPipelineRankAttr, b.getI64IntegerAttr(d));
      if (d <= -2)
        op.setAttr(kPipelineRanksAttr,
                   b.getDenseI64ArrayAttr(std::vector<int64_t>(
                       declRanks[&op].begin(), declRanks[&op].end())));
    }

    // A stage's kept values live in its banks' slots (placed below): the
    // forward's input and residuals are where its backward reads them,
    // the gradient received where the backward reads it, B's stash where
    // W reads it.
    std::map<int64_t, StageBanks> banks;
    // (stage, bank, index in the bank) of each value or argument kept.
    llvm::DenseMap<Value, std::tuple<int64_t, unsigned, unsigned>> inBank;
    if (shape && failed(collectBanks(module, *shape, banks, inBank)))
      return signalPassFailure();

    std::map<std::tuple<int64_t, unsigned, const void *>, int64_t> inputOffsets;
    llvm::DenseMap<Operation *, SmallVector<int64_t>> argOffsets;
    for (auto [index, func] : llvm::enumerate(programs)) {
      std::optional<int64_t> stage = getPipelineStage(func);
      // An inference program's inputs are its own (the driver fills each
      // program's before running it).
      std::optional<ProgramRole> role = getProgramRole(func);
      const bool inference =
          role == ProgramRole::Prefill || role == ProgramRole::Decode;
      const int64_t key = inference ? -2 - int64_t(index)
                          : shape && stage ? *stage
                                           : -1;
      SmallVector<int64_t> &offsets = argOffsets[func];
      for (BlockArgument arg : func.getArguments()) {
        offsets.push_back(-1);
        if (inBank.count(arg))
          continue;
        auto k = std::make_tuple(key, arg.getArgNumber(),
                                 arg.getType().getAsOpaquePointer());
        auto [it, inserted] = inputOffsets.try_emplace(k, 0);
        if (inserted)
          it->second = placeIn(domainOf(func), MemoryTier::Device,
                               bytesOfType(arg.getType()));
        offsets.back() = it->second;
      }
    }

    llvm::DenseMap<Value, int64_t> persistentValues;
    for (func::FuncOp func : programs) {
      Block &block = func.getBody().front();
      for (Value result : block.getTerminator()->getOperands()) {
        if (isa<BlockArgument>(result) || persistentValues.count(result)) {
          func.emitError("--dsc-plan-memory: a program must return distinct "
                         "values computed by its ops");
          return signalPassFailure();
        }
        persistentValues[result] =
            inBank.count(result)
                ? -1
                : placeIn(domainOf(func), MemoryTier::Device,
                          bytesOfType(result.getType()));
      }
      for (Operation &op : block.without_terminator())
        if (isa<arith::ConstantOp>(op))
          persistentValues[op.getResult(0)] = placeIn(
              domainOf(func), MemoryTier::Device,
              bytesOfType(op.getResult(0).getType()));
    }

    // The banks: slots * stride bytes each, the kept values at their
    // offsets in slot 0.
    for (auto &[stage, bank] : banks)
      for (unsigned kind = 0; kind < 3; ++kind) {
        int64_t stride = 0;
        for (Type type : bank.types[kind])
          stride += alignUp(bytesOfType(type));
        bank.stride[kind] = stride;
        if (stride == 0 || bank.slots[kind] == 0)
          continue;
        bank.offset[kind] = placeIn(shape->rankOf(stage), MemoryTier::Device,
                                    bank.slots[kind] * stride);
      }
    auto bankOffset = [&](const std::tuple<int64_t, unsigned, unsigned> &at) {
      auto [stage, kind, index] = at;
      const StageBanks &bank = banks[stage];
      int64_t offset = bank.offset[kind];
      for (unsigned i = 0; i < index; ++i)
        offset += alignUp(bytesOfType(bank.types[kind][i]));
      return offset;
    };
    for (auto &[value, at] : inBank) {
      if (auto arg = dyn_cast<BlockArgument>(value))
        argOffsets[arg.getOwner()->getParentOp()][arg.getArgNumber()] =
            bankOffset(at);
      else
        persistentValues[value] = bankOffset(at);
    }
    for (func::FuncOp func : programs)
      func->setAttr(kInputOffsetsAttr,
                    b.getDenseI64ArrayAttr(argOffsets[func]));
    for (auto &[stage, bank] : banks) {
      auto fwd = lookupProgram<func::FuncOp>(module, ProgramRole::Forward,
                                             stage);
      SmallVector<NamedAttribute> entries;
      for (auto [kind, name] : {std::make_pair(0u, "activation"),
                                std::make_pair(1u, "gradient"),
                                std::make_pair(2u, "weight")})
        if (bank.stride[kind] > 0)
          entries.push_back(b.getNamedAttr(
              name, b.getDenseI64ArrayAttr({bank.offset[kind],
                                            bank.stride[kind],
                                            bank.slots[kind]})));
      fwd->setAttr(kSlotBanksAttr, b.getDictionaryAttr(entries));
    }

    // Temporaries, program by program, above its domain's persistent
    // region; NVMe states' host staging above the host tier's.
    SmallVector<NamedAttribute> peaks;
    for (func::FuncOp func : programs) {
      Domain &domain = domains[domainOf(func)];
      int64_t stagingPeak = 0;
      int64_t peak = planProgram(
          func, domain.persistent[0], persistentValues,
          domain.persistent[static_cast<unsigned>(MemoryTier::Host)],
          stagingPeak);
      peaks.push_back(
          b.getNamedAttr(func.getSymName(), b.getI64IntegerAttr(peak)));
      domain.temporaries = std::max(domain.temporaries, peak);
      domain.staging = std::max(domain.staging, stagingPeak);
    }

    // Each domain's arenas, and what a rank allocates: the shared domain's
    // and its own (the largest of them is the plan's per-rank peak).
    auto describe = [&](const Domain &d, const Domain *with) {
      auto sum = [&](auto field) {
        return field(d) + (with ? field(*with) : int64_t(0));
      };
      const int64_t persistent =
          sum([](const Domain &x) { return x.persistent[0]; });
      const int64_t temporaries =
          sum([](const Domain &x) { return x.temporaries; });
      const int64_t staging = sum([](const Domain &x) { return x.staging; });
      const int64_t host = sum([](const Domain &x) {
        return x.persistent[static_cast<unsigned>(MemoryTier::Host)];
      });
      const int64_t nvme = sum([](const Domain &x) {
        return x.persistent[static_cast<unsigned>(MemoryTier::Nvme)];
      });
      SmallVector<NamedAttribute> memory = {
          b.getNamedAttr("persistent_bytes", b.getI64IntegerAttr(persistent)),
          b.getNamedAttr("temporary_bytes", b.getI64IntegerAttr(temporaries)),
          b.getNamedAttr("arena_bytes",
                         b.getI64IntegerAttr(persistent + temporaries))};
      // The offload tiers' arenas, when --dsc-offload placed state there.
      if (host + staging > 0) {
        memory.push_back(
            b.getNamedAttr("host_bytes", b.getI64IntegerAttr(host + staging)));
        memory.push_back(b.getNamedAttr("host_staging_bytes",
                                        b.getI64IntegerAttr(staging)));
      }
      if (nvme > 0)
        memory.push_back(
            b.getNamedAttr("nvme_bytes", b.getI64IntegerAttr(nvme)));
      return memory;
    };
    const Domain &shared = domains[-1];
    SmallVector<NamedAttribute> memory;
    if (!shape) {
      memory = describe(shared, nullptr);
    } else {
      // The module's figures are the largest rank's (its own domain and
      // the sets it is in, with the shared one); each rank's own arenas,
      // the shared ones and each set's are listed apart.
      auto heldBy = [&](int64_t r) {
        Domain held = domains[r];
        for (const auto &[set, id] : setDomains)
          if (std::binary_search(set.begin(), set.end(), r))
            for (unsigned t = 0; t < 3; ++t)
              held.persistent[t] += domains[id].persistent[t];
        return held;
      };
      SmallVector<Attribute> ranks;
      int64_t worst = 0, worstPeak = -1;
      for (int64_t r = 0; r < shape->ranks(); ++r) {
        ranks.push_back(b.getDictionaryAttr(describe(domains[r], nullptr)));
        const Domain held = heldBy(r);
        const int64_t peak = held.persistent[0] + held.temporaries;
        if (peak > worstPeak) {
          worstPeak = peak;
          worst = r;
        }
      }
      memory = describe(heldBy(worst), &shared);
      memory.push_back(b.getNamedAttr("pipeline_ranks", b.getArrayAttr(ranks)));
      memory.push_back(b.getNamedAttr(
          "shared", b.getDictionaryAttr(describe(shared, nullptr))));
      if (!setDomains.empty()) {
        SmallVector<Attribute> sets;
        for (const auto &[set, id] : setDomains) {
          SmallVector<NamedAttribute> entry = describe(domains[id], nullptr);
          entry.push_back(b.getNamedAttr("ranks", b.getDenseI64ArrayAttr(set)));
          sets.push_back(b.getDictionaryAttr(entry));
        }
        memory.push_back(
            b.getNamedAttr("shared_by_ranks", b.getArrayAttr(sets)));
      }
    }
    memory.push_back(
        b.getNamedAttr("alignment", b.getI64IntegerAttr(alignment)));
    module->setAttr(kMemoryAttr, b.getDictionaryAttr(memory));
    module->setAttr(kProgramPeaksAttr, b.getDictionaryAttr(peaks));
  }

  /// Each stage's banks: what its forward keeps for its backward (the
  /// input, the residuals), the output's gradient, and zero-bubble what B
  /// keeps for W; the slots each needs, from the rank's step.
  LogicalResult collectBanks(
      ModuleOp module, const PipelineShape &shape,
      std::map<int64_t, StageBanks> &banks,
      llvm::DenseMap<Value, std::tuple<int64_t, unsigned, unsigned>> &inBank) {
    bool zeroBubble = false;
    for (int64_t k = 0; k < shape.stages; ++k) {
      auto fwd = lookupProgram<func::FuncOp>(module, ProgramRole::Forward, k);
      auto fb =
          lookupProgram<func::FuncOp>(module, ProgramRole::ForwardBackward, k);
      auto weight =
          lookupProgram<func::FuncOp>(module, ProgramRole::BackwardWeight, k);
      if (!fwd || !fb)
        continue; // not a trained stage (yet): nothing kept
      StageBanks &bank = banks[k];
      auto keep = [&](unsigned kind, ArrayRef<Value> values) -> LogicalResult {
        const unsigned index = bank.types[kind].size();
        bank.types[kind].push_back(values.front().getType());
        for (Value v : values) {
          if (v.getType() != values.front().getType())
            return fb.emitError("--dsc-plan-memory: stage ")
                   << k << " keeps a value of type " << values.front().getType()
                   << " that a later program reads as " << v.getType();
          inBank[v] = {k, kind, index};
        }
        return success();
      };
      if (fwd.getNumArguments() < 1 || fb.getNumArguments() < 1 ||
          failed(keep(kActivationSlots,
                      {fwd.getArgument(0), fb.getArgument(0)})))
        return fwd.emitError("--dsc-plan-memory: stage ")
               << k << "'s forward and backward must take its input first";
      Operation *ret = fwd.getBody().front().getTerminator();
      if (k + 1 < shape.stages) {
        if (fb.getNumArguments() < 2 ||
            ret->getNumOperands() + 1 != fb.getNumArguments())
          return fb.emitError("--dsc-plan-memory: stage ")
                 << k << "'s forward returns " << ret->getNumOperands()
                 << " values (its output and residuals) but its backward "
                    "takes "
                 << fb.getNumArguments()
                 << " (its input, the output's gradient and the residuals)";
        if (failed(keep(kGradientSlots, {fb.getArgument(1)})))
          return failure();
        for (unsigned i = 1; i < ret->getNumOperands(); ++i)
          if (failed(keep(kActivationSlots,
                          {ret->getOperand(i), fb.getArgument(i + 1)})))
            return failure();
      }
      if (weight) {
        zeroBubble = true;
        Operation *bret = fb.getBody().front().getTerminator();
        auto kept = fb->getAttrOfType<IntegerAttr>(kWeightStashAttr);
        if (!kept || kept.getInt() != int64_t(weight.getNumArguments()) ||
            kept.getInt() > int64_t(bret->getNumOperands()))
          return fb.emitError("--dsc-plan-memory: stage ")
                 << k << "'s backward keeps " << (kept ? kept.getInt() : 0)
                 << " values (dsc.weight_stash) but its weight-gradient part "
                    "takes "
                 << weight.getNumArguments();
        const unsigned first = bret->getNumOperands() - unsigned(kept.getInt());
        for (unsigned i = 0; i < weight.getNumArguments(); ++i)
          if (failed(keep(kWeightSlots, {bret->getOperand(first + i),
                                         weight.getArgument(i)})))
            return failure();
      }
    }
    // The slots: as many as the rank's step keeps in flight at once.
    for (int64_t r = 0; r < shape.ranks(); ++r) {
      auto step =
          lookupProgram<func::FuncOp>(module, ProgramRole::PipelineStep, r);
      if (!step)
        continue; // not scheduled: one slot each
      std::optional<std::vector<::dsc::PipelineStepOp>> ops =
          readPipelineStep(step, shape);
      if (!ops)
        return step.emitError("--dsc-plan-memory: pipeline rank ")
               << r << "'s step holds an op that is no step instruction";
      ::dsc::PipelineSlots slots = ::dsc::assignPipelineSlots(
          *ops, r, shape.ranks(), shape.stages - 1, zeroBubble);
      if (!slots.error.empty())
        return step.emitError("--dsc-plan-memory: pipeline rank ")
               << r << "'s step is not well formed: " << slots.error;
      for (auto &[stage, counts] : slots.counts) {
        auto it = banks.find(stage);
        if (it == banks.end())
          continue;
        for (unsigned kind = 0; kind < 3; ++kind)
          it->second.slots[kind] = std::max<int64_t>(counts[kind], 1);
      }
    }
    return success();
  }

  /// Plans the temporaries of `func` at `base` and returns their peak bytes;
  /// NVMe states' host staging (dsc.swap_in to dsc.swap_out) at
  /// `stagingBase` of the host arena, its peak in `stagingPeak`.
  int64_t planProgram(func::FuncOp func, int64_t base,
                      const llvm::DenseMap<Value, int64_t> &persistentValues,
                      int64_t stagingBase, int64_t &stagingPeak) {
    Block &block = func.getBody().front();
    llvm::DenseMap<Operation *, unsigned> position;
    unsigned index = 0;
    for (Operation &op : block)
      position[&op] = index++;

    // Views alias their source's buffer instead of copying it: a parameter
    // read is the parameter's buffer, a reshape of contiguous data is its
    // input's. `root` maps a view to the value that owns the bytes.
    llvm::DenseMap<Value, Value> root;
    auto rootOf = [&](Value value) {
      auto it = root.find(value);
      return it == root.end() ? value : it->second;
    };
    // Only temporaries are viewed: a persistent buffer (a parameter, a
    // program result) must not share its bytes, so reshaping one copies.
    auto isTemporary = [&](Value value) {
      return !isa<BlockArgument>(value) && !persistentValues.count(value) &&
             !value.getDefiningOp<GetParameterOp>();
    };
    // copy_to_parallel is the identity forward: a view too. An all-reduce
    // works in place on a temporary input that it is the only user of.
    for (Operation &op : block.without_terminator()) {
      Value input, result;
      if (auto reshape = dyn_cast<ReshapeOp>(op)) {
        input = reshape.getInput();
        result = reshape.getResult();
      } else if (auto enter = dyn_cast<CopyToParallelOp>(op)) {
        input = enter.getInput();
        result = enter.getResult();
      } else if (auto reduce = dyn_cast<AllReduceOp>(op);
                 reduce && reduce.getInput().hasOneUse() &&
                 rootOf(reduce.getInput()) == reduce.getInput()) {
        input = reduce.getInput();
        result = reduce.getResult();
      }
      if (input && isTemporary(result) && isTemporary(rootOf(input)))
        root[result] = rootOf(input);
    }

    // Last use of each buffer owner (its definition when unused), extended
    // over the uses of its views.
    llvm::DenseMap<Value, unsigned> lastUse;
    for (Operation &op : block.without_terminator())
      for (Value result : op.getResults()) {
        unsigned last = position[&op];
        for (Operation *user : result.getUsers())
          last = std::max(last, position[block.findAncestorOpInBlock(*user)]);
        Value owner = rootOf(result);
        lastUse[owner] = std::max(lastUse.lookup(owner), last);
      }

    // Prefetch: a gathered parameter is born just after the gather before
    // it (see the pass description).
    llvm::DenseMap<unsigned, SmallVector<Value>> bornEarly;
    if (prefetch) {
      std::optional<unsigned> previous;
      for (Operation &op : block.without_terminator())
        if (auto gather = dyn_cast<GatherParameterOp>(op)) {
          if (previous && *previous + 1 < position[&op])
            bornEarly[*previous + 1].push_back(gather.getResult());
          previous = position[&op];
        }
    }

    Builder b(func.getContext());
    auto moduleOffset = [&](FlatSymbolRefAttr name) -> int64_t {
      Operation *decl = SymbolTable::lookupNearestSymbolFrom(func, name);
      return cast<IntegerAttr>(decl->getAttr(kOffsetAttr)).getInt();
    };
    RangeAllocator allocator(alignment), stagingAllocator(alignment);
    llvm::DenseMap<Attribute, int64_t> staged; // swapped-in state -> offset
    int64_t reused = 0, stagingReused = 0;
    llvm::DenseMap<Value, int64_t> offsets;  // owners of temporary buffers
    llvm::DenseMap<Value, int64_t> absolute; // every value's offset
    for (Operation &op : block.without_terminator()) {
      unsigned here = position[&op];
      if (auto swapIn = dyn_cast<SwapInOp>(op)) {
        SmallVector<int64_t> at;
        for (Attribute state : swapIn.getStates()) {
          int64_t &offset = staged[state];
          offset = stagingAllocator.allocate(
              bytesOfType(swappedType(func, state)), stagingReused);
          at.push_back(stagingBase + offset);
        }
        op.setAttr(kOffsetsAttr, b.getDenseI64ArrayAttr(at));
        continue;
      }
      if (auto swapOut = dyn_cast<SwapOutOp>(op)) {
        for (Attribute state : swapOut.getStates()) {
          auto it = staged.find(state);
          if (it == staged.end()) {
            op.emitError("--dsc-plan-memory: swaps out ")
                << state << ", which no dsc.swap_in before it swapped in";
            signalPassFailure();
            return 0;
          }
          stagingAllocator.release(it->second,
                                   bytesOfType(swappedType(func, state)));
          staged.erase(it);
        }
        continue;
      }
      for (Value early : bornEarly.lookup(here)) {
        offsets[early] = allocator.allocate(bytesOfType(early.getType()), reused);
        ++numBuffers;
      }
      SmallVector<int64_t> resultOffsets;
      for (Value result : op.getResults()) {
        int64_t offset;
        if (auto it = offsets.find(result); it != offsets.end()) {
          offset = base + it->second; // born early
        } else if (auto it = persistentValues.find(result);
                   it != persistentValues.end()) {
          offset = it->second;
        } else if (auto read = dyn_cast<GetParameterOp>(op)) {
          offset = moduleOffset(read.getNameAttr());
        } else if (root.count(result)) {
          offset = absolute.lookup(root[result]);
        } else {
          int64_t relative =
              allocator.allocate(bytesOfType(result.getType()), reused);
          offsets[result] = relative;
          offset = base + relative;
          ++numBuffers;
        }
        absolute[result] = offset;
        resultOffsets.push_back(offset);
      }
      if (op.getNumResults())
        op.setAttr(kOffsetsAttr, b.getDenseI64ArrayAttr(resultOffsets));
      // Owners die after the op that uses them (or a view of them) last;
      // outputs are allocated first so that no kernel writes over an operand
      // it is reading.
      SmallVector<Value> dying;
      auto consider = [&](Value value) {
        Value owner = rootOf(value);
        if (offsets.count(owner) && lastUse[owner] == here &&
            !llvm::is_contained(dying, owner))
          dying.push_back(owner);
      };
      for (Value operand : op.getOperands())
        consider(operand);
      for (Value result : op.getResults())
        consider(result);
      for (Value value : dying)
        allocator.release(offsets[value], bytesOfType(value.getType()));
    }
    if (!staged.empty()) {
      func.emitError("--dsc-plan-memory: ")
          << staged.size()
          << " states swapped in are never swapped out, among them "
          << staged.begin()->first;
      signalPassFailure();
    }
    reusedBytes += reused;
    stagingPeak = stagingAllocator.peak();
    return allocator.peak();
  }
};

} // namespace
