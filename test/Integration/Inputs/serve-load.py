"""A bounded load test of dsc-serve on localhost (Python's standard library).

usage: serve-load.py DSC_SERVE MODEL_MLIR CHECKPOINT [--requests N]
                     [--clients C] [--seed S]
       serve-load.py DSC_SERVE MODEL_MLIR - --tokenizer TOKENIZER_JSON
           (text prompts only: a completion and a stream, decoded)

Starts dsc-serve (port 0, read back from its log), then:
  1. N requests from C concurrent clients, prompts of random lengths and
     max_tokens (fixed seed), half streamed, greedy or seeded sampling;
     every response must be well-formed and complete (token count ==
     max_tokens: the models have no stop token), none lost; a greedy
     prompt sent twice gets the same tokens; p50/p99 latencies printed;
  2. malformed JSON, an oversized prompt, an unknown field: 400 each;
  3. the server's own counters: KV blocks in use back to 0, the worst
     waste per sequence <= 1 block;
  4. SIGTERM with requests in flight: they finish, the server exits 0;
  5. a burst past --max-waiting: the excess gets 429;
  6. a client that disconnects mid-stream (its own server, a long
     context): its sequence is cancelled and the server keeps serving.
Prints one line per check; exits 1 at the first failure.
"""
import argparse
import http.client
import json
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time


def fail(why):
    print("FAIL:", why)
    sys.exit(1)


