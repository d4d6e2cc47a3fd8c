//===- dsc-serve.cpp - OpenAI-compatible completions over a plan ----------===//
//
// Part of the dsc project: a declarative graph compiler for parallel training.
//
//===----------------------------------------------------------------------===//
//
// An HTTP server (cpp-httplib) for a model compiled into an inference plan:
//
//   POST /v1/completions   OpenAI's completions API: prompt (text through
//                          --tokenizer, or token ids), max_tokens,
//                          temperature, top_p, top_k, seed, stop_token_ids,
//                          stream (server-sent events, "data: [DONE]")
//   GET  /health           {"status": "ok"} (503 "draining" at shutdown)
//   GET  /metrics          requests, time to first token, tokens/s, KV
//                          blocks in use, the cache's worst waste
//
// One engine loop (a thread per rank of the plan's mesh, each with its own
// executor and Generator fed the same requests in the same order) runs the
// plan's forwards with continuous batching over the paged KV cache; HTTP
// threads hand it requests and wait for their tokens. A request that can
// never fit gets 400 naming the numbers; more than --max-waiting waiting
// gets 429; a client that disconnects mid-stream has its sequence cancelled
// (its blocks freed). SIGTERM/SIGINT: new requests get 503, in-flight ones
// finish (or, after --drain-seconds, end with finish_reason "cancelled"),
// then the server exits 0.
//
//===----------------------------------------------------------------------===//

#include "CompileInference.h"
#include "dsc/Runtime/Error.h"
#include "dsc/Runtime/Executor.h"
#include "dsc/Runtime/Generator.h"
#include "dsc/Runtime/ThreadCommunicator.h"
#include "dsc/Text/Tokenizer.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <map>
#include <mutex>
#include <thread>

namespace cl = llvm::cl;
namespace json = llvm::json;
using namespace ::dsc::rt;

static cl::opt<std::string> modelFile(cl::Positional, cl::Required,
                                      cl::desc("<model graph .mlir>"));
static cl::opt<std::string>
    checkpoint("load", cl::init(""),
               cl::desc("The weights' checkpoint (without it: the plan's "
                        "random initializers)"));
static cl::opt<std::string>
    compileOptions("compile", cl::init(""),
                   cl::desc("--dsc-compile-inference options"));
static cl::opt<std::string> host("host", cl::init("127.0.0.1"),
                                 cl::desc("Address to listen on"));
static cl::opt<int> port("port", cl::init(8000),
                         cl::desc("Port (0: any free one, printed)"));
static cl::opt<std::string>
    tokenizerFile("tokenizer", cl::init(""),
                  cl::desc("The model's tokenizer.json (text prompts)"));
static cl::opt<std::string>
    modelName("model-name", cl::init(""),
              cl::desc("The model's name in the API (default: the graph "
                       "file's stem)"));
static cl::opt<int64_t>
    maxWaiting("max-waiting", cl::init(64),
               cl::desc("Requests waiting for a sequence slot beyond which "
                        "new ones get 429"));
static cl::opt<double>
    drainSeconds("drain-seconds", cl::init(30),
                 cl::desc("At SIGTERM, how long in-flight requests may run "
                          "before they are cancelled"));

namespace {

std::atomic<bool> signalled{false};
void onSignal(int) { signalled = true; }

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// A barrier the engine's rank threads meet at each step; abort() wakes
/// every waiter with an Error (a rank failed), so none hangs.
class StepBarrier {
public:
  explicit StepBarrier(int n) : count(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m);
    if (aborted)
      throw Error("another rank failed");
    const int64_t phase = generation;
    if (++arrived == count) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(lock, [&] { return generation != phase || aborted; });
    if (aborted)
      throw Error("another rank failed");
  }
  void abort() {
    std::lock_guard<std::mutex> lock(m);
    aborted = true;
    cv.notify_all();
  }

private:
  std::mutex m;
  std::condition_variable cv;
  int count, arrived = 0;
  int64_t generation = 0;
  bool aborted = false;
};

