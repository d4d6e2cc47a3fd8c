//===- PlanSummary.cpp - --dsc-plan-summary ---------------------*- C++ -*-===//
//
// Prints what a compiled plan will cost: planned bytes, model FLOPs and
// collective bytes, as one JSON object that tests and tools can read.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/Dsc/IR/DscAttrNames.h"
#include "dsc/Dialect/Dsc/IR/DscOps.h"
#include "dsc/Dialect/Dsc/IR/DscPrograms.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCPLANSUMMARYPASS
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// The op a training program's forward part runs where a forward program
/// runs `op`'s kind: --dsc-fuse's attention_lse is the forward program's
/// attention that also saves its statistics for the backward.
StringRef forwardOpName(Operation &op) {
  if (isa<AttentionLseOp>(op))
    return AttentionOp::getOperationName();
  return op.getName().getStringRef();
}

/// Whether `program`'s ops begin with those of `forward` (a training
/// program that computes its own forward).
bool beginsWith(func::FuncOp program, func::FuncOp forward) {
  if (!program.getBody().hasOneBlock() || !forward.getBody().hasOneBlock())
    return false;
  auto ops = program.getBody().front().without_terminator();
  auto it = ops.begin();
  for (Operation &op : forward.getBody().front().without_terminator()) {
    if (it == ops.end() || forwardOpName(*it) != forwardOpName(op))
      return false;
    ++it;
  }
  return true;
}

