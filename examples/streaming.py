"""Streaming: `run(stream=True)` returns at once and `text_iter()` yields text as the server
produces it (`text_iter("story")` would yield only that variable's tokens).

    python examples/streaming.py --topic "a lighthouse keeper"
"""

from __future__ import annotations

import argparse

import radixgen as rg


@rg.function
def story(s, topic, max_tokens):
    s += rg.user(f"Tell a very short story about {topic}.")
    s += rg.assistant(rg.gen("story", max_tokens=max_tokens, temperature=0.7, seed=0))


def main(argv: list[str] | None = None) -> list[str]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:30000", help="a running server (make serve)")
    p.add_argument("--api-key", default=None)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--topic", default="a lighthouse keeper")
    args = p.parse_args(argv)
    state = story.run(topic=args.topic, max_tokens=args.max_tokens, stream=True,
                      backend=rg.RuntimeEndpoint(args.url, api_key=args.api_key))
    chunks = []
    for chunk in state.text_iter("story"):
        chunks.append(chunk)
        print(chunk, end="", flush=True)
    print()
    return chunks


if __name__ == "__main__":
    main()
