//===- LossScaling.cpp - Dynamic loss scaling of an f16 plan --------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The overflow vote over all ranks and the unscaling of the gradients.
//
//===----------------------------------------------------------------------===//

#include "LossScaling.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

using namespace dsc::rt;

LossScaleRule dsc::rt::lossScaleRuleOf(const Plan &plan) {
  for (const Buffer &b : plan.buffers)
    if ((b.role == BufferRole::OptimizerState ||
         b.role == BufferRole::Parameter) &&
        b.layout.chunkAxes != 0)
      return LossScaleRule::Dynamic;
  // On one data-parallel rank nothing is chunked, but ZeRO's instructions
  // remain: the flat-shard updates of stages 1 and 2, stage 3's gathers.
  for (const Program &program : plan.programs)
    for (const Instruction &inst : program.instructions)
      switch (inst.opcode) {
      case Opcode::AdamWShard:
      case Opcode::AdamWShardScheduledBeta1:
      case Opcode::OnebitAdamShard:
      case Opcode::FrozenAdamShard:
      case Opcode::GatherParameter:
        return LossScaleRule::Dynamic;
      default:
        break;
      }
  return LossScaleRule::Fused;
}

LossScaling::LossScaling(const Plan &plan) : rule(lossScaleRuleOf(plan)) {
  settings.rule = rule;
  for (const Buffer &b : plan.buffers)
    if (b.dtype == DType::F16) {
      scaler.emplace(settings);
      break;
    }
}

void LossScaling::setConfig(const LossScalerConfig &cfg) {
  settings = cfg;
  settings.rule = rule;
  if (scaler)
    scaler.emplace(settings);
}

double LossScaling::backwardSeed(int64_t microBatches) const {
  return (scaler ? scaler->scale() : 1.0) / double(microBatches);
}

bool LossScaling::unscaleOrSkip(const Plan &plan, const Arenas &arenas,
                                Backend &backend, Communicator *world,
                                int64_t step, StepResult &r) {
  if (!scaler)
    return true;
  const double used = scaler->scale();
  std::vector<std::pair<float *, int64_t>> grads;
  double sum = 0;
  for (uint32_t id = 0; id < plan.buffers.size(); ++id) {
    const Buffer &b = plan.buffers[id];
    if (b.role != BufferRole::Gradient || !b.bytes)
      continue;
    if (b.dtype != DType::F32)
      throw Error("loss scaling: gradient '" + b.name + "' is " +
                  dtypeName(b.dtype) + "; f16 plans keep f32 gradients");
    grads.push_back({arenas.view(id).as<float>(), numElements(b.shape)});
    sum += backend.sumOfSquares(grads.back().first, grads.back().second);
  }
  // One overflow anywhere skips the step everywhere, as DeepSpeed
  // all-reduces its overflow flag.
  int32_t overflow = std::isfinite(sum) ? 0 : 1;
  if (world && world->size() > 1)
    world->allReduce(&overflow, 1, DType::I32, ReduceOp::Max);
  const LossScaleEvent event = scaler->update(overflow != 0);
  r.lossScale = used;
  r.skippedSteps = scaler->skippedSteps();
  if (event == LossScaleEvent::SkippedAtMin)
    throw Error("loss scaling: the gradients overflow at the minimum loss "
                "scale " +
                std::to_string(used) + " (step " + std::to_string(step) +
                "): training diverged (try a lower --lr)");
  if (overflow) {
    r.skipped = true;
    for (auto [data, count] : grads)
      backend.fillZero(data, uint64_t(count) * sizeof(float));
    return false;
  }
  for (auto [data, count] : grads)
    backend.scale(DType::F32, data, count, 1.0 / used);
  return true;
}

void LossScaling::restart(const std::optional<LossScalerState> &saved) {
  if (!scaler)
    return;
  scaler.emplace(settings);
  if (saved)
    scaler->restore(*saved);
}
