"""The offline Engine (SGLang's shape): `Engine(model_path=None, **config).generate(...)`.
It drives the same Scheduler as the server, in-process."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import torch

from radixgen.config import EngineConfig
from radixgen.core import SamplingParams
from radixgen.radix import NoPrefixCache, RadixCache
from radixgen.radix.kv_events import CacheEvents
from radixgen.runtime.detokenizer import IncrementalDetokenizer
from radixgen.runtime.distributed.group import TensorParallel
from radixgen.runtime.distributed.leader import Leader
from radixgen.runtime.distributed.step import StepBroadcaster
from radixgen.runtime.draft_runner import DraftModelRunner
from radixgen.runtime.grammar_backend import GrammarBackend
from radixgen.runtime.messages import GenerateReq, TokenOut
from radixgen.runtime.model.embedded import default_model_path
from radixgen.runtime.model_runner import ModelRunner
from radixgen.runtime.native_output import LogprobFormat, native_result
from radixgen.runtime.scheduler import Scheduler
from radixgen.runtime.speculation import Speculator
from radixgen.runtime.stop_checker import StopChecker
from radixgen.runtime.warmup import warm_up
from radixgen.runtime.weights.checks import Canary
from radixgen.runtime.weights.gate import VersionGate
from radixgen.runtime.weights.manager import UpdateSource, WeightManager
from radixgen.speculative import DraftModelDrafter, NamespacedDrafter, RadixDrafter, UnionDrafter


def load_tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


def build_scheduler(
    model_path: Path,
    cfg: EngineConfig,
    tokenizer: Any,
    cache_events: CacheEvents | None = None,
    parallel: TensorParallel | None = None,
) -> Scheduler:
    """Model runner + prefix cache + scheduler, as both the Engine and the server use them;
    `cache_events` is told of every change to the radix cache (KV events). With `parallel`
    (rank 0 of a tp group) every forward is first broadcast to the follower ranks."""
    runner = ModelRunner(
        model_path, cfg.model, cfg.cache, cfg.scheduler.max_running_requests, cfg.lora, parallel
    )
    if parallel is not None and parallel.info.tp_size > 1:
        runner.steps = StepBroadcaster(runner.device)
    if cfg.cache.disable_radix_cache:
        cache = NoPrefixCache(page_size=cfg.cache.page_size, free_slots=runner.allocator.free)
    else:
        boundary = runner.capacity[0] if runner.mixed_kv else None
        cache = RadixCache(
            cfg.cache.page_size, runner.allocator.free, tier_boundary=boundary, events=cache_events
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
    weights = WeightManager(
        runner,
        model_path,
        cfg.model.load_format,
        build_canary(cfg, tokenizer),
        cfg.model.weight_standby,
    )
    sched = Scheduler(
        runner,
        cache,
        cfg.scheduler,
        checker,
        grammar,
        build_speculator(cfg, runner, grammar),
        gate=VersionGate(weights),
    )
    warmup = cfg.scheduler.warmup
    if warmup or (warmup is None and runner.device.type == "cuda"):
        warm_up(sched)
    return sched


def build_canary(cfg: EngineConfig, tokenizer: Any) -> Canary:
    """The probe prompts of --weight-canary-prompts as token ids, and the entropy band."""
    texts = [t for t in cfg.model.weight_canary_prompts.split(";;") if t.strip()]
    prompts = tuple(tuple(tokenizer.encode(t, add_special_tokens=False)) for t in texts)
    return Canary(tuple(p for p in prompts if p), cfg.model.weight_canary_entropy_band)


def build_speculator(
    cfg: EngineConfig, runner: ModelRunner, grammar: GrammarBackend
) -> Speculator | None:
    """The drafter(s) of --speculative-algorithm behind a Speculator; None when it is 'none'."""
    spec = cfg.speculative
    if not spec.enabled:
        return None
    drafters = []
    if "radix" in spec.speculative_algorithm:
        drafters.append(NamespacedDrafter(RadixDrafter))  # n-grams per LoRA adapter
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
    """Per-request output assembly on the Engine side (a `native_output.RequestOutput`)."""

    def __init__(self, rid: str, tokenizer: Any, input_ids: list[int], params: SamplingParams):
        self.rid, self.input_ids, self.params = rid, input_ids, params
        self.detok = IncrementalDetokenizer(tokenizer, params)
        self.text, self.output_ids, self.logprobs, self.top_logprobs = "", [], [], []
        self.input_logprobs: list[float | None] | None = None
        self.input_top_logprobs: list[list[tuple[int, float]] | None] | None = None
        self.finish: dict[str, Any] | None = None
        self.prompt_tokens = self.cached_tokens = self.completion_tokens = 0
        self.spec: Any = None
        self.weight_version: str | None = None
        self.start = time.perf_counter()
        self.e2e_latency = 0.0

    def update(self, out: TokenOut) -> str:
        self.output_ids.extend(out.token_ids)
        self.logprobs.extend(out.logprobs or [])
        self.top_logprobs.extend(out.top_logprobs or [])
        if out.input_logprobs is not None:
            self.input_logprobs, self.input_top_logprobs = (
                out.input_logprobs,
                out.input_top_logprobs,
            )
        self.prompt_tokens, self.cached_tokens = out.prompt_tokens, out.cached_tokens
        self.completion_tokens, self.spec = out.completion_tokens, out.spec or self.spec
        self.weight_version = out.weight_version or self.weight_version
        self.finish = out.finish
        self.e2e_latency = time.perf_counter() - self.start
        delta = self.detok.push(out.token_ids, out.finish)
        self.text += delta
        return delta


class Engine:
    """Offline inference: `generate(prompt | list | input_ids=..., sampling_params=...)`."""

    def __init__(self, model_path: str | None = None, **config: Any):
        self.config = EngineConfig.from_kwargs(model_path=model_path, **config)
        self.model_path = Path(model_path) if model_path else default_model_path()
        self.tokenizer = load_tokenizer(self.model_path)
        self.leader = None  # tp > 1: rank 0 of the group, with its followers in processes
        cfg, parallel = self.config, None
        if self.config.parallel.tp_size > 1:
            self.leader = Leader(self.model_path, self.config, start_local=True)
            cfg, parallel = self.leader.cfg, self.leader.parallel
        self.scheduler = build_scheduler(self.model_path, cfg, self.tokenizer, None, parallel)
        self._token_texts: dict[int, str] = {}

    def generate(
        self,
        prompt: str | list[str] | None = None,
        sampling_params: dict | list[dict] | None = None,
        input_ids: list[int] | list[list[int]] | None = None,
        stream: bool = False,
        *,
        return_logprob: bool | list[bool] | None = None,
        logprob_start_len: int | list[int] | None = None,
        top_logprobs_num: int | list[int] | None = None,
        return_text_in_logprobs: bool = False,
        lora_path: str | list[str | None] | None = None,
    ) -> Any:
        """One dict per prompt ({"text", "output_ids", "meta_info"}, the server's /generate
        answer); a list for a list. The logprob arguments (SGLang's, one value or a list with
        one per prompt) override the same fields in sampling_params. With stream=True, an
        iterator of chunks {"index", "delta", "text" (so far), ...} whose output logprobs are
        the chunk's own. `lora_path`: the LoRA adapter's name (SGLang's field), one for every
        prompt or a list with one per prompt (None: the base model)."""
        batch, single = self._normalize(prompt, input_ids)
        fields = _per_prompt_fields(
            len(batch),
            return_logprob=return_logprob,
            logprob_start_len=logprob_start_len,
            top_logprobs_num=top_logprobs_num,
        )
        params = _params_list(sampling_params, fields)
        fmt = LogprobFormat(return_text_in_logprobs, self._token_text)
        adapters = self._adapters(lora_path, len(batch))
        pending = [self._submit(ids, p, a) for ids, p, a in zip(batch, params, adapters)]
        if stream:
            return self._stream(pending, fmt)
        for _ in self._drive(pending):
            pass
        results = [native_result(p, fmt) for p in pending]
        return results[0] if single else results

    def _adapters(self, lora_path: str | list[str | None] | None, count: int) -> list:
        adapters = lora_path if isinstance(lora_path, list) else [lora_path] * count
        if len(adapters) != count:
            raise ValueError(f"lora_path has {len(adapters)} values for {count} prompts")
        lora = self.scheduler.runner.lora
        for name in adapters:
            if name is not None and (lora is None or name not in lora.adapters):
                loaded = ", ".join(lora.adapters) if lora else "LoRA is not enabled"
                raise ValueError(f"unknown LoRA adapter {name!r} ({loaded or 'none loaded'})")
        return adapters

    def load_lora_adapter(self, lora_name: str, lora_path: str, pinned: bool = False) -> dict:
        """Load a PEFT adapter under `lora_name` (raises LoraError: runtime/lora/adapter.py)."""
        return self._lora().load(lora_name, lora_path, pinned)

    def unload_lora_adapter(self, lora_name: str) -> dict:
        """Unload an adapter; refused (LoraError, status 409) while requests use it."""
        return self._lora().unload(lora_name)

    def _lora(self):
        if self.scheduler.runner.lora is None:
            raise ValueError("LoRA adapters are not enabled (enable_lora=True)")
        return self.scheduler.runner.lora

    def _token_text(self, token_id: int) -> str:
        text = self._token_texts.get(token_id)
        if text is None:
            text = self._token_texts[token_id] = self.tokenizer.decode(
                [token_id], skip_special_tokens=False
            )
        return text

    def _normalize(self, prompt, input_ids) -> tuple[list[list[int]], bool]:
        if (prompt is None) == (input_ids is None):
            raise ValueError("give exactly one of prompt or input_ids")
        if prompt is not None:
            single = isinstance(prompt, str)
            texts = [prompt] if single else list(prompt)
            return [self.tokenizer.encode(t, add_special_tokens=False) for t in texts], single
        single = bool(input_ids) and isinstance(input_ids[0], int)
        return ([list(input_ids)] if single else [list(x) for x in input_ids]), single

    def _submit(self, ids: list[int], params: SamplingParams, adapter: str | None) -> _Pending:
        rid = uuid.uuid4().hex
        self.scheduler.handle(GenerateReq(rid=rid, input_ids=ids, params=params, adapter=adapter))
        return _Pending(rid, self.tokenizer, ids, params)

    def _stream(self, pending: list[_Pending], fmt: LogprobFormat) -> Iterator[dict[str, Any]]:
        for index, p, delta, streamed in self._drive(pending):
            yield {"index": index, "delta": delta, **native_result(p, fmt, streamed)}

    def _drive(self, pending: list[_Pending]) -> Iterator[tuple[int, _Pending, str, int]]:
        """Step the scheduler until every request finished; per output: (index of its
        request, the request updated, text delta, output logprobs earlier outputs carried)."""
        by_rid = {p.rid: (i, p) for i, p in enumerate(pending)}
        open_rids = set(by_rid)
        outputs = self.scheduler.outputs
        self.scheduler.outputs = []
        while open_rids:
            for out in outputs:
                if out.rid not in by_rid:
                    continue
                index, p = by_rid[out.rid]
                streamed = len(p.logprobs)
                delta = p.update(out)
                if out.finish is not None:
                    open_rids.discard(out.rid)
                yield index, p, delta, streamed
            if open_rids:
                outputs = self.scheduler.step()

    def update_weights(
        self,
        model_path: str | None = None,
        named_tensors: dict[str, torch.Tensor] | None = None,
        load_format: str = "auto",
        version: str | None = None,
    ) -> dict[str, Any]:
        """Load a new weight version from a folder or from named tensors (HF names, every
        weight of the model), validate it and make it serve; blocks until it serves. Raises
        WeightUpdateError (the check that failed, or why it was refused)."""
        if (model_path is None) == (named_tensors is None):
            raise ValueError("give exactly one of model_path or named_tensors")
        tensors = None
        if named_tensors is not None:
            tensors = {name: t.detach().contiguous() for name, t in named_tensors.items()}
        self.scheduler.gate.update(
            "engine", UpdateSource(version, model_path, load_format, tensors)
        )
        return self._await_op()

    def rollback_weights(self) -> dict[str, Any]:
        """Serve the previous weight version again (it stays resident until released)."""
        self.scheduler.gate.rollback("engine")
        return self._await_op()

    def release_standby_weights(self) -> dict[str, Any]:
        """Free the previous weight version (rollback is then impossible)."""
        self.scheduler.gate.release("engine")
        return self._await_op()

    @property
    def weight_version(self) -> str:
        return self.scheduler.gate.weights.active.version.name

    def _await_op(self) -> dict[str, Any]:
        """Step the scheduler (requests in flight go on, their outputs kept for their streams)
        until the weights operation is answered."""
        kept: list[TokenOut] = []
        while True:
            answers = self.scheduler.gate.take_answers()
            if answers:
                self.scheduler.outputs = kept + self.scheduler.outputs
                if answers[0].error is not None:
                    raise answers[0].error
                return answers[0].result
            kept.extend(self.scheduler.step())
            if not (self.scheduler.running or self.scheduler.chunked):
                time.sleep(0.002)  # only a load in flight: leave the GIL to its thread

    def shutdown(self) -> None:
        if self.scheduler is not None and self.scheduler.grammar is not None:
            self.scheduler.grammar.shutdown()
        if self.leader is not None and self.scheduler is not None:
            self.leader.stop(self.scheduler.runner.steps)
        self.scheduler = None

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


def _per_prompt_fields(count: int, **fields: Any) -> list[dict[str, Any]]:
    """Each prompt's given (not None) fields, from one value for every prompt or a list."""
    out: list[dict[str, Any]] = [{} for _ in range(count)]
    for name, value in fields.items():
        values = value if isinstance(value, list) else [value] * count
        if len(values) != count:
            raise ValueError(f"{name} has {len(values)} values for {count} prompts")
        for prompt_fields, v in zip(out, values):
            if v is not None:
                prompt_fields[name] = v
    return out


def _params_list(
    sampling_params: dict | list[dict] | None, fields: list[dict[str, Any]]
) -> list[SamplingParams]:
    n = len(fields)
    if isinstance(sampling_params, list):
        if len(sampling_params) != n:
            raise ValueError(f"{len(sampling_params)} sampling_params for {n} prompts")
        dicts = sampling_params
    else:
        dicts = [sampling_params] * n
    return [SamplingParams.from_dict({**(d or {}), **f}) for d, f in zip(dicts, fields)]
