"""The offline Engine (SGLang's shape): `Engine(model_path=None, **config).generate(...)`.
It drives the same Scheduler as the server, in-process."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Iterator

from radixgen.config import EngineConfig
from radixgen.core import SamplingParams
from radixgen.radix import NoPrefixCache, RadixCache
from radixgen.runtime.detokenizer import IncrementalDetokenizer
from radixgen.runtime.draft_runner import DraftModelRunner
from radixgen.runtime.grammar_backend import GrammarBackend
from radixgen.runtime.messages import GenerateReq, TokenOut
from radixgen.runtime.model.embedded import default_model_path
from radixgen.runtime.model_runner import ModelRunner
from radixgen.runtime.scheduler import Scheduler
from radixgen.runtime.speculation import Speculator
from radixgen.runtime.stop_checker import StopChecker
from radixgen.speculative import DraftModelDrafter, RadixDrafter, UnionDrafter


def load_tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


def build_scheduler(model_path: Path, cfg: EngineConfig, tokenizer: Any) -> Scheduler:
    """Model runner + prefix cache + scheduler, as both the Engine and the server use them."""
    runner = ModelRunner(model_path, cfg.model, cfg.cache, cfg.scheduler.max_running_requests)
    cache_cls = NoPrefixCache if cfg.cache.disable_radix_cache else RadixCache
    cache = cache_cls(page_size=cfg.cache.page_size, free_slots=runner.allocator.free)
    if runner.mixed_kv and isinstance(cache, RadixCache):
        cache = RadixCache(
            cfg.cache.page_size, runner.allocator.free, tier_boundary=runner.capacity[0]
        )
    eos = set(runner.arch.eos_token_ids)
    if tokenizer.eos_token_id is not None:
        eos.add(tokenizer.eos_token_id)
    checker = StopChecker(eos, lambda ids: tokenizer.decode(ids, skip_special_tokens=True))
    grammar = GrammarBackend(
        tokenizer,
        runner.arch.vocab_size,
        eos,
        cfg.scheduler.grammar_whitespace,
        jump_forward=not cfg.scheduler.disable_jump_forward,
        max_context_len=runner.max_context_len,
    )
    return Scheduler(
        runner, cache, cfg.scheduler, checker, grammar, build_speculator(cfg, runner, grammar)
    )


def build_speculator(
    cfg: EngineConfig, runner: ModelRunner, grammar: GrammarBackend
) -> Speculator | None:
    """The drafter(s) of --speculative-algorithm behind a Speculator; None when it is 'none'."""
    spec = cfg.speculative
    if not spec.enabled:
        return None
    drafters = []
    if "radix" in spec.speculative_algorithm:
        drafters.append(RadixDrafter())
    if "draft" in spec.speculative_algorithm:
        draft = DraftModelRunner(
            Path(spec.speculative_draft_model_path),
            cfg.model,
            spec.speculative_draft_max_total_tokens,
            cfg.scheduler.max_running_requests,
            runner.arch.vocab_size,
        )
        drafters.append(DraftModelDrafter(draft.next_logits))
    drafter = drafters[0] if len(drafters) == 1 else UnionDrafter(drafters)
    return Speculator(spec, drafter, runner.max_context_len, grammar)


class _Pending:
    """Per-request output assembly on the Engine side."""

    def __init__(self, rid: str, tokenizer: Any, params: SamplingParams):
        self.rid, self.params = rid, params
        self.detok = IncrementalDetokenizer(tokenizer, params)
        self.text, self.output_ids, self.logprobs, self.top = "", [], [], []
        self.last: TokenOut | None = None
        self.input_logprobs: list[float | None] | None = None
        self.start = time.perf_counter()

    def update(self, out: TokenOut) -> str:
        self.output_ids.extend(out.token_ids)
        self.logprobs.extend(out.logprobs or [])
        self.top.extend(out.top_logprobs or [])
        if out.input_logprobs is not None:
            self.input_logprobs = out.input_logprobs
        delta = self.detok.push(out.token_ids, out.finish)
        self.text += delta
        self.last = out
        return delta

    def result(self) -> dict[str, Any]:
        out = self.last
        meta = {
            "id": self.rid,
            "prompt_tokens": out.prompt_tokens,
            "completion_tokens": out.completion_tokens,
            "cached_tokens": out.cached_tokens,
            "finish_reason": out.finish,
            "e2e_latency": time.perf_counter() - self.start,
            **(out.spec.meta_info() if out.spec else {}),
        }
        if self.params.return_logprob or self.params.top_logprobs_num:
            meta["output_token_logprobs"] = list(zip(self.logprobs, self.output_ids))
        if self.params.top_logprobs_num:
            meta["output_top_logprobs"] = self.top
        if self.input_logprobs is not None:
            meta["input_token_logprobs"] = self.input_logprobs  # from logprob_start_len on
        return {"text": self.text, "output_ids": list(self.output_ids), "meta_info": meta}


class Engine:
    """Offline inference: `generate(prompt | list | input_ids=..., sampling_params=...)`."""

    def __init__(self, model_path: str | None = None, **config: Any):
        self.config = EngineConfig.from_kwargs(model_path=model_path, **config)
        self.model_path = Path(model_path) if model_path else default_model_path()
        self.tokenizer = load_tokenizer(self.model_path)
        self.scheduler = build_scheduler(self.model_path, self.config, self.tokenizer)

    def generate(
        self,
        prompt: str | list[str] | None = None,
        sampling_params: dict | list[dict] | None = None,
        input_ids: list[int] | list[list[int]] | None = None,
        stream: bool = False,
    ) -> Any:
        """One dict per prompt ({"text", "output_ids", "meta_info"}); a list for a list.
        With stream=True, an iterator of chunks {"index", "text" (so far), "delta", ...}."""
        batch, single = self._normalize(prompt, input_ids)
        params = _params_list(sampling_params, len(batch))
        pending = [self._submit(ids, p) for ids, p in zip(batch, params)]
        if stream:
            return self._stream(pending)
        for _ in self._stream(pending):
            pass
        results = [p.result() for p in pending]
        return results[0] if single else results

    def _normalize(self, prompt, input_ids) -> tuple[list[list[int]], bool]:
        if (prompt is None) == (input_ids is None):
            raise ValueError("give exactly one of prompt or input_ids")
        if prompt is not None:
            single = isinstance(prompt, str)
            texts = [prompt] if single else list(prompt)
            return [self.tokenizer.encode(t, add_special_tokens=False) for t in texts], single
        single = bool(input_ids) and isinstance(input_ids[0], int)
        return ([list(input_ids)] if single else [list(x) for x in input_ids]), single

    def _submit(self, ids: list[int], params: SamplingParams) -> _Pending:
        rid = uuid.uuid4().hex
        self.scheduler.handle(GenerateReq(rid=rid, input_ids=ids, params=params))
        return _Pending(rid, self.tokenizer, params)

    def _stream(self, pending: list[_Pending]) -> Iterator[dict[str, Any]]:
        by_rid = {p.rid: (i, p) for i, p in enumerate(pending)}
        open_rids = set(by_rid)
        outputs = self.scheduler.outputs
        self.scheduler.outputs = []
        while open_rids:
            for out in outputs:
                if out.rid not in by_rid:
                    continue
                index, p = by_rid[out.rid]
                delta = p.update(out)
                if out.finish is not None:
                    open_rids.discard(out.rid)
                yield {"index": index, "delta": delta, **p.result()}
            if open_rids:
                outputs = self.scheduler.step()

    def shutdown(self) -> None:
        if self.scheduler is not None and self.scheduler.grammar is not None:
            self.scheduler.grammar.shutdown()
        self.scheduler = None

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


def _params_list(sampling_params, n: int) -> list[SamplingParams]:
    if isinstance(sampling_params, list):
        if len(sampling_params) != n:
            raise ValueError(f"{len(sampling_params)} sampling_params for {n} prompts")
        return [SamplingParams.from_dict(p) for p in sampling_params]
    return [SamplingParams.from_dict(sampling_params)] * n
