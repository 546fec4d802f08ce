"""Frontend benchmark: multi-call programs through the @function DSL vs the same LLM calls as
independent OpenAI chat requests (no prefix hints), against one running server.

Workloads (`--workloads`, each `--num` programs, `--max-tokens` per generation, greedy):
  multi_turn  a system prompt and three user turns, one answer each
  tot         tree of thought: fork(3) first steps, select the best, one more answer
  agent       sub-agents behind one long system prompt with tool schemas: plan, then a tool call
  classify    select-heavy: a few-shot prompt, then two selects (sentiment, topic) per text
The frontend runs them with `run_batch` (shared prefix pre-cached, forks pinned, each select one
batched prompt-logprob request). The baseline sends, per program, the equivalent chat
completions one after another (forks as separate requests, a select as a short generation that
names the label, so tree of thought makes 3 + 1 + 1 calls like its program), with the same
number of programs in flight. The cache is flushed before each mode. Reported side by side:
wall time, programs/s, requests, prompt/cached/completion tokens and the cache hit rate
(cached / prompt tokens, from meta_info or usage).

    python benchmarks/bench_programs.py --url http://127.0.0.1:30000 --quick
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

import radixgen as rg
from radixgen.frontend_lang import RuntimeEndpoint

TOOLS = [
    {
        "name": n,
        "description": d,
        "parameters": {
            "type": "object",
            "properties": {k: {"type": "string"} for k in ks},
            "required": list(ks),
        },
    }
    for n, d, ks in [
        ("search_web", "Search the web and return the top results.", ("query",)),
        ("read_file", "Read a file from the shared workspace.", ("path",)),
        ("run_sql", "Run a read-only SQL query on the analytics database.", ("query", "database")),
        ("send_email", "Send an email to a colleague.", ("to", "subject", "body")),
    ]
]
AGENT_SYSTEM = (
    "You are an agent in a research team. Work step by step, state assumptions, and call a "
    "tool by writing JSON with keys name and arguments. Tools:\n" + json.dumps(TOOLS, indent=1)
)
CHAT_SYSTEM = "You are a friendly tutor who explains things simply and briefly."
CLASSIFY_SYSTEM = "Classify customer messages. Examples:\n" + "\n".join(
    f"Message: {m}\nSentiment: {s}\nTopic: {t}"
    for m, s, t in [
        ("The parcel arrived broken.", "negative", "shipping"),
        ("Love the new app!", "positive", "product"),
        ("Why was I charged twice?", "negative", "billing"),
        ("Delivery was on time.", "positive", "shipping"),
        ("How do I reset my password?", "neutral", "account"),
    ]
)
SENTIMENTS, TOPIC_LABELS = (
    ["positive", "negative", "neutral"],
    ["shipping", "product", "billing", "account"],
)


# ---- the programs ----------------------------------------------------------------------------
@rg.function
def multi_turn(s, topic, max_tokens):
    s += rg.system(CHAT_SYSTEM)
    for question in _turns(topic):
        s += rg.user(question)
        s += rg.assistant(rg.gen(max_tokens=max_tokens))


@rg.function
def tot(s, topic, max_tokens):
    s += rg.system(CHAT_SYSTEM)
    s += rg.user(f"How should a beginner start learning {topic}?")
    with s.assistant():
        forks = s.fork(3)
        for i, f in enumerate(forks):
            f += f"Approach {i + 1}:" + rg.gen("step", max_tokens=max_tokens)
        forks.join()
        s += "".join(f"\nApproach {i + 1}:{t}" for i, t in enumerate(s["step"]))
        s += (
            "\nThe best is approach "
            + rg.select("best", ["1", "2", "3"])
            + "."
            + rg.gen(max_tokens=max_tokens)
        )


@rg.function
def agent(s, topic, max_tokens):
    s += rg.system(AGENT_SYSTEM)
    s += rg.user(f"Task: write a short report on {topic}. First, a plan.")
    s += rg.assistant(rg.gen(max_tokens=max_tokens))
    s += rg.user("Now your first tool call.")
    s += rg.assistant(rg.gen(max_tokens=max_tokens))


@rg.function
def classify(s, topic, max_tokens):
    s += rg.system(CLASSIFY_SYSTEM)
    s += rg.user(f"Message: {_message(topic)}")
    s += rg.assistant(
        "Sentiment: "
        + rg.select("sentiment", SENTIMENTS)
        + "\nTopic: "
        + rg.select("topic", TOPIC_LABELS)
    )


def _turns(topic: str) -> list[str]:
    return [f"What is {topic}?", "Give me an example.", "What should I read next?"]


def _message(topic: str) -> str:
    return f"My order about {topic} has not arrived and nobody answers my emails."


# ---- the same calls as independent chat requests ----------------------------------------------
class ChatClient:
    """/v1/chat/completions, recording each response's usage."""

    def __init__(self, url: str, api_key: str | None):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(base_url=url, headers=headers, timeout=600)
        self.model = self.client.get("/v1/models").json()["data"][0]["id"]
        self.usages: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def chat(self, messages: list[dict[str, str]], max_tokens: int) -> str:
        body = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        resp = self.client.post("/v1/chat/completions", json=body)
        resp.raise_for_status()
        out = resp.json()
        with self.lock:
            self.usages.append(out["usage"])
        return out["choices"][0]["message"]["content"]


