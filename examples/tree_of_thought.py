"""Tree of thought: the question is prefilled once, `fork` explores several first steps in
parallel (each branch hits the cached question), and `select` lets the model judge them by
log-probability in one batched request over the cached prefix.

    python examples/tree_of_thought.py --question "How can I keep basil alive indoors?"
"""

from __future__ import annotations

import argparse

import radixgen as rg


@rg.function
def tree_of_thought(s, question, num_branches, max_tokens):
    s += rg.system("You solve problems by considering several approaches before choosing one.")
    s += rg.user(question)
    with s.assistant():
        forks = s.fork(num_branches)
        for i, branch in enumerate(forks):
            branch += f"Approach {i + 1}: " + rg.gen("thought", max_tokens=max_tokens, stop="\n",
                                                      temperature=0.9, seed=i)
        forks.join()
        for i, thought in enumerate(s["thought"]):
            s += f"Approach {i + 1}: {thought.strip()}\n"
        s += "The best approach is number " + rg.select("best", [str(i + 1) for i in range(num_branches)])
        s += ", because" + rg.gen("why", max_tokens=max_tokens, stop="\n", temperature=0)


def main(argv: list[str] | None = None) -> rg.ProgramState:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:30000", help="a running server (make serve)")
    p.add_argument("--api-key", default=None)
    p.add_argument("--max-tokens", type=int, default=40)
    p.add_argument("--branches", type=int, default=3)
    p.add_argument("--question", default="How can I keep a basil plant alive indoors?")
    args = p.parse_args(argv)
    state = tree_of_thought.run(question=args.question, num_branches=args.branches,
                                max_tokens=args.max_tokens,
                                backend=rg.RuntimeEndpoint(args.url, api_key=args.api_key))
    print(state.messages()[-1]["content"])
    scores = state.get_meta_info("best")["scores"]
    print("select scores:", ", ".join(f"{i + 1}: {x:.3f}" for i, x in enumerate(scores)))
    return state


if __name__ == "__main__":
    main()
