//===- Metrics.cpp - dsc-run's log line and JSON-lines metrics ------------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// Formats follow Megatron-LM's training_log(): iteration {:8d}/{:8d},
// consumed samples {:12d}, ms {:.1f}, learning rate and loss {:.6E}, grad
// norm {:.3f}. Throughput gets three decimals: CPU runs are well under one
// TFLOP/s.
//
//===----------------------------------------------------------------------===//

#include "Metrics.h"

#include <cmath>
#include <cstdio>

using namespace dsc::run;

namespace {

std::string format(const char *fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  return format("%.17g", v);
}

} // namespace

std::string dsc::run::formatLogLine(const StepMetrics &m) {
  char head[96];
  std::snprintf(head, sizeof(head),
                " iteration %8lld/%8lld | consumed samples: %12lld |",
                (long long)m.iteration, (long long)m.iterations,
                (long long)m.consumedSamples);
  std::string line = head;
  if (m.consumedTokens >= 0) {
    char tokens[64];
    std::snprintf(tokens, sizeof(tokens), " consumed tokens: %12lld |",
                  (long long)m.consumedTokens);
    line += tokens;
  }
  line +=
      " elapsed time per iteration (ms): " + format("%.1f", m.msPerIteration) +
      " |";
  line += " throughput (TFLOP/s): " + format("%.3f", m.tflops) + " |";
  line += " learning rate: " + format("%.6E", m.learningRate) + " |";
  if (!std::isnan(m.beta1))
    line += " beta1: " + format("%.6f", m.beta1) + " |";
  if (m.curriculumSeqLength > 0)
    line += " curriculum seqlen: " + std::to_string(m.curriculumSeqLength) +
            " | tokens per step: " + std::to_string(m.tokensPerStep) + " |";
  line += " lm loss: " + format("%.6E", m.loss) + " |";
  if (!std::isnan(m.lossScale))
    line += " loss scale: " + format("%.1f", m.lossScale) + " |";
  if (!std::isnan(m.gradNorm))
    line += " grad norm: " + format("%.3f", m.gradNorm) + " |";
  if (!std::isnan(m.expertLoadImbalance))
    line += " expert load max/mean: " + format("%.3f", m.expertLoadImbalance) +
            " |";
  if (!std::isnan(m.forwardBackwardMs))
    line += " forward-backward (ms): " + format("%.1f", m.forwardBackwardMs) +
            " | optimizer (ms): " + format("%.1f", m.optimizerMs) + " |";
  if (m.skippedIterations >= 0) {
    char skipped[64];
    std::snprintf(skipped, sizeof(skipped),
                  " number of skipped iterations: %3lld |",
                  (long long)m.skippedIterations);
    line += skipped;
  }
  return line;
}

/// `, "transfers": {"device_to_host": {"bytes": N, "gb_per_s": x}, ...}`,
/// or nothing for a step without transfers.
static std::string transfersJson(const StepMetrics &m) {
  if (m.transfers.empty())
    return "";
  std::string out = ", \"transfers\": {";
  for (size_t i = 0; i < m.transfers.size(); ++i) {
    const StepMetrics::Transfer &t = m.transfers[i];
    out += (i ? ", \"" : "\"") + t.direction +
           "\": {\"bytes\": " + std::to_string(t.bytes) + ", \"gb_per_s\": " +
           jsonNumber(t.seconds > 0 ? double(t.bytes) / t.seconds / 1e9 : 0.0) +
           "}";
  }
  return out + "}";
}

std::string dsc::run::formatJsonLine(const StepMetrics &m) {
  return "{\"iteration\": " + std::to_string(m.iteration) +
         ", \"iterations\": " + std::to_string(m.iterations) +
         ", \"consumed_samples\": " + std::to_string(m.consumedSamples) +
         (m.consumedTokens >= 0
              ? ", \"consumed_tokens\": " + std::to_string(m.consumedTokens)
              : std::string()) +
         ", \"elapsed_time_per_iteration_ms\": " +
         jsonNumber(m.msPerIteration) +
         ", \"throughput_tflops\": " + jsonNumber(m.tflops) +
         ", \"learning_rate\": " + jsonNumber(m.learningRate) +
         (std::isnan(m.beta1) ? std::string()
                              : ", \"beta1\": " + jsonNumber(m.beta1)) +
         (m.curriculumSeqLength > 0
              ? ", \"curriculum_seqlen\": " +
                    std::to_string(m.curriculumSeqLength) +
                    ", \"tokens_per_step\": " + std::to_string(m.tokensPerStep)
              : std::string()) +
         ", \"lm_loss\": " + jsonNumber(m.loss) +
         ", \"grad_norm\": " + jsonNumber(m.gradNorm) +
         (std::isnan(m.expertLoadImbalance)
              ? std::string()
              : ", \"expert_load_imbalance\": " +
                    jsonNumber(m.expertLoadImbalance)) +
         (m.collectiveBytes >= 0
              ? ", \"collective_bytes\": " + std::to_string(m.collectiveBytes)
              : std::string()) +
         (m.skippedIterations >= 0
              ? ", \"loss_scale\": " + jsonNumber(m.lossScale) +
                    ", \"skipped_iterations\": " +
                    std::to_string(m.skippedIterations)
              : std::string()) +
         (std::isnan(m.checkpointMs)
              ? std::string()
              : ", \"checkpoint_ms\": " + jsonNumber(m.checkpointMs)) +
         (std::isnan(m.forwardBackwardMs)
              ? std::string()
              : ", \"forward_backward_ms\": " +
                    jsonNumber(m.forwardBackwardMs) +
                    ", \"optimizer_ms\": " + jsonNumber(m.optimizerMs)) +
         transfersJson(m) + "}";
}

std::string dsc::run::jsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out += char(c);
      }
    }
  }
  return out + "\"";
}