def _conversation(client: ChatClient, system: str, questions: list[str], max_tokens: int) -> None:
    messages = [{"role": "system", "content": system}]
    for question in questions:
        messages.append({"role": "user", "content": question})
        messages.append({"role": "assistant", "content": client.chat(messages, max_tokens)})


def baseline(name: str, client: ChatClient, topic: str, max_tokens: int) -> None:
    if name == "multi_turn":
        _conversation(client, CHAT_SYSTEM, _turns(topic), max_tokens)
    elif name == "agent":
        _conversation(
            client,
            AGENT_SYSTEM,
            [f"Task: write a short report on {topic}. First, a plan.", "Now your first tool call."],
            max_tokens,
        )
    elif name == "tot":
        question = f"How should a beginner start learning {topic}?"
        steps = [
            client.chat(
                [
                    {"role": "system", "content": CHAT_SYSTEM},
                    {"role": "user", "content": f"{question} Give approach {i + 1}."},
                ],
                max_tokens,
            )
            for i in range(3)
        ]
        listing = "".join(f"\nApproach {i + 1}: {t}" for i, t in enumerate(steps))
        ask = f"{question}{listing}\nWhich approach is best? Answer one of: 1, 2, 3."
        messages = [{"role": "system", "content": CHAT_SYSTEM}, {"role": "user", "content": ask}]
        messages.append({"role": "assistant", "content": client.chat(messages, 3)})  # the select
        client.chat(messages + [{"role": "user", "content": "Why?"}], max_tokens)
    else:
        for labels in (SENTIMENTS, TOPIC_LABELS):
            client.chat(
                [
                    {"role": "system", "content": CLASSIFY_SYSTEM},
                    {
                        "role": "user",
                        "content": f"Message: {_message(topic)}\n"
                        f"Answer one of: {', '.join(labels)}.",
                    },
                ],
                3,
            )


