"""Tool calling through the official `openai` client against the OpenAI-compatible endpoint
(needs the server's `tools` support): the model asks for a tool, we run it locally and send
the result back, and the model answers with it.

    python examples/tool_calling_openai.py --city Paris
"""

from __future__ import annotations

import argparse
import json

import openai

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}]


def get_weather(city: str) -> dict:
    """A stand-in for a real weather service."""
    return {"city": city, "temperature_c": 21, "sky": "clear"}


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:30000", help="a running server (make serve)")
    p.add_argument("--api-key", default="none")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--city", default="Paris")
    args = p.parse_args(argv)
    client = openai.OpenAI(base_url=args.url.rstrip("/") + "/v1", api_key=args.api_key)
    model = client.models.list().data[0].id
    messages = [{"role": "user", "content": f"What is the weather in {args.city}?"}]
    first = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, tool_choice="required",
                                           max_tokens=args.max_tokens, temperature=0)
    call = first.choices[0].message.tool_calls[0]
    result = get_weather(**json.loads(call.function.arguments))
    print(f"tool call: {call.function.name}({call.function.arguments}) -> {result}")
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}]
    final = client.chat.completions.create(model=model, messages=messages, max_tokens=args.max_tokens, temperature=0)
    answer = final.choices[0].message.content or ""
    print(answer)
    return answer


if __name__ == "__main__":
    main()
