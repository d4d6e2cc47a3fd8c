//===- dsc-generate.cpp - sample from a model with an inference plan ------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// GPT-NeoX's generate.py for a dsc model: the model graph (dsc-translate
// --import-hf, or any loss graph) is compiled into an inference plan
// (--dsc-compile-inference with --compile's options: tp, token-budget,
// max-sequences, block-size, max-context, kv-blocks), every rank of its mesh
// (threads) loads the checkpoint's slices it holds, and the Generator runs
// the prompts with continuous batching.
//
//   --text-gen-type input-file   prompts from --sample-input-file, one per
//                                line (text through --tokenizer, or token ids
//                                with --prompt-ids)
//   --text-gen-type unconditional --num-samples prompts of the end-of-text
//                                token alone (--eos-token)
//
// Sampling: --temperature, --top-k, --top-p (greedy when all are 0, as
// GPT-NeoX), --seed (each prompt's draws: seed + prompt index),
// --maximum-tokens, --stop-tokens. Output: one JSON object per line as
// GPT-NeoX's --sample-output-file ("context", "text", "length",
// "finish_reason", and "tokens").
//
//===----------------------------------------------------------------------===//

#include "CompileInference.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/Generator.h"
#include "dsc/Runtime/InstructionEvent.h"
#include "dsc/Runtime/Opcode.h"
#include "dsc/Runtime/ThreadCommunicator.h"
#include "dsc/Text/Tokenizer.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>

namespace cl = llvm::cl;

static cl::opt<std::string> modelFile(cl::Positional, cl::Required,
                                      cl::desc("<model graph .mlir>"));
static cl::opt<std::string>
    checkpoint("load", cl::init(""),
               cl::desc("The weights' checkpoint (without it: the plan's "
                        "random initializers, for benchmarks)"));
static cl::opt<std::string>
    compileOptions("compile", cl::init(""),
                   cl::desc("--dsc-compile-inference options (\"tp=2 "
                            "max-context=128 token-budget=64\")"));
static cl::opt<std::string>
    textGenType("text-gen-type", cl::init("input-file"),
                cl::desc("input-file or unconditional (GPT-NeoX's; "
                         "interactive is dsc-serve's)"));
static cl::opt<std::string>
    inputFile("sample-input-file", cl::init(""),
              cl::desc("Prompts, one per line (input-file)"));
static cl::opt<std::string>
    outputFile("sample-output-file", cl::init("-"),
               cl::desc("JSON lines out (default: standard output)"));
static cl::opt<bool>
    promptIds("prompt-ids",
              cl::desc("The input file's lines are token ids, not text"));
static cl::opt<std::string>
    tokenizerFile("tokenizer", cl::init(""),
                  cl::desc("The model's tokenizer.json (text in and out)"));
static cl::opt<int64_t> maximumTokens("maximum-tokens", cl::init(64),
                                      cl::desc("New tokens per prompt"));
static cl::opt<double> temperature("temperature", cl::init(0.0),
                                   cl::desc("0 with top-k and top-p 0: "
                                            "greedy"));
static cl::opt<int64_t> topK("top-k", cl::init(0), cl::desc("0: off"));
static cl::opt<double> topP("top-p", cl::init(0.0), cl::desc("0: off"));
static cl::opt<uint64_t> seed("seed", cl::init(1234),
                              cl::desc("Draws of prompt i: seed + i"));
static cl::opt<int64_t> numSamples("num-samples", cl::init(1),
                                   cl::desc("unconditional: how many"));
static cl::opt<int32_t> eosToken("eos-token", cl::init(-1),
                                 cl::desc("The end-of-text token id "
                                          "(unconditional's prompt; a stop "
                                          "token)"));
static cl::list<int32_t> stopTokens("stop-tokens", cl::CommaSeparated,
                                    cl::desc("Token ids that end a sample"));
static cl::opt<bool> printOpTimes(
    "print-op-times",
    cl::desc("Print rank 0's time per opcode in the decode program (the "
             "benchmark's breakdown)"));
