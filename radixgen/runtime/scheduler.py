"""Continuous-batching scheduler: one forward per `step()`, prefill (chunked) before decode.

The IO is injected: the offline Engine calls `handle` and reads `step()`'s outputs directly;
the server's scheduler process feeds them through ZMQ. Both run this code.
"""

from __future__ import annotations

import logging
import random
import time

import torch

from radixgen.config import SchedulerConfig
from radixgen.core import FinishReason
from radixgen.radix import PrefixCache
from radixgen.runtime.grammar_backend import CONSTRAINT_ERROR, GrammarBackend
from radixgen.runtime.kv_manager import KVManager
from radixgen.runtime.lora.adapter import LoraError
from radixgen.runtime.messages import (
    AbortReq,
    FlushCacheReq,
    GenerateReq,
    ReqTimes,
    SpecCounts,
    TokenOut,
    ToScheduler,
)
from radixgen.runtime.model_runner import ModelRunner
from radixgen.runtime.prefill_planner import PrefillPlanner
from radixgen.runtime.prompt_logprobs import input_logprob_rows, record_input_logprobs
from radixgen.runtime.request import Request
from radixgen.runtime.sampling import hold_back_stop_tokens, sample
from radixgen.runtime.schedule_policy import PrefillPlan
from radixgen.runtime.score_group import ScoreGroup
from radixgen.runtime.speculation import Draft, Speculator
from radixgen.runtime.stop_checker import StopChecker
from radixgen.runtime.weights.gate import VersionGate

logger = logging.getLogger(__name__)