/// What the HTTP threads and the engine share, under `m`.
struct Engine {
  struct Ticket {
    std::vector<int32_t> tokens;
    std::string finish;
    bool done = false;
    double submitted = 0, firstToken = -1, finished = 0;
    int64_t promptTokens = 0;
  };
  std::mutex m;
  std::condition_variable wake;     // the engine: work arrived
  std::condition_variable progress; // the HTTP threads: tokens arrived
  std::vector<std::pair<int64_t, GenerationRequest>> incoming;
  std::vector<int64_t> cancels;
  std::map<int64_t, Ticket> tickets;
  int64_t nextTicket = 0, inFlight = 0, waiting = 0;
  bool draining = false, stopped = false;
  std::string fatal;
  // Metrics.
  int64_t requests = 0, finished = 0, cancelled = 0, refused = 0, generated = 0;
  std::vector<double> ttft; // seconds, per finished request
  double busySeconds = 0;
  GeneratorStats stats;
  int64_t blocksTotal = 0, running = 0;
  // Limits (read-only once the engine is up), for checking requests.
  const Generator *limits = nullptr;
  std::condition_variable ready;
};

/// The step's shared batch (rank 0 writes it between the barriers).
struct StepBatch {
  std::vector<std::pair<int64_t, GenerationRequest>> submit;
  std::vector<int64_t> cancel;
  bool exit = false;
};

void runEngine(Engine &engine, const Plan &plan) {
  const int ranks = int(std::max<int64_t>(1, meshRanks(plan.mesh)));
  StepBarrier barrier(ranks);
  StepBatch batch;
  try {
    runRanks(ranks, [&](Communicator &comm) {
      try {
        Executor executor(plan, /*seed=*/1, ranks > 1 ? &comm : nullptr);
        if (!checkpoint.empty())
          executor.loadCheckpoint(checkpoint);
        Generator generator(executor);
        const bool lead = comm.rank() == 0;
        if (lead) {
          std::lock_guard<std::mutex> lock(engine.m);
          engine.limits = &generator;
          engine.blocksTotal = generator.blocks();
          engine.ready.notify_all();
        }
        while (true) {
          if (lead) {
            std::unique_lock<std::mutex> lock(engine.m);
            engine.wake.wait(lock, [&] {
              return !engine.incoming.empty() || !engine.cancels.empty() ||
                     !generator.idle() || engine.draining;
            });
            batch.submit = std::move(engine.incoming);
            engine.incoming.clear();
            batch.cancel = std::move(engine.cancels);
            engine.cancels.clear();
            batch.exit =
                engine.draining && generator.idle() && batch.submit.empty();
          }
          barrier.wait();
          if (batch.exit)
            break;
          for (auto &[ticket, request] : batch.submit) {
            const int64_t id = generator.submit(request);
            if (id != ticket)
              throw Error("the engine's request ids diverged");
          }
          for (int64_t ticket : batch.cancel)
            generator.cancel(ticket);
          const double start = now();
          generator.step();
          if (lead) {
            std::lock_guard<std::mutex> lock(engine.m);
            engine.busySeconds += now() - start;
            const double t = now();
            for (auto &[ticket, state] : engine.tickets) {
              if (state.done)
                continue;
              std::vector<int32_t> so = generator.generatedSoFar(ticket);
              if (!so.empty() && state.firstToken < 0)
                state.firstToken = t;
              state.tokens = std::move(so);
            }
            for (auto &[ticket, result] : generator.takeFinished()) {
              auto it = engine.tickets.find(ticket);
              if (it == engine.tickets.end())
                continue;
              Engine::Ticket &state = it->second;
              state.tokens = std::move(result.tokens);
              state.finish = result.finishReason;
              state.done = true;
              state.finished = t;
              --engine.inFlight;
              ++(state.finish == "cancelled" ? engine.cancelled
                                             : engine.finished);
              engine.generated += int64_t(state.tokens.size());
              if (state.firstToken >= 0)
                engine.ttft.push_back(state.firstToken - state.submitted);
            }
            engine.stats = generator.stats();
            engine.waiting = generator.waitingCount();
            engine.running = generator.runningCount();
            engine.progress.notify_all();
          }
          barrier.wait();
        }
      } catch (...) {
        barrier.abort();
        throw;
      }
    });
  } catch (const Error &e) {
    std::lock_guard<std::mutex> lock(engine.m);
    engine.fatal = e.what();
  }
  std::lock_guard<std::mutex> lock(engine.m);
  engine.stopped = true;
  // Whatever is still in flight fails explicitly.
  for (auto &[ticket, state] : engine.tickets)
    if (!state.done) {
      state.done = true;
      state.finish = "error";
    }
  engine.ready.notify_all();
  engine.progress.notify_all();
}

json::Value errorBody(const std::string &message, const std::string &type,
                      const std::string &param = "") {
  json::Object error{{"message", message}, {"type", type}};
  error["param"] = param.empty() ? json::Value(nullptr) : json::Value(param);
  error["code"] = nullptr;
  return json::Object{{"error", std::move(error)}};
}

