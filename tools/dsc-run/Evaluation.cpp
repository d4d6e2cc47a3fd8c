//===- Evaluation.cpp - validation loss on held-out data ------------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// The forward program ("forward", lowered beside forward_backward from the
// same partitioned loss function) writes only activations and "eval_loss":
// parameters, gradients, optimizer state, the step counter and the loss
// scaler are not its outputs, and the data position is the caller's. Its
// collectives (tensor-parallel all-reduces, ZeRO-3 gathers) are issued by
// every rank alike, so each rank runs it for the same number of batches.
//
//===----------------------------------------------------------------------===//

#include "Evaluation.h"

#include "dsc/Runtime/Instructions.h"

#include <cmath>
#include <cstdio>
#include <vector>

using namespace dsc;
using namespace dsc::run;
using rt::Error;

void dsc::run::checkEvaluation(const RunOptions &options,
                               const rt::Plan &plan) {
  const bool wanted =
      options.evalInterval > 0 || options.evalOnly || !options.testData.empty();
  if (options.evalInterval > 0 && options.validData.empty())
    throw Error("--eval-interval (eval_interval) needs held-out data: "
                "--valid-data (valid_data_paths)");
  if (options.evalOnly && options.validData.empty() && options.testData.empty())
    throw Error("--eval-only needs held-out data: --valid-data "
                "(valid_data_paths) or --test-data (test_data_paths)");
  if (options.evalOnly && options.load.empty())
    throw Error("--eval-only needs the weights to evaluate: --load DIR");
  if (!options.validData.empty() && options.evalInterval <= 0 &&
      !options.evalOnly)
    throw Error("--valid-data (valid_data_paths) needs --eval-interval "
                "(eval_interval) or --eval-only: it would be read for "
                "nothing");
  if (!wanted)
    return;
  if (!plan.stages.empty())
    throw Error("evaluation on held-out data (--eval-interval, "
                "--eval-only) is not implemented for pipeline-parallel "
                "plans yet: their stages have no forward-only schedule");
  const rt::Program *forward = plan.findProgram("forward");
  if (!forward)
    throw Error("evaluation needs the plan's forward program, and this plan "
                "has none (recompile it with dsc-run or dsc-opt)");
  // GPT-NeoX evaluates in eval mode (no dropout); the forward program
  // would draw masks (hidden dropout, and attention dropout inside the
  // attention instruction), so a plan with dropout cannot evaluate as NeoX.
  for (const rt::Instruction &inst : forward->instructions) {
    const double p = inst.opcode == rt::Opcode::Dropout
                         ? rt::ops::Dropout::decode(inst).p
                     : inst.opcode == rt::Opcode::DropoutChunk
                         ? rt::ops::DropoutChunk::decode(inst).p
                     : inst.opcode == rt::Opcode::Attention
                         ? rt::ops::Attention::decode(inst).dropout
                     : inst.opcode == rt::Opcode::AttentionLse
                         ? rt::ops::AttentionLse::decode(inst).dropout
                         : 0.0;
    if (p > 0)
      throw Error("evaluation of a plan with dropout is not implemented: "
                  "its forward program applies dropout, which GPT-NeoX's "
                  "evaluation turns off (set hidden_dropout and "
                  "attention_dropout to 0)");
  }
}

int64_t dsc::run::evaluationWindow(int64_t iteration, int64_t evalInterval) {
  if (evalInterval <= 0 || iteration <= 0)
    return 0;
  return (iteration - 1) / evalInterval;
}

double dsc::run::evaluateLoss(rt::Executor &ex, const rt::BatchSampler &valid,
                              rt::Communicator *world, int64_t window,
                              int64_t evalIters, int64_t microBatches,
                              int64_t dpSize, int64_t dpRank) {
  const int64_t batch = valid.batchSize();
  const size_t tokens = size_t(batch * valid.seqLength());
  std::vector<int32_t> inputs(tokens), targets(tokens);
  const int64_t samplesPerBatch = batch * microBatches * dpSize;
  double sum = 0;
  for (int64_t i = 0; i < evalIters; ++i) {
    const int64_t first = (window * evalIters + i) * samplesPerBatch +
                          dpRank * microBatches * batch;
    for (int64_t m = 0; m < microBatches; ++m) {
      valid.sample(first + m * batch, batch, inputs.data(), targets.data());
      ex.setTokens(inputs.data(), inputs.size());
      ex.setTargets(targets.data(), targets.size());
      ex.runProgram("forward");
      sum += ex.read("eval_loss").at(0);
    }
  }
  double loss = sum / double(evalIters * microBatches);
  // Tensor-parallel ranks hold the same loss, data-parallel ranks the loss
  // of their own micro-batches (equal counts): the average is the mean.
  if (world && world->size() > 1)
    world->allReduce(&loss, 1, rt::DType::F64, rt::ReduceOp::Avg);
  return loss;
}

std::string dsc::run::formatEvaluationLog(const std::string &what,
                                          int64_t iteration, double loss) {
  char line[256];
  std::snprintf(line, sizeof(line),
                " %s loss at iteration %lld | lm loss value: %.6E | lm loss "
                "PPL: %.6E |",
                what.c_str(), (long long)iteration, loss, std::exp(loss));
  const std::string rule(std::string(line).size() + 1, '-');
  return rule + "\n" + line + "\n" + rule;
}

std::string dsc::run::formatEvaluationJson(const std::string &what,
                                           int64_t iteration, double loss) {
  char line[256];
  std::snprintf(line, sizeof(line),
                "{\"iteration\": %lld, \"eval\": \"%s\", \"lm_loss\": %.17g, "
                "\"lm_loss_ppl\": %.17g}",
                (long long)iteration, what.c_str(), loss, std::exp(loss));
  return line;
}
