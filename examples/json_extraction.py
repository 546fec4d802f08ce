"""Structured extraction: `gen(json_schema=...)` constrains the output to the schema (needs the
server's grammar support), so the result parses as JSON every time.

    python examples/json_extraction.py --text "Ada Lovelace, born 1815 in London, mathematician."
"""

from __future__ import annotations

import argparse
import json

import radixgen as rg

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "birth_year": {"type": "integer"},
                   "city": {"type": "string"}, "occupation": {"type": "string"}},
    "required": ["name", "birth_year", "city", "occupation"],
    "additionalProperties": False,
}


@rg.function
def extract(s, text, max_tokens):
    s += rg.system("Extract the person described by the user as JSON.")
    s += rg.user(text)
    s += rg.assistant(rg.gen("person", max_tokens=max_tokens, temperature=0, json_schema=PERSON))


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:30000", help="a running server (make serve)")
    p.add_argument("--api-key", default=None)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--text", default="Ada Lovelace was born in 1815 in London and worked as a mathematician.")
    args = p.parse_args(argv)
    state = extract.run(text=args.text, max_tokens=args.max_tokens,
                        backend=rg.RuntimeEndpoint(args.url, api_key=args.api_key))
    person = json.loads(state["person"])
    print(json.dumps(person, indent=2))
    return person


if __name__ == "__main__":
    main()