static cl::opt<bool> printStats("print-stats",
                                cl::desc("Print the cache and schedule "
                                         "counters to stderr"));

namespace {

[[noreturn]] void fail(const std::string &why) {
  llvm::errs() << "dsc-generate: error: " << why << "\n";
  std::exit(1);
}

std::vector<int32_t> parseIds(llvm::StringRef line, size_t lineNumber) {
  std::vector<int32_t> ids;
  llvm::SmallVector<llvm::StringRef> words;
  line.split(words, ' ', -1, false);
  for (llvm::StringRef w : words) {
    int64_t id;
    if (w.trim().getAsInteger(10, id) || id < 0 || id > INT32_MAX)
      fail("line " + std::to_string(lineNumber) + " of '" + inputFile +
           "': '" + w.str() + "' is not a token id");
    ids.push_back(int32_t(id));
  }
  return ids;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "dsc inference: generate text\n");

  std::unique_ptr<::dsc::text::Tokenizer> tokenizer;
  if (!tokenizerFile.empty()) {
    auto loaded = ::dsc::text::Tokenizer::fromFile(tokenizerFile);
    if (!loaded)
      fail(llvm::toString(loaded.takeError()));
    tokenizer = std::move(*loaded);
  }

  // The prompts.
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> contexts;
  if (textGenType == "input-file") {
    if (inputFile.empty())
      fail("--text-gen-type input-file needs --sample-input-file");
    auto buffer = llvm::MemoryBuffer::getFile(inputFile);
    if (!buffer)
      fail("cannot read '" + inputFile + "': " + buffer.getError().message());
    llvm::SmallVector<llvm::StringRef> lines;
    (*buffer)->getBuffer().split(lines, '\n', -1, false);
    for (auto [n, line] : llvm::enumerate(lines)) {
      if (promptIds) {
        prompts.push_back(parseIds(line, n + 1));
      } else {
        if (!tokenizer)
          fail("text prompts need --tokenizer (or --prompt-ids)");
        auto ids = tokenizer->encode(line, /*addSpecialTokens=*/true);
        if (!ids)
          fail(llvm::toString(ids.takeError()));
        prompts.emplace_back(ids->begin(), ids->end());
      }
      contexts.push_back(line.str());
    }
  } else if (textGenType == "unconditional") {
    if (eosToken < 0)
      fail("--text-gen-type unconditional needs --eos-token (its prompt)");
    for (int64_t i = 0; i < numSamples; ++i) {
      prompts.push_back({eosToken});
      contexts.push_back("");
    }
  } else if (textGenType == "interactive") {
    fail("--text-gen-type interactive is not supported by dsc-generate; "
         "use input-file or unconditional");
  } else {
    fail("--text-gen-type must be input-file or unconditional, not '" +
         textGenType + "'");
  }

  // The plan.
  std::optional<::dsc::rt::Plan> compiled =
      ::dsc::tools::compileInference(modelFile, compileOptions, "dsc-generate");
  if (!compiled)
    return 1;
  ::dsc::rt::Plan plan = std::move(*compiled);
  const int64_t ranks = std::max<int64_t>(1, ::dsc::rt::meshRanks(plan.mesh));

