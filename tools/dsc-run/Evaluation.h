//===- Evaluation.h - validation loss on held-out data ----------*- C++ -*-===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// GPT-NeoX's evaluate (megatron/training.py): eval_iters batches of the
// validation set through the plan's forward program, which computes the
// loss and nothing else (no gradients, no optimizer, no loss scaler), so the
// training that follows runs exactly as it would have without it.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_TOOLS_DSCRUN_EVALUATION_H
#define DSC_TOOLS_DSCRUN_EVALUATION_H

#include "RunOptions.h"

#include "dsc/Runtime/Data.h"
#include "dsc/Runtime/Executor.h"

#include <string>

namespace dsc::run {

/// Throws rt::Error naming the option when evaluation is asked for wrongly
/// (an interval without data, --eval-only without --load) or when `plan`
/// cannot evaluate (a pipeline, dropout).
void checkEvaluation(const RunOptions &options, const rt::Plan &plan);

/// Which evaluation an iteration's is: the evaluation at iteration N reads
/// the validation batches [k * eval_iters, (k + 1) * eval_iters) with
/// k = (N - 1) / eval_interval, as GPT-NeoX's validation iterator, which
/// continues through the set from one evaluation to the next (and after a
/// resume starts at (N / eval_interval) * eval_iters).
int64_t evaluationWindow(int64_t iteration, int64_t evalInterval);

/// The mean over `evalIters` batches of each batch's mean loss, averaged
/// over the data-parallel ranks (every rank calls it alike). A batch is a
/// training step's samples: `microBatches` micro-batches on each of
/// `dpSize` ranks, this rank taking those at `dpRank`.
double evaluateLoss(rt::Executor &ex, const rt::BatchSampler &valid,
                    rt::Communicator *world, int64_t window, int64_t evalIters,
                    int64_t microBatches, int64_t dpSize, int64_t dpRank);

/// Megatron's box: "validation loss at iteration N | lm loss value: ... |
/// lm loss PPL: ... |" between two rules of dashes.
std::string formatEvaluationLog(const std::string &what, int64_t iteration,
                                double loss);
/// {"iteration": N, "eval": "validation", "lm_loss": ..., "lm_loss_ppl": ...}
std::string formatEvaluationJson(const std::string &what, int64_t iteration,
                                 double loss);

} // namespace dsc::run

#endif // DSC_TOOLS_DSCRUN_EVALUATION_H