class Scheduler:
    def __init__(
        self,
        runner: ModelRunner,
        cache: PrefixCache,
        cfg: SchedulerConfig,
        stop_checker: StopChecker,
        grammar: GrammarBackend | None = None,
        speculator: Speculator | None = None,
        *,
        gate: VersionGate,
    ):
        self.runner, self.cfg, self.stop_checker = runner, cfg, stop_checker
        self.gate = gate  # weight versions: namespaces, held admissions and switches
        self.grammar = grammar  # None: constrained requests are refused
        self.spec = speculator  # None: one token per request and step
        self.cache = cache
        on_insert = speculator.drafter.observe if speculator is not None else None
        self.kv = KVManager(
            cache,
            runner.allocator,
            runner.table,
            runner.mixed_kv,
            on_insert,
            runner.branch_window,
            runner.move_kv,
        )
        self.planner = PrefillPlanner(self.kv, cfg, runner.device.type, runner.max_context_len)
        self.waiting: list[Request] = []
        self.running: list[Request] = []  # prefilled, decoding
        self.chunked: list[Request] = []  # admitted, prompt partly prefilled
        self.outputs: list[TokenOut] = []
        self.num_prompt_tokens = self.num_cached_tokens = self.num_retractions = (
            self.num_demoted
        ) = 0
        self.num_cached_by_tier = [0, 0]
        self.paused = False  # /pause_generation: no step runs until /continue_generation

    @property
    def chunk_size(self) -> int:
        return self.planner.chunk_size

    @property
    def mixed_chunk_size(self) -> int:
        return self.planner.mixed_chunk_size

    # ---- input ----------------------------------------------------------------------------
    def handle(self, msg: ToScheduler) -> None:
        if isinstance(msg, GenerateReq):
            self._add(msg)
        elif isinstance(msg, AbortReq):
            self._abort(msg.rid)
        elif isinstance(msg, FlushCacheReq):
            self.flush_cache()

    def _add(self, msg: GenerateReq) -> None:
        gen = torch.Generator().manual_seed(
            msg.params.seed if msg.params.seed is not None else random.getrandbits(63)
        )
        adapter, error = self._adapter(msg.adapter)
        req = Request(
            msg.rid,
            list(msg.input_ids),
            msg.params,
            self.gate.namespace(adapter.cache_key if adapter else None),
            adapter,
            generator=gen,
        )
        error = error or self._validate(req)
        if error:
            self._finish(req, FinishReason("abort", message=error))
        elif req.params.constraint is not None:
            self.grammar.submit(req)  # joins `waiting` once its grammar compiled
        else:
            self.waiting.append(req)

    def _adapter(self, name: str | None):
        """(the LoRA adapter `name` names, or None for the base model; an error message)."""
        if name is None:
            return None, ""
        if self.runner.lora is None:
            return None, "LoRA adapters are not enabled (--enable-lora)"
        try:
            return self.runner.lora.resolve(name), ""
        except LoraError as exc:
            return None, exc.message

    def _validate(self, req: Request) -> str:
        if not req.input_ids:
            return "the prompt is empty"
        if req.params.constraint is not None and self.grammar is None:
            return "this scheduler has no grammar backend"
        if len(req.input_ids) >= self.runner.max_context_len:
            return (
                f"the prompt has {len(req.input_ids)} tokens; "
                f"the model's context is {self.runner.max_context_len}"
            )
        if len(req.input_ids) + 1 > self.runner.capacity[0]:
            return (
                f"the prompt has {len(req.input_ids)} tokens; "
                f"the KV pool holds {self.runner.capacity[0]}"
            )
        if max(req.input_ids) >= self.runner.arch.vocab_size or min(req.input_ids) < 0:
            return "input_ids contain token ids outside the vocabulary"
        return ""

    def _abort(self, rid: str) -> None:
        compiling = self.grammar.drop(rid) if self.grammar else None
        if compiling is not None:
            self._finish(compiling, FinishReason("abort", message="aborted by the client"))
            return
        for queue in (self.waiting, self.chunked, self.running, self.gate.held):
            for req in queue:
                if req.rid == rid:
                    queue.remove(req)
                    if req.row is not None:
                        self.kv.release(req)
                    self._finish(req, FinishReason("abort", message="aborted by the client"))
                    return

    def flush_cache(self) -> bool:
        """Drop every cached prefix; refused (False) while requests are in flight."""
        if self.waiting or self.running or self.chunked or self.gate.held:
            return False
        self.cache.reset()
        return True

    @property
    def has_work(self) -> bool:
        if self.paused:  # only a load to collect, or a switch with nothing left to drain
            return bool(
                self.gate.loading or (self.gate.switch and not self.running and not self.chunked)
            )
        return bool(
            self.waiting
            or self.running
            or self.chunked
            or self.gate.busy
            or (self.grammar and self.grammar.pending)
        )

    def pause(self, abort: bool) -> int:
        """Stop stepping (requests keep their state); with `abort`, every request in flight
        finishes with `abort` first. Returns how many requests were in flight."""
        reqs = [*self.waiting, *self.chunked, *self.running, *self.gate.held]
        if abort:
            for req in reqs:
                self._abort(req.rid)
        self.paused = True
        return len(reqs)

    # ---- one step ---------------------------------------------------------------------------
    def step(self) -> list[TokenOut]:
        """Run one forward: the admitted prefill chunks together with a decode token of every
        running request (a mixed batch, so decoding never stalls behind prefill), and return
        the outputs produced since the last step."""
        if self.paused:
            self.gate.before_step(self.waiting, self.running, self.chunked)
            return self._take_outputs()
        self._admit_compiled()
        self.gate.before_step(self.waiting, self.running, self.chunked)
        plan = self._plan()
        drafts = self.spec.draft(self.running) if self.spec is not None and self.running else []
        dec_reqs, dec_slots, drafts, tree_slots = self._alloc_decode(drafts)
        ext_slots = self._alloc_plan(plan) if plan.reqs else []
        self._stamp_admitted(plan.reqs)
        group_slots = self._alloc_groups(plan) if plan.groups else []
        if not plan.reqs and not dec_reqs and not drafts and not plan.groups:
            if self.grammar is not None and self.grammar.pending:
                time.sleep(0.002)  # only compiles in flight: leave the GIL to their thread
            return self._take_outputs()
        extra = [input_logprob_rows(r, e) for r, e in zip(plan.reqs, plan.extend_lens)]
        trees = [d.tree_input(s) for d, s in zip(drafts, tree_slots)] + [
            g.tree_input(s) for g, s in zip(plan.groups, group_slots)
        ]
        started = time.perf_counter()
        logits = self.runner.forward_mixed(
            plan.reqs,
            plan.extend_lens,
            ext_slots,
            dec_reqs,
            dec_slots,
            extra if any(c for _, c in extra) else None,
            trees,
        )
        n, d, n_extra = len(plan.reqs), len(dec_reqs), sum(c for _, c in extra)
        n_verify = sum(dr.num_rows for dr in drafts)
        if n_extra:
            record_input_logprobs(plan.reqs, extra, logits[n + d : n + d + n_extra])
        if n:
            self._after_prefill(plan, logits[:n])
        if dec_reqs:
            for req in dec_reqs:
                req.kv_len += 1
            self._append_tokens(dec_reqs, logits[n : n + d])
        if drafts:
            self._after_verify(
                drafts, tree_slots, logits[n + d + n_extra : n + d + n_extra + n_verify]
            )
        if plan.groups:
            self._after_scoring(plan.groups, group_slots, logits[n + d + n_extra + n_verify :])
        if self.planner.planned_long_tokens:  # sampling read the logits back: device time is in
            self.planner.observe_step(time.perf_counter() - started)
        self.num_demoted += self.kv.demote(
            self.running
        )  # branch window: older tokens to the branch pool
        return self._take_outputs()

    def _plan(self) -> PrefillPlan:
        """This step's prefill plan; with adapters, requests whose adapter would take a slot
        beyond the pool's wait (in order) for a later step."""
        lora = self.runner.lora
        if lora is None:
            return self.planner.plan(self.waiting, self.running, self.chunked)
        admit, deferred = lora.admissible(self.waiting, self.running + self.chunked)
        self.waiting[:] = admit
        plan = self.planner.plan(self.waiting, self.running, self.chunked)
        self.waiting[:0] = deferred
        return plan

    def _take_outputs(self) -> list[TokenOut]:
        outputs, self.outputs = self.outputs, []
        return outputs

    def _alloc_plan(self, plan: PrefillPlan) -> list[torch.Tensor]:
        """Slots for every planned request; one that cannot get them (decode filled the pool
        since it was admitted) goes back to the queue."""
        slots, kept = [], PrefillPlan()
        for req, ext in zip(plan.reqs, plan.extend_lens):
            got = self.kv.alloc_positions(req, req.kv_len, ext)
            if got is None:
                if req in self.chunked:
                    self.chunked.remove(req)
                self.kv.release(req)
                if self.running or self.chunked or kept.reqs or self._unblock(req):
                    self.waiting.insert(0, req)
                continue
            slots.append(got)
            kept.reqs.append(req)
            kept.extend_lens.append(ext)
        plan.reqs, plan.extend_lens = kept.reqs, kept.extend_lens
        return slots

    @staticmethod
    def _stamp_admitted(reqs: list[Request]) -> None:
        now = time.time()
        for req in reqs:
            if req.admitted_time is None:
                req.admitted_time = now

    def _alloc_groups(self, plan: PrefillPlan) -> list[torch.Tensor]:
        """Slots for each scoring tree's rows (prompt positions: the prefix pool); a group that
        cannot get them goes back to the queue."""
        slots, kept = [], []
        for group in plan.groups:
            got = self.kv.alloc(group.num_rows, 0)
            if got is None:
                self.kv.release(group.leader)
                self.waiting[:0] = group.members
                continue
            slots.append(got)
            kept.append(group)
        plan.groups = kept
        return slots

    def _count_start(self, req: Request, cached_len: int, hits_by_tier: tuple[int, int]) -> None:
        """First prefill of req (not after a retraction): record its cache hits."""
        req.started, req.cached_tokens = True, cached_len
        self.num_prompt_tokens += len(req.input_ids)
        self.num_cached_tokens += cached_len
        for tier, hits in enumerate(hits_by_tier):
            self.num_cached_by_tier[tier] += hits

    def _after_scoring(
        self, groups: list[ScoreGroup], slots: list[torch.Tensor], logits: torch.Tensor
    ) -> None:
        """Every member's prompt logprobs from its group's rows; each member's computed tokens
        go to the cache (the trunk once, so a select's chosen answer is cached for what comes
        next); all members finish."""
        start = 0
        for group, group_slots in zip(groups, slots):
            count = len(group.logit_rows())
            group.record_logprobs(logits[start : start + count])
            start += count
            leader = group.leader
            hits = self.kv.hits_by_tier(leader)
            self.kv.release_tree(
                leader,
                group_slots,
                [
                    (req.input_ids[: req.prefill_len], path)
                    for req, path in zip(group.members, group.paths)
                ],
            )
            for req, reused in zip(group.members, group.reused_lens()):
                self._count_start(req, group.cached_len + reused, (hits[0] + reused, hits[1]))
                self._emit(req, [], FinishReason("length"), None, None)

    def _after_prefill(self, plan: PrefillPlan, logits: torch.Tensor) -> None:
        done = []
        for i, (req, ext) in enumerate(zip(plan.reqs, plan.extend_lens)):
            if not req.started:  # first chunk of its first admission: record cache hits
                self._count_start(req, req.kv_len, self.kv.hits_by_tier(req))
            req.kv_len += ext
            self.kv.cache_unfinished(req)
            if req.kv_len == req.prefill_len:
                done.append(i)
                if req.prefilled_time is None:
                    req.prefilled_time = time.time()
                if req in self.chunked:
                    self.chunked.remove(req)
            elif req not in self.chunked:
                self.chunked.append(req)
        prompt_only = [i for i in done if plan.reqs[i].is_prompt_only]
        for i in prompt_only:  # prefilled (and so cached), nothing to generate
            self.kv.release(plan.reqs[i])
            self._emit(plan.reqs[i], [], FinishReason("length"), None, None)
        done = [i for i in done if i not in prompt_only]
        if done:
            reqs = [plan.reqs[i] for i in done]
            self._append_tokens(reqs, logits[done])

    def _alloc_decode(self, drafts: list[Draft]):
        """Slots for this step's rows of every running request: one (its next token), or one
        per row of its draft tree. Short of KV, speculation is dropped for the step first, then
        the newest requests are retracted. Returns (decoding requests, their slots, drafts kept,
        each draft's slots)."""
        while self.running:
            drafts = [d for d in drafts if d.req in self.running]
            drafted = {id(d.req) for d in drafts}
            plain = [r for r in self.running if id(r) not in drafted]
            sizes = [d.num_rows for d in drafts]
            slots = self.kv.alloc(len(plain) + sum(sizes), self.kv.new_token_tier)
            if slots is not None:
                tree_slots = list(slots[len(plain) :].split(sizes)) if drafts else []
                return plain, slots[: len(plain)], drafts, tree_slots
            if drafts:
                drafts = []
            else:
                self._retract_one()
        return [], None, [], []

    def _retract_one(self) -> None:
        """Out of KV: send the newest running request back to the queue (it keeps its output
        and is prefilled again later, mostly from the cache)."""
        victim = max(self.running, key=lambda r: r.arrival)
        self.running.remove(victim)
        self.kv.release(victim)
        victim.num_retractions += 1
        self.num_retractions += 1
        if not self.running and not self.chunked and not self._unblock(victim):
            return
        self.waiting.insert(0, victim)
        logger.info("retracted %s (KV pool full)", victim.rid)

    def _unblock(self, req: Request) -> bool:
        """req could not get KV while no other request held any. If even the empty pools are
        too small for it, it finishes with an error (False). Otherwise it waits again (True);
        with mixed pools it then reuses only the prefix-pool part of its cached prefix, since
        its own cached branch-pool tokens (locked while it is admitted) may be what fills that
        pool: they are recomputed into the prefix pool."""
        if not self.kv.fits_when_empty(req, self.runner.capacity):
            self._finish(
                req, FinishReason("abort", message="the KV pool is too small for this request")
            )
            return False
        if self.kv.branch_tier:
            req.prefix_pool_only = True
        return True

    def _admit_compiled(self) -> None:
        """Move requests whose grammar finished compiling into the queue (or finish them)."""
        if self.grammar is None or not self.grammar.pending:
            return
        ready, failed = self.grammar.poll()
        self.waiting.extend(ready)
        for req, error in failed:
            self._finish(req, FinishReason("abort", message=f"{CONSTRAINT_ERROR} {error}"))

    def _append_tokens(self, reqs: list[Request], logits: torch.Tensor) -> None:
        if self.grammar is not None:
            self.grammar.mask_logits(logits, reqs)
        if any(len(r.output_ids) < r.params.min_new_tokens for r in reqs):
            hold_back_stop_tokens(logits, reqs, self.stop_checker.eos_token_ids)
        result = sample(logits, reqs)
        for i, (req, token) in enumerate(zip(reqs, result.token_ids)):
            lp = result.logprobs[i] if result.logprobs else None
            top = result.top_logprobs[i] if result.top_logprobs else None
            if lp is not None:
                req.output_logprobs.append(lp)
            *tokens, reason = self._add_tokens(req, [token])
            self._settle(
                req, tokens, reason, [lp] if lp is not None else None, [top] if top else None
            )

    def _after_verify(
        self, drafts: list[Draft], tree_slots: list[torch.Tensor], logits: torch.Tensor
    ) -> None:
        """Accept each draft's verified tokens: its KV keeps the root and the accepted path."""
        start = 0
        for draft, slots in zip(drafts, tree_slots):
            req = draft.req
            result = self.spec.verify(draft, logits[start : start + draft.num_rows])
            start += draft.num_rows
            self.kv.keep_rows(req, slots, result.keep_rows())
            *tokens, reason = self._add_tokens(req, result.token_ids)
            # a stop inside the accepted path: no KV past the newest kept token's predecessor
            self.kv.truncate(req, min(req.kv_len, req.seq_len - 1))
            self._settle(req, tokens, reason, None, None)

    def _settle(
        self, req: Request, tokens: list[int], reason: FinishReason | None, lp, top
    ) -> None:
        """Queue bookkeeping after req got new tokens: finished, waiting for the KV of
        jump-forward tokens (an extend), or decoding on."""
        if req in self.chunked:
            self.chunked.remove(req)
        jumped = req.kv_len < req.seq_len - 1  # forced tokens without KV
        if req in self.running and (reason is not None or jumped):
            self.running.remove(req)
        if reason is not None:
            self.kv.release(req)
        elif jumped:  # jump-forward: the forced tokens' KV comes as an extend
            self.chunked.append(req)
        elif req not in self.running:
            self.running.append(req)
        self._emit(req, tokens, reason, lp, top)

    def _add_tokens(self, req: Request, tokens: list[int]) -> list:
        """Append chosen tokens (a sampled one, or a verify step's accepted drafts and target
        token) until one finishes the request, then any grammar-forced ones; returns the tokens
        appended followed by the finish reason (None to go on)."""
        added, queue = [], list(tokens)
        while queue:
            token = queue.pop(0)
            added.append(token)
            reason = self._accept(req, token)
            if reason is not None:
                return [*added, reason]
            if not queue and self.grammar is not None:  # jump-forward after the chosen tokens
                queue = list(self.grammar.forced_tokens(req))
        return [*added, None]

    def _accept(self, req: Request, token: int) -> FinishReason | None:
        req.output_ids.append(token)
        reason = self.grammar.accept(req, token) if self.grammar else None
        return reason or self.stop_checker.check(req, self.runner.max_context_len)

    def _finish(self, req: Request, reason: FinishReason) -> None:
        self._emit(req, [], reason, None, None)

    def _emit(self, req, token_ids, reason, logprobs, top) -> None:
        req.finish = reason
        if reason is not None and req.adapter is not None:
            self.runner.lora.finished(req.adapter)
        spec = None
        if reason is not None and self.spec is not None:
            self.spec.release(req)
            spec = SpecCounts(req.spec_verify_ct, req.spec_accepted, req.spec_pruned)
        input_logprobs = input_top = None
        if req.params.logprob_start_len >= 0 and not req.input_logprobs_sent:
            req.input_logprobs_sent = True
            pad = [None] * (
                req.input_logprob_start - req.params.logprob_start_len
            )  # position 0 has none
            input_logprobs = pad + req.input_logprobs
            if req.params.top_logprobs_num:
                input_top = pad + [[list(p) for p in t] for t in req.input_top_logprobs]
        self.outputs.append(
            TokenOut(
                rid=req.rid,
                token_ids=token_ids,
                prompt_tokens=len(req.input_ids),
                cached_tokens=req.cached_tokens,
                completion_tokens=len(req.output_ids),
                finish=reason.to_dict() if reason else None,
                logprobs=logprobs,
                top_logprobs=[[list(p) for p in t] for t in top] if top else None,
                input_logprobs=input_logprobs,
                input_top_logprobs=input_top,
                spec=spec,
                times=self._times_once(req),
                weight_version=req.namespace.weight_version,
            )
        )

    @staticmethod
    def _times_once(req: Request) -> ReqTimes | None:
        """The request's scheduler timestamps, on its first output after its prefill."""
        if req.prefilled_time is None or req.times_sent:
            return None
        req.times_sent = True
        return ReqTimes(req.received_time, req.admitted_time, req.prefilled_time)