  std::vector<int32_t> stops(stopTokens.begin(), stopTokens.end());
  if (eosToken >= 0)
    stops.push_back(eosToken);
  std::map<int64_t, ::dsc::rt::GenerationResult> results;
  std::map<std::string, double> opTimes;
  uint64_t planned = 0, allocated = 0;
  ::dsc::rt::GeneratorStats stats;
  std::string failure;
  std::mutex mutex;
  try {
    ::dsc::rt::runRanks(int(ranks), [&](::dsc::rt::Communicator &comm) {
      ::dsc::rt::Executor executor(plan, /*seed=*/1,
                                   ranks > 1 ? &comm : nullptr);
      if (!checkpoint.empty())
        executor.loadCheckpoint(checkpoint);
      if (printOpTimes && comm.rank() == 0)
        executor.setInstructionHook([&](const ::dsc::rt::InstructionEvent &e) {
          if (e.program->name == "decode")
            opTimes[::dsc::rt::opcodeName(e.instruction->opcode)] +=
                e.durationUs;
        });
      ::dsc::rt::Generator generator(executor);
      if (comm.rank() == 0)
        for (uint32_t a = 0; a < plan.arenas.size(); ++a) {
          planned += plan.arenas[a].bytes;
          allocated += executor.allocatedBytes(a);
        }
      for (size_t i = 0; i < prompts.size(); ++i) {
        ::dsc::rt::GenerationRequest request;
        request.prompt = prompts[i];
        request.maxNewTokens = maximumTokens;
        request.sampling = {temperature, topK, topP};
        request.seed = seed + i;
        request.stopTokens = stops;
        generator.submit(std::move(request));
      }
      generator.runToCompletion();
      if (comm.rank() == 0) {
        std::lock_guard<std::mutex> lock(mutex);
        results = generator.takeFinished();
        stats = generator.stats();
      }
    });
  } catch (const ::dsc::rt::Error &e) {
    fail(e.what());
  }

  std::error_code ec;
  llvm::raw_fd_ostream out(outputFile, ec);
  if (ec)
    fail("cannot write '" + outputFile + "': " + ec.message());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const ::dsc::rt::GenerationResult &r = results[int64_t(i)];
    llvm::json::Array tokens;
    for (int32_t t : r.tokens)
      tokens.push_back(int64_t(t));
    llvm::json::Object line{{"context", contexts[i]},
                            {"length", int64_t(r.tokens.size())},
                            {"finish_reason", r.finishReason},
                            {"tokens", std::move(tokens)}};
    if (tokenizer) {
      std::vector<uint32_t> ids(r.tokens.begin(), r.tokens.end());
      line["text"] = tokenizer->decode(ids, /*skipSpecialTokens=*/false);
    }
    out << llvm::json::Value(std::move(line)) << "\n";
  }
  if (printOpTimes) {
    std::vector<std::pair<double, std::string>> sorted;
    double total = 0;
    for (const auto &[name, us] : opTimes) {
      sorted.push_back({us, name});
      total += us;
    }
    std::sort(sorted.rbegin(), sorted.rend());
    for (const auto &[us, name] : sorted)
      llvm::errs() << llvm::format("dsc-generate: decode %-22s %9.1f ms %5.1f%%\n",
                                   name.c_str(), us / 1e3,
                                   total > 0 ? 100 * us / total : 0.0);
  }
  if (printStats) {
    uint64_t weightBytes = 0;
    for (const ::dsc::rt::Buffer &b : plan.buffers)
      if (b.role == ::dsc::rt::BufferRole::Parameter)
        weightBytes += b.bytes;
    uint64_t cacheBytes = 0;
    for (const ::dsc::rt::Buffer &b : plan.buffers)
      if (b.role == ::dsc::rt::BufferRole::KvCache)
        cacheBytes += b.bytes;
    llvm::errs() << "dsc-generate: rank 0's memory: planned " << planned
                 << " bytes (KV cache " << cacheBytes << "), allocated "
                 << allocated << "\n";
    llvm::errs() << "dsc-generate: " << prompts.size() << " prompts, "
                 << stats.forwards << " forwards (" << stats.prefills
                 << " prefill, " << stats.decodes << " decode), peak "
                 << stats.peakBlocksInUse << " KV blocks in use, worst waste "
                 << stats.worstWasteBlocks << " block(s) per sequence\n";
    llvm::errs() << llvm::format(
        "dsc-generate: prefill %.3f s (%lld tokens sampled), decode %.3f s "
        "for %lld tokens (%.1f tokens/s, %.2f ms per forward); weights %llu "
        "bytes per rank\n",
        stats.prefillSeconds, (long long)stats.prefillTokens,
        stats.decodeSeconds, (long long)stats.decodeTokens,
        stats.decodeSeconds > 0 ? stats.decodeTokens / stats.decodeSeconds
                                : 0.0,
        stats.decodes ? 1e3 * stats.decodeSeconds / stats.decodes : 0.0,
        (unsigned long long)weightBytes);
  }
  return 0;
}