void replyError(httplib::Response &res, int status, const std::string &message,
                const std::string &type, const std::string &param = "") {
  res.status = status;
  std::string body;
  llvm::raw_string_ostream os(body);
  os << errorBody(message, type, param);
  res.set_content(body, "application/json");
}

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[size_t(std::min<double>(double(v.size() - 1),
                                   std::floor(p * double(v.size()))))];
}

/// A parsed completion request, or the 400 to answer.
struct Parsed {
  GenerationRequest request;
  bool stream = false, seedGiven = false;
  std::string error, param;
};

Parsed parseRequest(const std::string &body,
                    const ::dsc::text::Tokenizer *tokenizer,
                    const std::string &name) {
  Parsed p;
  auto fail = [&](const std::string &why, const std::string &param = "") {
    p.error = why;
    p.param = param;
    return p;
  };
  llvm::Expected<json::Value> value = json::parse(body);
  if (!value)
    return fail("the body is not valid JSON: " +
                llvm::toString(value.takeError()));
  const json::Object *o = value->getAsObject();
  if (!o)
    return fail("the body must be a JSON object");
  // OpenAI's fields dsc-serve takes only at their defaults: anything else
  // would be silently different.
  auto defaultValued = [](llvm::StringRef key, const json::Value &v) {
    if (v.kind() == json::Value::Null)
      return true;
    if (key == "echo")
      return v.getAsBoolean() == false;
    if (key == "presence_penalty" || key == "frequency_penalty")
      return v.getAsNumber() == 0.0;
    if (key == "n" || key == "best_of")
      return v.getAsInteger() == 1;
    if (key == "logit_bias")
      return v.getAsObject() && v.getAsObject()->empty();
    if (key == "stop")
      return v.getAsArray() && v.getAsArray()->empty();
    return false;
  };
  static const llvm::StringRef taken[] = {
      "model", "prompt", "max_tokens", "temperature",   "top_p",
      "top_k", "stream", "seed",       "stop_token_ids"};
  static const llvm::StringRef atDefault[] = {
      "echo", "presence_penalty", "frequency_penalty",
      "n",    "best_of",          "logit_bias",
      "stop", "logprobs",         "suffix",
      "user"};
  for (const auto &[key, v] : *o) {
    llvm::StringRef k = key;
    if (llvm::is_contained(taken, k))
      continue;
    if (llvm::is_contained(atDefault, k)) {
      if (!defaultValued(k, v))
        return fail("'" + k.str() + "' is not supported by dsc-serve" +
                        (k == "stop" ? " (use stop_token_ids)" : "") +
                        "; leave it out or at its default",
                    k.str());
      continue;
    }
    return fail("unknown field '" + k.str() + "'", k.str());
  }
  if (const json::Value *m = o->get("model")) {
    std::optional<llvm::StringRef> s = m->getAsString();
    if (!s || *s != name)
      return fail("model must be '" + name + "'", "model");
  }
  const json::Value *prompt = o->get("prompt");
  if (!prompt)
    return fail("'prompt' is required", "prompt");
  if (std::optional<llvm::StringRef> text = prompt->getAsString()) {
    if (!tokenizer)
      return fail("text prompts need the server's --tokenizer; send token "
                  "ids",
                  "prompt");
    llvm::Expected<std::vector<uint32_t>> ids =
        tokenizer->encode(*text, /*addSpecialTokens=*/true);
    if (!ids)
      return fail(llvm::toString(ids.takeError()), "prompt");
    p.request.prompt.assign(ids->begin(), ids->end());
  } else if (const json::Array *ids = prompt->getAsArray()) {
    for (const json::Value &id : *ids) {
      std::optional<int64_t> t = id.getAsInteger();
      if (!t)
        return fail("'prompt' must be a string or an array of token ids "
                    "(one prompt per request)",
                    "prompt");
      if (*t < 0 || *t > INT32_MAX)
        return fail("prompt token " + std::to_string(*t) + " is not a token id",
                    "prompt");
      p.request.prompt.push_back(int32_t(*t));
    }
  } else {
    return fail("'prompt' must be a string or an array of token ids", "prompt");
  }
  auto number = [&](llvm::StringRef key, double fallback,
                    std::optional<double> &out) {
    const json::Value *v = o->get(key);
    if (!v || v->kind() == json::Value::Null) {
      out = fallback;
      return true;
    }
    out = v->getAsNumber();
    return out.has_value();
  };
  std::optional<double> maxTokens, temperature, topP, topK, seed;
  if (!number("max_tokens", 16, maxTokens) || *maxTokens < 1 ||
      *maxTokens != std::floor(*maxTokens))
    return fail("'max_tokens' must be a positive integer", "max_tokens");
  if (!number("temperature", 1.0, temperature) || *temperature < 0 ||
      *temperature > 2)
    return fail("'temperature' must be in [0, 2]", "temperature");
  if (!number("top_p", 1.0, topP) || *topP <= 0 || *topP > 1)
    return fail("'top_p' must be in (0, 1]", "top_p");
  if (!number("top_k", 0, topK) || *topK < 0 || *topK != std::floor(*topK))
    return fail("'top_k' must be an integer >= 0", "top_k");
  if (!number("seed", 0, seed) || *seed < 0 || *seed != std::floor(*seed))
    return fail("'seed' must be an integer >= 0", "seed");
  p.seedGiven = o->get("seed") && o->get("seed")->kind() != json::Value::Null;
  p.request.maxNewTokens = int64_t(*maxTokens);
  // OpenAI's temperature 0 is greedy (GPT-NeoX's all-zero settings).
  if (*temperature == 0)
    p.request.sampling = {0, 0, 0};
  else
    p.request.sampling = {*temperature, int64_t(*topK),
                          *topP >= 1 ? 0.0 : *topP};
  p.request.seed = uint64_t(*seed);
  if (const json::Value *stops = o->get("stop_token_ids")) {
    const json::Array *a = stops->getAsArray();
    if (!a)
      return fail("'stop_token_ids' must be an array of token ids",
                  "stop_token_ids");
    for (const json::Value &id : *a) {
      std::optional<int64_t> t = id.getAsInteger();
      if (!t)
        return fail("'stop_token_ids' must be an array of token ids",
                    "stop_token_ids");
      p.request.stopTokens.push_back(int32_t(*t));
    }
  }
  if (const json::Value *s = o->get("stream")) {
    std::optional<bool> b = s->getAsBoolean();
    if (!b)
      return fail("'stream' must be true or false", "stream");
    p.stream = *b;
  }
  return p;
}

