//===- EvaluationTest.cpp - dsc-run's evaluation on held-out data ---------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// tools/dsc-run/Evaluation: which validation window each evaluation reads,
// against GPT-NeoX's never-reset iterator and its resume formula; the
// options and plans refused; the log line's perplexity against exp.
//
//===----------------------------------------------------------------------===//

#include "Evaluation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

using namespace dsc;
using namespace dsc::run;

namespace {

// An uninterrupted run evaluates at every multiple of the interval and at
// the last step; NeoX's iterator hands each evaluation the next window.
TEST(Evaluation, WindowsFollowOneIterator) {
  for (int64_t interval : {1, 2, 3, 7}) {
    const int64_t steps = 20;
    int64_t evaluations = 0;
    for (int64_t n = 1; n <= steps; ++n) {
      if (n % interval == 0 || n == steps) {
        EXPECT_EQ(evaluationWindow(n, interval), evaluations++)
            << "interval " << interval << " iteration " << n;
      }
    }
  }
}

// NeoX after a resume at iteration R (one micro-batch a step) starts its
// validation iterator at (R / eval_interval) * eval_iters batches: the
// next evaluation's window is R / eval_interval.
TEST(Evaluation, WindowAfterResumeIsNeoXs) {
  for (int64_t interval : {1, 2, 5})
    for (int64_t resumed = 0; resumed < 30; ++resumed) {
      const int64_t next = (resumed / interval + 1) * interval;
      EXPECT_EQ(evaluationWindow(next, interval), resumed / interval)
          << "interval " << interval << " resumed at " << resumed;
    }
}

std::string refusal(const RunOptions &options, const rt::Plan &plan) {
  try {
    checkEvaluation(options, plan);
  } catch (const rt::Error &e) {
    return e.what();
  }
  return "";
}

rt::Plan planWithForward() {
  rt::Plan plan;
  plan.programs.push_back({"forward", {}});
  return plan;
}

TEST(Evaluation, RefusesByName) {
  RunOptions o;
  o.evalInterval = 2;
  EXPECT_NE(refusal(o, planWithForward()).find("--eval-interval"),
            std::string::npos);
  o.validData = "valid";
  EXPECT_EQ(refusal(o, planWithForward()), "");
  EXPECT_NE(refusal(o, rt::Plan()).find("forward program"), std::string::npos);
  rt::Plan pipelined = planWithForward();
  pipelined.stages.resize(2);
  EXPECT_NE(refusal(o, pipelined).find("pipeline"), std::string::npos);
  rt::Plan dropout = planWithForward();
  rt::Instruction drop;
  drop.opcode = rt::Opcode::Dropout;
  drop.floats = {0.1};
  dropout.programs[0].instructions.push_back(drop);
  EXPECT_NE(refusal(o, dropout).find("dropout"), std::string::npos);
  RunOptions only;
  only.evalOnly = true;
  only.validData = "valid";
  EXPECT_NE(refusal(only, planWithForward()).find("--load"), std::string::npos);
  RunOptions unused;
  unused.validData = "valid";
  EXPECT_NE(refusal(unused, planWithForward()).find("--valid-data"),
            std::string::npos);
}

TEST(Evaluation, PerplexityIsExpOfTheLoss) {
  const std::string line =
      formatEvaluationLog("validation", 10, std::log(250.0));
  EXPECT_NE(line.find(" validation loss at iteration 10 | lm loss value: "
                      "5.521461E+00 | lm loss PPL: 2.500000E+02 |"),
            std::string::npos)
      << line;
  EXPECT_EQ(formatEvaluationJson("test", 3, 0.0),
            "{\"iteration\": 3, \"eval\": \"test\", \"lm_loss\": 0, "
            "\"lm_loss_ppl\": 1}");
}

} // namespace