class Server:
    def __init__(self, args, extra=(), compile="token-budget=16 max-sequences=4"):
        self.log = open(args.log, "w+")
        load = ["--load", args.checkpoint] if args.checkpoint != "-" else []
        self.proc = subprocess.Popen(
            [args.serve, args.model, *load, "--port", "0",
             "--model-name", "tiny", "--compile", compile, *extra],
            stderr=self.log, stdout=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline:
            self.log.seek(0)
            m = re.search(r"http://127\.0\.0\.1:(\d+)", self.log.read())
            if m:
                self.port = int(m[1])
                return
            if self.proc.poll() is not None:
                fail("dsc-serve exited at start")
            time.sleep(0.05)
        fail("dsc-serve did not start")

    def request(self, method, path, body=None, timeout=120):
        conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                          timeout=timeout)
        conn.request(method, path, body=body,
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, data

    def complete(self, payload):
        status, data = self.request("POST", "/v1/completions",
                                    json.dumps(payload))
        if payload.get("stream"):
            return status, parse_stream(data) if status == 200 else data
        return status, json.loads(data)


def parse_stream(data):
    text = data.decode()
    if not text.endswith("data: [DONE]\n\n"):
        fail("a stream does not end with [DONE]: " + text[-80:])
    tokens, finish = [], None
    for event in text.split("\n\n"):
        if not event or event == "data: [DONE]":
            continue
        if not event.startswith("data: "):
            fail("not a server-sent event: " + event[:80])
        chunk = json.loads(event[6:])
        choice = chunk["choices"][0]
        tokens += choice["token_ids"]
        finish = choice["finish_reason"] or finish
    return {"choices": [{"token_ids": tokens, "finish_reason": finish}]}


def load(server, args):
    rng = random.Random(args.seed)
    payloads = []
    for i in range(args.requests):
        length = rng.randint(1, 40)
        payload = {"prompt": [rng.randrange(128) for _ in range(length)],
                   "max_tokens": rng.randint(1, 64), "model": "tiny",
                   "stream": i % 2 == 1}
        if i % 3 == 0:
            payload["temperature"] = 0
        else:
            payload.update(temperature=0.8, top_p=0.9, seed=i)
        payloads.append(payload)
    # A greedy prompt twice, far apart.
    payloads[-1] = dict(payloads[0], stream=not payloads[0]["stream"])
    results = [None] * len(payloads)
    latencies = [0.0] * len(payloads)
    next_index = [0]
    lock = threading.Lock()

    def client():
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= len(payloads):
                return
            start = time.time()
            results[i] = server.complete(payloads[i])
            latencies[i] = time.time() - start

    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    start = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - start
    for i, (payload, result) in enumerate(zip(payloads, results)):
        if result is None:
            fail(f"request {i} got no response")
        status, body = result
        if status != 200:
            fail(f"request {i}: status {status}: {body}")
        choice = body["choices"][0]
        if len(choice["token_ids"]) != payload["max_tokens"] or \
                choice["finish_reason"] != "length":
            fail(f"request {i}: {len(choice['token_ids'])} tokens, "
                 f"{choice['finish_reason']}, asked {payload['max_tokens']}")
        if not payload.get("stream"):
            usage = body["usage"]
            if usage["completion_tokens"] != payload["max_tokens"] or \
                    usage["prompt_tokens"] != len(payload["prompt"]):
                fail(f"request {i}: usage {usage}")
    if results[0][1]["choices"][0]["token_ids"] != \
            results[-1][1]["choices"][0]["token_ids"]:
        fail("the same greedy prompt got other tokens")
    tokens = sum(p["max_tokens"] for p in payloads)
    ms = sorted(1e3 * x for x in latencies)
    print(f"load: {len(payloads)} requests from {args.clients} clients, all "
          f"well-formed and complete; {tokens} tokens in {elapsed:.1f} s; "
          f"latency p50 {ms[len(ms) // 2]:.0f} ms, p99 "
          f"{ms[min(len(ms) - 1, int(0.99 * len(ms)))]:.0f} ms")


def bad_inputs(server):
    for body, what in [("{nope", "not valid JSON"),
                       (json.dumps({"prompt": [1] * 100, "max_tokens": 64}),
                        "beyond the plan's maximum context of 128"),
                       (json.dumps({"prompt": [1], "bogus": 1}),
                        "unknown field 'bogus'"),
                       (json.dumps({"prompt": [1], "n": 2}), "'n' is not supported"),
                       (json.dumps({"prompt": "text"}), "need the server's --tokenizer")]:
        status, data = server.request("POST", "/v1/completions", body)
        error = json.loads(data)["error"]["message"]
        if status != 400 or what not in error:
            fail(f"expected 400 '{what}', got {status}: {error}")
    print("bad input: malformed JSON, an oversized prompt, an unknown field, "
          "n=2 and a text prompt without tokenizer get 400 naming the cause")


def disconnect(args):
    """A stream long enough (4000 tokens, a Llama's RoPE extends past its
    128 trained positions) that the client's close always comes first,
    however the machine schedules it: the server must notice the closed
    socket at a write and cancel the sequence, freeing its KV blocks."""
    args = argparse.Namespace(**{**vars(args), "log": args.log + ".disconnect"})
    server = Server(args, compile="token-budget=16 max-sequences=4 "
                                  "max-context=4096")
    try:
        sock = socket.create_connection(("127.0.0.1", server.port))
        body = json.dumps({"prompt": [3, 4, 5], "max_tokens": 4000,
                           "stream": True, "temperature": 0})
        sock.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                      "Content-Type: application/json\r\nContent-Length: "
                      f"{len(body)}\r\n\r\n{body}").encode())
        sock.recv(200)
        sock.close()
        deadline = time.time() + 60
        while time.time() < deadline:
            status, data = server.request("GET", "/metrics")
            m = json.loads(data)
            if m["requests_cancelled"] + m["requests_finished"] >= 1 and \
                    m["requests_running"] == 0:
                break
            time.sleep(0.05)
        if m["requests_cancelled"] != 1 or m["tokens_generated"] >= 4000 or \
                m["kv_blocks_in_use"] != 0:
            fail(f"the disconnected stream was not cancelled: {m}")
        status, body = server.complete({"prompt": [1, 2], "max_tokens": 4})
        if status != 200 or len(body["choices"][0]["token_ids"]) != 4:
            fail("the server stopped serving after a disconnect")
        print("disconnect: the stream's sequence was cancelled after "
              f"{m['tokens_generated']} of 4000 tokens, its KV blocks freed; "
              "the server still serves")
    finally:
        server.proc.kill()


