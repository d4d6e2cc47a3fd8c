//===- PlanMemory.cpp - --dsc-plan-memory -----------------------*- C++ -*-===//
//
// Static memory planning: persistent buffers end to end, then each program's
// temporaries by a linear scan over live ranges with best-fit reuse. The
// result is written into the IR as offsets, which is the plan form.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/PlanOptions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"

#include <array>
#include <map>
#include <optional>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCPLANMEMORYPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

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
    // Each tier's persistent bytes from its own offset 0 (its own arena).
    std::array<int64_t, 3> tierPersistent = {0, 0, 0};
    int64_t &persistent = tierPersistent[0];
    auto placeIn = [&](MemoryTier tier, int64_t bytes) {
      int64_t &top = tierPersistent[static_cast<unsigned>(tier)];
      int64_t offset = top;
      top += (bytes + alignment - 1) / alignment * alignment;
      ++numBuffers;
      return offset;
    };
    auto place = [&](int64_t bytes) {
      return placeIn(MemoryTier::Device, bytes);
    };

    // Persistent: declarations, then each program's inputs, results and
    // constants. Program inputs of the same position and type share one
    // buffer (the loss function and @forward_backward read one batch).
    for (Operation &op : module.getBody()->getOperations()) {
      if (auto param = dyn_cast<ParameterOp>(op))
        op.setAttr(kOffsetAttr,
                   b.getI64IntegerAttr(
                       placeIn(param.getTier(), bytesOfType(param.getType()))));
      else if (auto state = dyn_cast<StateOp>(op))
        op.setAttr(kOffsetAttr,
                   b.getI64IntegerAttr(
                       placeIn(state.getTier(), bytesOfType(state.getType()))));
    }
    llvm::DenseMap<std::pair<unsigned, Type>, int64_t> inputOffsets;
    SmallVector<func::FuncOp> programs;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (!func.getBody().hasOneBlock()) {
        func.emitError("--dsc-plan-memory: programs must have one block");
        return signalPassFailure();
      }
      programs.push_back(func);
      SmallVector<int64_t> offsets;
      for (BlockArgument arg : func.getArguments()) {
        auto key = std::make_pair(arg.getArgNumber(), arg.getType());
        auto [it, inserted] = inputOffsets.try_emplace(key, 0);
        if (inserted)
          it->second = place(bytesOfType(arg.getType()));
        offsets.push_back(it->second);
      }
      func->setAttr(kInputOffsetsAttr, b.getDenseI64ArrayAttr(offsets));
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
        persistentValues[result] = place(bytesOfType(result.getType()));
      }
      for (Operation &op : block.without_terminator())
        if (isa<arith::ConstantOp>(op))
          persistentValues[op.getResult(0)] =
              place(bytesOfType(op.getResult(0).getType()));
    }

    // Temporaries, program by program, above the persistent region; NVMe
    // states' host staging above the host tier's.
    int64_t temporaries = 0, staging = 0;
    const int64_t hostPersistent =
        tierPersistent[static_cast<unsigned>(MemoryTier::Host)];
    SmallVector<NamedAttribute> peaks;
    for (func::FuncOp func : programs) {
      int64_t stagingPeak = 0;
      int64_t peak = planProgram(func, persistent, persistentValues,
                                 hostPersistent, stagingPeak);
      peaks.push_back(
          b.getNamedAttr(func.getSymName(), b.getI64IntegerAttr(peak)));
      temporaries = std::max(temporaries, peak);
      staging = std::max(staging, stagingPeak);
    }
    SmallVector<NamedAttribute> memory = {
        b.getNamedAttr("persistent_bytes", b.getI64IntegerAttr(persistent)),
        b.getNamedAttr("temporary_bytes", b.getI64IntegerAttr(temporaries)),
        b.getNamedAttr("arena_bytes",
                       b.getI64IntegerAttr(persistent + temporaries)),
        b.getNamedAttr("alignment", b.getI64IntegerAttr(alignment))};
    // The offload tiers' arenas, when --dsc-offload placed state there.
    const int64_t nvme =
        tierPersistent[static_cast<unsigned>(MemoryTier::Nvme)];
    if (hostPersistent + staging > 0) {
      memory.push_back(b.getNamedAttr(
          "host_bytes", b.getI64IntegerAttr(hostPersistent + staging)));
      memory.push_back(
          b.getNamedAttr("host_staging_bytes", b.getI64IntegerAttr(staging)));
    }
    if (nvme > 0)
      memory.push_back(b.getNamedAttr("nvme_bytes", b.getI64IntegerAttr(nvme)));
    module->setAttr(kMemoryAttr, b.getDictionaryAttr(memory));
    module->setAttr(kProgramPeaksAttr, b.getDictionaryAttr(peaks));
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