std::string textOf(const ::dsc::text::Tokenizer *tokenizer,
                   const std::vector<int32_t> &tokens) {
  if (!tokenizer)
    return "";
  std::vector<uint32_t> ids(tokens.begin(), tokens.end());
  return tokenizer->decode(ids, /*skipSpecialTokens=*/false);
}

json::Value tokenArray(const std::vector<int32_t> &tokens, size_t from = 0) {
  json::Array a;
  for (size_t i = from; i < tokens.size(); ++i)
    a.push_back(int64_t(tokens[i]));
  return a;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "dsc inference: an OpenAI-compatible server\n");
  std::unique_ptr<::dsc::text::Tokenizer> tokenizer;
  if (!tokenizerFile.empty()) {
    auto loaded = ::dsc::text::Tokenizer::fromFile(tokenizerFile);
    if (!loaded) {
      llvm::errs() << "dsc-serve: error: " << llvm::toString(loaded.takeError())
                   << "\n";
      return 1;
    }
    tokenizer = std::move(*loaded);
  }
  const std::string name = modelName.empty()
                               ? llvm::sys::path::stem(modelFile).str()
                               : modelName.getValue();
  std::optional<Plan> plan =
      ::dsc::tools::compileInference(modelFile, compileOptions, "dsc-serve");
  if (!plan)
    return 1;

  Engine engine;
  std::thread engineThread([&] { runEngine(engine, *plan); });
  {
    std::unique_lock<std::mutex> lock(engine.m);
    engine.ready.wait(lock, [&] { return engine.limits || engine.stopped; });
    if (!engine.limits) {
      lock.unlock();
      engineThread.join();
      llvm::errs() << "dsc-serve: error: " << engine.fatal << "\n";
      return 1;
    }
  }

  httplib::Server server;
  server.Get("/health", [&](const httplib::Request &, httplib::Response &res) {
    std::lock_guard<std::mutex> lock(engine.m);
    const bool ok = !engine.draining && !engine.stopped;
    res.status = ok ? 200 : 503;
    res.set_content(ok ? R"({"status":"ok"})" : R"({"status":"draining"})",
                    "application/json");
  });
  server.Get("/metrics", [&](const httplib::Request &, httplib::Response &res) {
    std::lock_guard<std::mutex> lock(engine.m);
    json::Object m{
        {"requests", engine.requests},
        {"requests_finished", engine.finished},
        {"requests_cancelled", engine.cancelled},
        {"requests_refused", engine.refused},
        {"requests_waiting", engine.waiting},
        {"requests_running", engine.running},
        {"tokens_generated", engine.generated},
        {"time_to_first_token_p50_ms", 1e3 * percentile(engine.ttft, 0.5)},
        {"time_to_first_token_p99_ms", 1e3 * percentile(engine.ttft, 0.99)},
        {"tokens_per_second",
         engine.busySeconds > 0 ? double(engine.generated) / engine.busySeconds
                                : 0.0},
        {"forwards", engine.stats.forwards},
        {"kv_blocks_total", engine.blocksTotal},
        {"kv_blocks_in_use", engine.stats.blocksInUse},
        {"kv_blocks_peak", engine.stats.peakBlocksInUse},
        {"kv_worst_waste_blocks_per_sequence", engine.stats.worstWasteBlocks}};
    std::string body;
    llvm::raw_string_ostream os(body);
    os << json::Value(std::move(m));
    res.set_content(body, "application/json");
  });
  server.Post("/v1/completions", [&](const httplib::Request &req,
                                     httplib::Response &res) {
    Parsed parsed = parseRequest(req.body, tokenizer.get(), name);
    if (parsed.error.empty())
      parsed.error = engine.limits->refusal(parsed.request);
    std::unique_lock<std::mutex> lock(engine.m);
    if (!parsed.error.empty()) {
      ++engine.refused;
      lock.unlock();
      return replyError(res, 400, parsed.error, "invalid_request_error",
                        parsed.param);
    }
    if (engine.draining || engine.stopped) {
      ++engine.refused;
      lock.unlock();
      return replyError(res, 503, "the server is shutting down",
                        "server_error");
    }
    if (engine.waiting + int64_t(engine.incoming.size()) >= maxWaiting) {
      ++engine.refused;
      lock.unlock();
      res.set_header("Retry-After", "1");
      return replyError(res, 429,
                        "too many requests waiting (" +
                            std::to_string(maxWaiting.getValue()) +
                            "); retry later",
                        "rate_limit_error");
    }
    // The ticket is the engine's request id: tickets go to the engine in
    // order, and every rank's generator numbers its submissions alike.
    const int64_t ticket = engine.nextTicket++;
    // Without a seed, the request's id: a run's draws are reproducible.
    if (!parsed.seedGiven)
      parsed.request.seed = uint64_t(ticket);
    Engine::Ticket &state = engine.tickets[ticket];
    state.submitted = now();
    state.promptTokens = int64_t(parsed.request.prompt.size());
    engine.incoming.emplace_back(ticket, std::move(parsed.request));
    ++engine.requests;
    ++engine.inFlight;
    engine.wake.notify_all();
    const std::string id = "cmpl-" + std::to_string(ticket);
    const int64_t created = int64_t(std::time(nullptr));
    if (!parsed.stream) {
      engine.progress.wait(lock, [&] { return engine.tickets[ticket].done; });
      Engine::Ticket done = std::move(engine.tickets[ticket]);
      engine.tickets.erase(ticket);
      lock.unlock();
      if (done.finish == "error")
        return replyError(res, 500, "the engine failed: " + engine.fatal,
                          "server_error");
      const int64_t n = int64_t(done.tokens.size());
      json::Object body{
          {"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", name},
          {"choices", json::Array{json::Object{
                          {"index", 0},
                          {"text", textOf(tokenizer.get(), done.tokens)},
                          {"token_ids", tokenArray(done.tokens)},
                          {"logprobs", nullptr},
                          {"finish_reason", done.finish}}}},
          {"usage", json::Object{{"prompt_tokens", done.promptTokens},
                                 {"completion_tokens", n},
                                 {"total_tokens", done.promptTokens + n}}}};
      std::string text;
      llvm::raw_string_ostream os(text);
      os << json::Value(std::move(body));
      res.set_content(text, "application/json");
      return;
    }
    lock.unlock();
    // Server-sent events: a chunk per batch of new tokens, the finish
    // reason on the last, then [DONE].
    auto sent = std::make_shared<size_t>(0);
    auto textSent = std::make_shared<std::string>();
    res.set_chunked_content_provider(
        "text/event-stream",
        [&, ticket, id, created, sent, textSent](size_t,
                                                 httplib::DataSink &sink) {
          std::unique_lock<std::mutex> l(engine.m);
          engine.progress.wait(l, [&] {
            const Engine::Ticket &t = engine.tickets[ticket];
            return t.done || t.tokens.size() > *sent;
          });
          Engine::Ticket &t = engine.tickets[ticket];
          std::vector<int32_t> tokens = t.tokens;
          const bool done = t.done;
          const std::string finish = t.finish;
          if (done)
            engine.tickets.erase(ticket);
          l.unlock();
          std::string all = textOf(tokenizer.get(), tokens);
          std::string delta = all.compare(0, textSent->size(), *textSent) == 0
                                  ? all.substr(textSent->size())
                                  : all;
          json::Object choice{{"index", 0},
                              {"text", delta},
                              {"token_ids", tokenArray(tokens, *sent)},
                              {"logprobs", nullptr}};
          choice["finish_reason"] =
              done ? json::Value(finish) : json::Value(nullptr);
          std::string event;
          llvm::raw_string_ostream os(event);
          os << "data: "
             << json::Value(
                    json::Object{{"id", id},
                                 {"object", "text_completion"},
                                 {"created", created},
                                 {"model", name},
                                 {"choices", json::Array{std::move(choice)}}})
             << "\n\n";
          if (done)
            os << "data: [DONE]\n\n";
          *sent = tokens.size();
          *textSent = all;
          if (!sink.write(event.data(), event.size())) {
            // The client left: free its sequence.
            std::lock_guard<std::mutex> g(engine.m);
            if (!done) {
              engine.cancels.push_back(ticket);
              engine.wake.notify_all();
            }
            return false;
          }
          if (done)
            sink.done();
          return true;
        },
        [&, ticket](bool success) {
          if (success)
            return;
          // Released early (the client disconnected between events).
          std::lock_guard<std::mutex> g(engine.m);
          auto it = engine.tickets.find(ticket);
          if (it != engine.tickets.end() && !it->second.done) {
            engine.cancels.push_back(ticket);
            engine.wake.notify_all();
          }
        });
  });

  std::signal(SIGTERM, onSignal);
  std::signal(SIGINT, onSignal);
  int bound = port;
  if (port == 0)
    bound = server.bind_to_any_port(host);
  else if (!server.bind_to_port(host, port))
    bound = -1;
  if (bound < 0) {
    llvm::errs() << "dsc-serve: error: cannot listen on " << host << ":"
                 << port.getValue() << "\n";
    {
      std::lock_guard<std::mutex> lock(engine.m);
      engine.draining = true;
      engine.wake.notify_all();
    }
    engineThread.join();
    return 1;
  }
  llvm::errs() << "dsc-serve: " << name << " on http://" << host << ":" << bound
               << " (" << engine.limits->maxSequences() << " sequences, "
               << engine.limits->tokenBudget() << "-token prefills, "
               << engine.limits->blocks() << " KV blocks of "
               << engine.limits->blockSize() << ", context "
               << engine.limits->maxContext() << ")\n";
  std::thread watcher([&] {
    while (!signalled) {
      {
        std::lock_guard<std::mutex> lock(engine.m);
        if (engine.stopped)
          break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const double deadline = now() + drainSeconds;
    {
      std::lock_guard<std::mutex> lock(engine.m);
      engine.draining = true;
      engine.wake.notify_all();
    }
    // In-flight requests finish, or are cancelled at the deadline.
    bool cancelled = false;
    while (true) {
      std::unique_lock<std::mutex> lock(engine.m);
      if (engine.stopped || engine.inFlight == 0)
        break;
      if (!cancelled && now() > deadline) {
        for (auto &[ticket, state] : engine.tickets)
          if (!state.done)
            engine.cancels.push_back(ticket);
        engine.wake.notify_all();
        cancelled = true;
      }
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // Let the last responses go out before closing the sockets.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    server.stop();
  });
  server.listen_after_bind();
  watcher.join();
  engineThread.join();
  std::lock_guard<std::mutex> lock(engine.m);
  llvm::errs() << "dsc-serve: stopped after " << engine.requests
               << " requests (" << engine.finished << " finished, "
               << engine.cancelled << " cancelled, " << engine.refused
               << " refused)\n";
  if (!engine.fatal.empty()) {
    llvm::errs() << "dsc-serve: error: " << engine.fatal << "\n";
    return 1;
  }
  return 0;
}