def counters(server):
    status, data = server.request("GET", "/metrics")
    m = json.loads(data)
    if m["kv_blocks_in_use"] != 0:
        fail(f"{m['kv_blocks_in_use']} KV blocks still in use: {m}")
    if m["kv_worst_waste_blocks_per_sequence"] > 1:
        fail(f"KV waste {m['kv_worst_waste_blocks_per_sequence']} blocks")
    print(f"counters: KV blocks in use 0 of {m['kv_blocks_total']} (peak "
          f"{m['kv_blocks_peak']}), worst waste "
          f"{m['kv_worst_waste_blocks_per_sequence']} block(s) per sequence; "
          f"time to first token p50 {m['time_to_first_token_p50_ms']:.0f} ms")


def shutdown(server):
    results = []

    def one():
        results.append(server.complete({"prompt": [7, 8], "max_tokens": 64,
                                        "temperature": 0}))

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    server.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join()
    code = server.proc.wait(timeout=60)
    if code != 0:
        fail(f"dsc-serve exited {code} at SIGTERM")
    if len(results) != 3 or any(s != 200 or
                                len(b["choices"][0]["token_ids"]) != 64
                                for s, b in results):
        fail(f"in-flight requests did not finish at SIGTERM: {results}")
    print("SIGTERM: 3 in-flight requests finished, exit code 0")


def text(args):
    """Text prompts through the server's --tokenizer, plain and streamed."""
    server = Server(args, ["--tokenizer", args.tokenizer])
    try:
        status, body = server.complete({"prompt": "The quick brown fox",
                                        "max_tokens": 6, "temperature": 0})
        choice = body["choices"][0] if status == 200 else {}
        if status != 200 or not choice.get("text") or \
                len(choice["token_ids"]) != 6 or \
                body["usage"]["prompt_tokens"] < 2:
            fail(f"a text completion: {status} {body}")
        status, streamed = server.complete({"prompt": "The quick brown fox",
                                            "max_tokens": 6, "temperature": 0,
                                            "stream": True})
        if status != 200 or \
                streamed["choices"][0]["token_ids"] != choice["token_ids"]:
            fail(f"the streamed text completion differs: {streamed}")
        print(f"text: {body['usage']['prompt_tokens']} prompt tokens, "
              "6 new, decoded; streamed the same tokens")
    finally:
        server.proc.kill()
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("serve")
    parser.add_argument("model")
    parser.add_argument("checkpoint")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log", default="serve.log")
    parser.add_argument("--tokenizer", default="",
                        help="only check text prompts through this "
                             "tokenizer.json (checkpoint '-': none)")
    args = parser.parse_args()
    if args.tokenizer:
        return text(args)
    server = Server(args)
    try:
        load(server, args)
        bad_inputs(server)
        counters(server)
        shutdown(server)
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
    # Requests beyond the queue's bound get 429 and the rest complete.
    busy = Server(argparse.Namespace(**{**vars(args),
                                        "log": args.log + ".busy"}),
                  ["--max-waiting", "1"])
    try:
        statuses = []

        def burst():
            statuses.append(busy.complete({"prompt": [1, 2, 3],
                                           "max_tokens": 120})[0])

        threads = [threading.Thread(target=burst) for _ in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if set(statuses) - {200, 429} or 429 not in statuses or \
                200 not in statuses:
            fail(f"a burst past --max-waiting 1 got statuses {statuses}")
        print(f"busy: a burst of 24 against --max-waiting 1: "
              f"{statuses.count(200)} served, {statuses.count(429)} got 429")
    finally:
        busy.proc.kill()
    disconnect(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