struct DscPlanSummaryPass
    : mlir::dsc::impl::DscPlanSummaryPassBase<DscPlanSummaryPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto memory = module->getAttrOfType<DictionaryAttr>(kMemoryAttr);
    auto peaks = module->getAttrOfType<DictionaryAttr>(kProgramPeaksAttr);
    if (!memory || !peaks) {
      module.emitError("--dsc-plan-summary needs a compiled module; run "
                       "--dsc-compile first");
      return signalPassFailure();
    }
    if (microbatches < 1) {
      module.emitError("--dsc-plan-summary: microbatches must be >= 1");
      return signalPassFailure();
    }
    auto fb = lookupProgram<func::FuncOp>(module, ProgramRole::ForwardBackward);
    // `whole_parameters` is the model's size (the whole of a sharded
    // parameter); the element counts and model-state bytes are what one
    // rank stores.
    int64_t parameters = 0, wholeParameters = 0, gradients = 0,
            optimizerState = 0, offloadCopies = 0, modelStateBytes = 0;
    // Model-state bytes by tier (device, host, nvme): --dsc-offload's.
    int64_t tierBytes[3] = {0, 0, 0};
    auto bytesOf = [](RankedTensorType type) {
      return type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
    };
    for (Operation &op : module.getBody()->getOperations()) {
      if (auto param = dyn_cast<ParameterOp>(op)) {
        parameters += param.getNumElements();
        wholeParameters += param.getWholeNumElements();
        modelStateBytes += bytesOf(param.getTensorType());
        tierBytes[static_cast<unsigned>(param.getTier())] +=
            bytesOf(param.getTensorType());
      } else if (auto state = dyn_cast<StateOp>(op)) {
        const StateKind kind = state.getKind();
        (kind == StateKind::Gradient ? gradients
         : kind == StateKind::Master || kind == StateKind::GradientCopy
             ? offloadCopies
             : optimizerState) += state.getTensorType().getNumElements();
        modelStateBytes += bytesOf(state.getTensorType());
        tierBytes[static_cast<unsigned>(state.getTier())] +=
            bytesOf(state.getTensorType());
      }
    }
    // What one step moves between tiers ([from][to]): the optimizer
    // program's transfers and swaps, and each micro-batch's fetches of
    // offloaded ZeRO-3 chunks.
    int64_t moved[3][3] = {};
    SymbolTableCollection tables;
    auto declOf = [&](FlatSymbolRefAttr name) {
      return tables.lookupNearestSymbolFrom(module, name);
    };
    auto tierOf = [&](FlatSymbolRefAttr name) {
      Operation *decl = declOf(name);
      if (auto state = dyn_cast_or_null<StateOp>(decl))
        return static_cast<unsigned>(state.getTier());
      if (auto param = dyn_cast_or_null<ParameterOp>(decl))
        return static_cast<unsigned>(param.getTier());
      return 0u;
    };
    auto bytesOfDecl = [&](FlatSymbolRefAttr name) {
      Operation *decl = declOf(name);
      if (auto param = dyn_cast<ParameterOp>(decl))
        return bytesOf(param.getTensorType());
      return bytesOf(cast<StateOp>(decl).getTensorType());
    };
    if (auto opt =
            lookupProgram<func::FuncOp>(module, ProgramRole::Optimizer)) {
      // A transfer's NVMe side is its host staging (swapped in).
      auto stagedTierOf = [&](FlatSymbolRefAttr name) {
        unsigned tier = tierOf(name);
        return tier == 2 ? 1u : tier;
      };
      opt.walk([&](Operation *op) {
        if (auto transfer = dyn_cast<TransferOp>(op))
          moved[stagedTierOf(transfer.getSourceAttr())]
               [stagedTierOf(transfer.getDestinationAttr())] +=
              transfer.getBytes(tables);
        auto swap = [&](ArrayAttr states, unsigned from, unsigned to) {
          for (Attribute state : states)
            moved[from][to] += bytesOfDecl(cast<FlatSymbolRefAttr>(state));
        };
        if (auto in = dyn_cast<SwapInOp>(op))
          swap(in.getStates(), 2, 1);
        if (auto out = dyn_cast<SwapOutOp>(op))
          swap(out.getStates(), 1, 2);
      });
    }
    // ZeRO-3 gathers every chunked parameter for the forward, and again for
    // the backward only those the backward reads (a bias or a layer norm's
    // beta has a gradient that does not depend on it): the elements of the
    // backward's gathers, per micro-batch.
    int64_t backwardGathered = 0;
    if (fb) {
      Block &top = fb.getBody().front();
      Operation *lossOp = nullptr;
      if (top.getTerminator()->getNumOperands())
        if (Operation *def = top.getTerminator()->getOperand(0).getDefiningOp())
          lossOp = top.findAncestorOpInBlock(*def);
      fb.walk([&](GatherParameterOp gather) {
        Operation *at = top.findAncestorOpInBlock(*gather);
        if (lossOp && at && lossOp->isBeforeInBlock(at))
          backwardGathered +=
              cast<RankedTensorType>(gather.getType()).getNumElements();
      });
    }
    // Model FLOPs: the forward programs are the forward pass; the training
    // programs are forward and backward (3x the forward's dense FLOPs). A
    // pipelined plan's are every stage's together, the model's FLOPs of one
    // micro-batch as without stages: its forward_backward, its split-off
    // backward_weight, and its forward where the training program does not
    // begin with it (--dsc-stage-backward's backward of a stage but the
    // last, whose forward runs on its own in the step).
    auto flopsOf = [](Operation *program) {
      int64_t sum = 0;
      program->walk(
          [&](CostOpInterface op) { sum += op.getCost().matmulFlops; });
      return sum;
    };
    int64_t flops = 0, forwardFlops = 0;
    for (Operation *forward : getProgramOps(module, ProgramRole::Forward))
      forwardFlops += flopsOf(forward);
    for (Operation *weight : getProgramOps(module, ProgramRole::BackwardWeight))
      flops += flopsOf(weight);
    for (Operation *program :
         getProgramOps(module, ProgramRole::ForwardBackward)) {
      flops += flopsOf(program);
      auto forward = lookupProgram<func::FuncOp>(module, ProgramRole::Forward,
                                                 getPipelineStage(program));
      if (forward && !beginsWith(cast<func::FuncOp>(program), forward))
        flops += flopsOf(forward);
    }
    // The module's micro-batch count (dsc.microbatches, which --dsc-autodiff
    // recorded) wins over the option, which only stands in for a module
    // that lacks it: ZeRO-2's reduce-scatters and ZeRO-3's gathers, and
    // every FLOP of the training programs, run once per micro-batch.
    int64_t perStep = microbatches;
    if (auto m = module->getAttrOfType<IntegerAttr>(kMicrobatchesAttr))
      perStep = m.getInt();
    CollectiveBytes collectives = collectiveBytesPerStep(module, perStep);
    // Each micro-batch fetches the offloaded chunks its gathers read.
    if (fb)
      fb.walk([&](FetchParameterOp fetch) {
        moved[tierOf(fetch.getNameAttr())][0] +=
            perStep * bytesOf(cast<RankedTensorType>(fetch.getType()));
      });
    auto get = [](DictionaryAttr dict, StringRef key) {
      auto value = dict.getAs<IntegerAttr>(key);
      return value ? value.getInt() : 0;
    };

    llvm::json::OStream json(llvm::outs(), /*IndentSize=*/2);
    json.object([&] {
      json.attributeObject("bytes", [&] {
        json.attributeObject("device", [&] {
          json.attribute("persistent", get(memory, "persistent_bytes"));
          json.attribute("temporary", get(memory, "temporary_bytes"));
          json.attribute("peak", get(memory, "arena_bytes"));
        });
        // The offload tiers' arenas (--dsc-offload): persistent state and
        // the NVMe states' host staging.
        json.attribute("host", get(memory, "host_bytes"));
        json.attribute("host_staging", get(memory, "host_staging_bytes"));
        json.attribute("nvme", get(memory, "nvme_bytes"));
      });
      // A pipelined plan's ranks each allocate their own stages' arenas
      // and the shared ones ("bytes" above is the largest rank's sum).
      if (auto ranks = memory.getAs<ArrayAttr>("pipeline_ranks")) {
        auto shared = memory.getAs<DictionaryAttr>("shared");
        auto tiers = [&](DictionaryAttr dict) {
          json.attribute("device_persistent", get(dict, "persistent_bytes"));
          json.attribute("device_temporary", get(dict, "temporary_bytes"));
          json.attribute("device_peak", get(dict, "arena_bytes"));
          json.attribute("host", get(dict, "host_bytes"));
          json.attribute("nvme", get(dict, "nvme_bytes"));
        };
        // What some ranks share (the tied embedding's parameter and
        // moments: the first and the last) is in those ranks' sums only.
        auto sets = memory.getAs<ArrayAttr>("shared_by_ranks");
        auto setBytesOf = [&](int64_t r) {
          int64_t bytes = 0;
          if (sets)
            for (Attribute entry : sets) {
              auto dict = cast<DictionaryAttr>(entry);
              auto set = dict.getAs<DenseI64ArrayAttr>("ranks");
              if (set && llvm::is_contained(set.asArrayRef(), r))
                bytes += get(dict, "arena_bytes");
            }
          return bytes;
        };
        json.attributeArray("bytes_per_pipeline_rank", [&] {
          for (auto [r, rank] : llvm::enumerate(ranks))
            json.object([&] {
              auto own = cast<DictionaryAttr>(rank);
              tiers(own);
              json.attribute("device_peak_with_shared",
                             get(own, "arena_bytes") +
                                 (shared ? get(shared, "arena_bytes") : 0) +
                                 setBytesOf(int64_t(r)));
            });
        });
        if (shared)
          json.attributeObject("bytes_shared_by_pipeline_ranks",
                               [&] { tiers(shared); });
        if (sets)
          json.attributeArray("bytes_shared_by_sets_of_pipeline_ranks", [&] {
            for (Attribute entry : sets)
              json.object([&] {
                auto dict = cast<DictionaryAttr>(entry);
                json.attributeArray("ranks", [&] {
                  if (auto set = dict.getAs<DenseI64ArrayAttr>("ranks"))
                    for (int64_t r : set.asArrayRef())
                      json.value(r);
                });
                tiers(dict);
              });
          });
      }
      json.attributeObject("model_state_bytes_by_tier", [&] {
        json.attribute("device", tierBytes[0]);
        json.attribute("host", tierBytes[1]);
        json.attribute("nvme", tierBytes[2]);
      });
      json.attributeObject("transfer_bytes_per_step", [&] {
        json.attribute("device_to_host", moved[0][1]);
        json.attribute("host_to_device", moved[1][0]);
        json.attribute("host_to_nvme", moved[1][2]);
        json.attribute("nvme_to_host", moved[2][1]);
        json.attribute("nvme_to_device", moved[2][0]);
      });
      json.attributeObject("program_temporary_bytes", [&] {
        for (NamedAttribute peak : peaks)
          json.attribute(peak.getName().getValue(),
                         cast<IntegerAttr>(peak.getValue()).getInt());
      });
      json.attribute("parameters", parameters);
      json.attribute("whole_parameters", wholeParameters);
      json.attribute("gradient_elements", gradients);
      json.attribute("optimizer_state_elements", optimizerState);
      json.attribute("offload_copy_elements", offloadCopies);
      json.attribute("model_state_bytes", modelStateBytes);
      json.attribute("backward_gathered_elements", backwardGathered);
      json.attribute("microbatches", perStep);
      json.attribute("forward_flops_per_microbatch", forwardFlops);
      json.attribute("flops_per_microbatch", flops);
      json.attribute("flops_per_step", flops * perStep);
      json.attributeObject("collective_bytes_per_step", [&] {
        json.attribute("all_reduce", collectives.allReduce);
        json.attribute("reduce_scatter", collectives.reduceScatter);
        json.attribute("all_gather", collectives.allGather);
        json.attribute("all_to_all", collectives.allToAll);
      });
      // A 1-bit optimizer's steps after its warm-up run the
      // compressed_optimizer instead.
      if (lookupProgramOp(module, ProgramRole::CompressedOptimizer)) {
        CollectiveBytes compressed =
            collectiveBytesPerStep(module, perStep, /*compressed=*/true);
        json.attributeObject("collective_bytes_per_compressed_step", [&] {
          json.attribute("all_reduce", compressed.allReduce);
          json.attribute("reduce_scatter", compressed.reduceScatter);
          json.attribute("all_gather", compressed.allGather);
          json.attribute("all_to_all", compressed.allToAll);
          json.attribute("compressed_all_reduce",
                         compressed.compressedAllReduce);
        });
      }
    });
    llvm::outs() << "\n";
    markAllAnalysesPreserved();
  }
};

} // namespace
