"""Sub-agents that share one long system prompt and the tool schemas: a planner, a
researcher and a critic work in parallel (`run_batch` prefills the shared part once, so each
starts from the cache), then a writer combines their notes behind the same shared part.

    make serve            # in another terminal
    python examples/multi_agent.py --task "Plan a weekend in Lisbon"
"""

from __future__ import annotations

import argparse
import json

import radixgen as rg
from radixgen.frontend_lang.batch import shared_prefix

TOOLS = [
    {"name": "search_flights", "description": "Find flights between two airports on a date.",
     "parameters": {"type": "object", "properties": {"origin": {"type": "string"},
                    "destination": {"type": "string"}, "date": {"type": "string", "format": "date"}},
                    "required": ["origin", "destination", "date"]}},
    {"name": "search_hotels", "description": "Find hotels in a city for a range of nights.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                    "check_in": {"type": "string"}, "nights": {"type": "integer", "minimum": 1}},
                    "required": ["city", "check_in", "nights"]}},
    {"name": "weather", "description": "Daily weather forecast for a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                    "days": {"type": "integer"}}, "required": ["city"]}},
]

SHARED_SYSTEM = (
    "You are one agent in a team that plans trips for customers of a travel agency. The team "
    "works from the same brief: be concise, state assumptions, never invent prices, and hand "
    "your result to the next agent in plain text. You may call these tools by writing a JSON "
    "object with the keys name and arguments:\n" + json.dumps(TOOLS, indent=1))

AGENTS = {
    "planner": "You are the planner. Break the task into at most three steps.",
    "researcher": "You are the researcher. Say which tool you would call first and why.",
    "critic": "You are the critic. Name the biggest risk in this task.",
}
WRITER = "You are the writer. Using your team's notes below, write a one-sentence summary for the customer."


@rg.function
def agent(s, role_instruction, task, max_tokens):
    s += rg.system(SHARED_SYSTEM)
    s += rg.user(f"{role_instruction}\nTask: {task}")
    s += rg.assistant(rg.gen("output", max_tokens=max_tokens, temperature=0))


def cache_hit_rate(metas: list[dict]) -> float:
    """Cached prompt tokens / prompt tokens, from the server's meta_info of each request."""
    prompt = sum(m["prompt_tokens"] for m in metas)
    return sum(m["cached_tokens"] for m in metas) / prompt if prompt else 0.0


def optimum_hit_rate(backend: rg.RuntimeEndpoint, texts: list[str], metas: list[dict]) -> float:
    """The best any cache could do for these requests: each one reuses the part every prompt
    shares (system prompt, tool schemas, the start of the user turn) and computes the rest.
    The shared part's token count comes from the server (a pin of that text, already cached)."""
    shared = shared_prefix(texts).rstrip(" ")  # the tokens of "...You are the" start every prompt
    shared_tokens = backend.cache_prefix(shared)["prompt_tokens"] if shared else 0
    prompt = sum(m["prompt_tokens"] for m in metas)
    return len(metas) * shared_tokens / prompt if prompt else 0.0


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:30000", help="a running server (make serve)")
    p.add_argument("--api-key", default=None)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--task", default="Plan a weekend in Lisbon for two people in May.")
    args = p.parse_args(argv)
    backend = rg.RuntimeEndpoint(args.url, api_key=args.api_key)
    batch = [{"role_instruction": text, "task": args.task, "max_tokens": args.max_tokens}
             for text in AGENTS.values()]
    states = agent.run_batch(batch, backend=backend)
    notes = [f"{name}: {state.error() or state['output']}" for name, state in zip(AGENTS, states)]
    writer = agent.run(role_instruction=WRITER + "\n" + "\n".join(notes), task=args.task,
                       max_tokens=args.max_tokens, backend=backend)
    print("\n".join(f"--- {n}" for n in notes + [f"writer: {writer['output']}"]))
    done = [s for s in states if s.error() is None] + [writer]
    metas = [s.get_meta_info("output") for s in done]
    rate, optimum = cache_hit_rate(metas), optimum_hit_rate(backend, [s.text() for s in done], metas)
    print(f"cache hit rate (cached_tokens / prompt_tokens): {rate:.1%}, optimum {optimum:.1%} "
          f"({rate / optimum:.1%} of it)")
    return rate, optimum


if __name__ == "__main__":
    main()
