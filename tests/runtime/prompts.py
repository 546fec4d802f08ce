"""Diverse chat prompts for the correctness tests."""

PROMPTS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "List three prime numbers greater than 100 and explain why they are prime.",
    "Translate 'good morning, how are you?' into Spanish.",
    "Write a Python function that reverses a string.",
    'Return a JSON object with keys "name" and "age" for a 31 year old called Ada.',
    "Explain step by step: if a train travels 60 km in 45 minutes, what is its speed in km/h?",
    "Give me a short SQL query that counts the rows of a table named users.",
    "Summarize the plot of Romeo and Juliet in two sentences.",
    "What is 1234 + 5678?",
]


def chat_ids(tokenizer, text: str, system: str | None = None) -> list[int]:
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": text}
    ]
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)


def mean_nll(engine, prompts, outputs) -> float:
    """Mean negative log-likelihood of outputs given prompts under `engine` (teacher forced)."""
    params = [
        {"max_new_tokens": 0, "return_logprob": True, "logprob_start_len": len(p)} for p in prompts
    ]
    results = engine.generate(
        input_ids=[p + o for p, o in zip(prompts, outputs)], sampling_params=params
    )
    lps = [lp for r in results for lp, _, _ in r["meta_info"]["input_token_logprobs"]]
    return -sum(lps) / len(lps)