# ---- running and reporting --------------------------------------------------------------------
class RecordingEndpoint(RuntimeEndpoint):
    """A RuntimeEndpoint that keeps the meta_info of every /generate answer."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.metas: list[dict[str, Any]] = []
        self.num_http = 0
        self.rec_lock = threading.Lock()

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        out = super()._request(method, path, body)
        if path == "/generate":
            with self.rec_lock:
                self.metas += [r["meta_info"] for r in (out if isinstance(out, list) else [out])]
                self.num_http += 1
        return out


def summarize(
    wall: float, num: int, prompt: int, cached: int, completion: int, requests: int, prompts: int
) -> dict[str, Any]:
    """`requests`: HTTP requests; `prompts`: sequences they carried (a batched select has several)."""
    return {
        "wall_s": round(wall, 3),
        "programs_per_s": round(num / wall, 3),
        "requests": requests,
        "prompts": prompts,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "completion_tokens": completion,
        "cache_hit_rate": round(cached / prompt, 4) if prompt else 0.0,
        "output_tok_per_s": round(completion / wall, 2),
    }


def run_frontend(prog: rg.Program, args: argparse.Namespace, topics: list[str]) -> dict[str, Any]:
    backend = RecordingEndpoint(args.url, api_key=args.api_key)
    backend.flush_cache()
    start = time.perf_counter()
    states = prog.run_batch(
        [{"topic": t, "max_tokens": args.max_tokens} for t in topics],
        backend=backend,
        num_threads=args.num_threads,
        temperature=0,
    )
    wall = time.perf_counter() - start
    errors = [str(s.error) for s in states if s.error is not None]
    if errors:
        raise RuntimeError(f"{len(errors)} programs failed, first: {errors[0]}")
    m = backend.metas
    return summarize(
        wall,
        len(topics),
        sum(x["prompt_tokens"] for x in m),
        sum(x["cached_tokens"] for x in m),
        sum(x["completion_tokens"] for x in m),
        backend.num_http,
        len(m),
    )


def run_baseline(name: str, args: argparse.Namespace, topics: list[str]) -> dict[str, Any]:
    client = ChatClient(args.url, args.api_key)
    client.client.post("/flush_cache").raise_for_status()
    start = time.perf_counter()
    with ThreadPoolExecutor(args.num_threads) as pool:
        list(pool.map(lambda t: baseline(name, client, t, args.max_tokens), topics))
    wall = time.perf_counter() - start
    u = client.usages
    cached = sum((x.get("prompt_tokens_details") or {}).get("cached_tokens", 0) for x in u)
    return summarize(
        wall,
        len(topics),
        sum(x["prompt_tokens"] for x in u),
        cached,
        sum(x["completion_tokens"] for x in u),
        len(u),
        len(u),
    )


WORKLOADS: dict[str, rg.Program] = {
    "multi_turn": multi_turn,
    "tot": tot,
    "agent": agent,
    "classify": classify,
}
SUBJECTS = [
    "photosynthesis",
    "compound interest",
    "the French revolution",
    "neural networks",
    "volcanoes",
    "jazz harmony",
    "plate tectonics",
    "sourdough baking",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:30000")
    p.add_argument("--api-key", default=None)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--num", type=int, default=32, help="programs per workload")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--num-threads", type=int, default=16, help="programs in flight")
    p.add_argument("--quick", action="store_true", help="4 programs per workload, 8 tokens")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.num, args.max_tokens = 4, 8
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    results: dict[str, Any] = {}
    print(
        f"{'workload':<11} {'mode':<11} {'wall_s':>7} {'prog/s':>7} {'reqs':>5} {'seqs':>5} {'prompt':>7} "
        f"{'cached':>7} {'hit':>6}"
    )
    for name in args.workloads.split(","):
        topics = [f"{SUBJECTS[i % len(SUBJECTS)]} (case {i})" for i in range(args.num)]
        results[name] = {
            "frontend": run_frontend(WORKLOADS[name], args, topics),
            "openai_chat": run_baseline(name, args, topics),
        }
        for mode, r in results[name].items():
            print(
                f"{name:<11} {mode:<11} {r['wall_s']:>7.2f} {r['programs_per_s']:>7.2f} {r['requests']:>5} "
                f"{r['prompts']:>5} {r['prompt_tokens']:>7} {r['cached_tokens']:>7} {r['cache_hit_rate']:>6.1%}"
            )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=2)
    return results


if __name__ == "__main__":
    main()
