"""Frozen per-component configs. The CLI is generated from their fields, so each default
and help text is written once (`add_arguments` / `from_namespace`)."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Union, get_args, get_origin, get_type_hints


def option(default: Any, help: str, choices: tuple | None = None) -> Any:
    """A config field with the CLI help (and choices) next to its default."""
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass(frozen=True)
class ModelConfig:
    model_path: str | None = option(
        None, "HF-format model folder (default: the embedded SmolLM2-135M-Instruct)"
    )
    dtype: str = option(
        "auto", "weight and activation dtype", ("auto", "bfloat16", "float16", "float32")
    )
    load_format: str = option(
        "auto", "'dummy' builds random weights from config.json", ("auto", "safetensors", "dummy")
    )
    quantization: str | None = option(
        None,
        "weight quantization of the linear layers: fp8 (E4M3, per-channel scales) or nvfp4 (E2M1, "
        "an E4M3 scale per 16, an FP32 tensor scale); a bf16/fp32 checkpoint is quantized on load, "
        "a ModelOpt or compressed-tensors one is read as stored (default: the checkpoint's own, "
        "none for a dense one)",
        ("none", "fp8", "nvfp4"),
    )
    quantize_lm_head: bool = option(
        False, "with --quantization: quantize lm_head too (embeddings stay dense)"
    )
    nvfp4_scale_search: bool = option(
        False,
        "NVFP4 on load: per-block MSE-optimal scale search instead of round-to-nearest block "
        "scales (measured on the embedded model: -2.5 points of perplexity on one passage, +11 "
        "on another, so off by default)",
    )
    device: str = option("auto", "'auto' picks cuda when available, else cpu")
    attention_backend: str = option(
        "auto",
        "'triton': paged kernels reading quantized KV in place; "
        "'torch': SDPA over gathered KV; 'auto': triton on CUDA",
        ("auto", "torch", "triton"),
    )
    mla_expand_threshold: float | None = option(
        None,
        "MLA models (DeepSeek-V2/V3): an extend of T new tokens over a cached prefix P runs "
        "expanded (per-head K/V decompressed from the latent, then ordinary attention) when "
        "sum(T * (P + T)) >= this x sum(P), else absorbed: so always without a prefix, and from "
        "about this many new tokens over a long one; 0: always expanded (default: the FLOP "
        "crossover of the model's dims, ~171 for DeepSeek's; not yet measured on a GPU)",
    )
    seed: int = option(0, "seed for dummy weights and the default sampling generator")
    disable_cuda_graph: bool = option(
        False, "run decode steps eagerly instead of replaying CUDA graphs"
    )
    cuda_graph_max_bs: int = option(
        160, "largest decode batch replayed from a CUDA graph (larger ones run eagerly)"
    )
    context_length: int | None = option(
        None,
        "max tokens per sequence, prompt + output (default: the model's "
        "max_position_embeddings; a larger value is refused)",
    )
    tokenizer_path: str | None = option(None, "HF tokenizer folder (default: the model folder)")
    trust_remote_code: bool = option(
        False,
        "accepted for SGLang/vLLM compatibility; a no-op (radixgen runs "
        "no model code from the model folder)",
    )
    weight_canary_prompts: str = option(
        "The capital of France is;;def fibonacci(n):;;Once upon a time, there was",
        "probe prompts (';;'-separated) a new weight version runs before it may serve: its "
        "logits must be finite and its mean token entropy within --weight-canary-entropy-band "
        "of the serving version's ('' skips the canary)",
    )
    weight_standby: str = option(
        "auto",
        "where a new weight version is loaded while the serving one runs: 'device' (a pointer "
        "switch; needs free GPU memory for a second copy), 'pinned_host' (the switch copies it "
        "in and the old one out), 'auto': device when measured free memory allows",
        ("auto", "device", "pinned_host"),
    )
    weight_canary_entropy_band: float = option(
        2.0,
        "largest difference (nats) between a new weight version's mean token entropy on the probe "
        "prompts and the serving version's",
    )

    def __post_init__(self) -> None:
        if self.context_length is not None and self.context_length < 2:
            raise ValueError("context_length must be >= 2")
        if self.mla_expand_threshold is not None and not self.mla_expand_threshold >= 0:
            raise ValueError("mla_expand_threshold must be >= 0")
        if not self.weight_canary_entropy_band >= 0:
            raise ValueError("weight_canary_entropy_band must be >= 0")


@dataclass(frozen=True)
class ParallelConfig:
    """Tensor and expert parallelism over torch.distributed (docs/parallelism.md)."""

    tp_size: int = option(
        1,
        "tensor-parallel ranks in all (one scheduler process and one device each); attention "
        "heads, MLP width and vocabulary are split over them",
    )
    ep_size: int = option(
        1,
        "expert-parallel degree of MoE layers (divides --tp-size): the experts are split over "
        "this many rank groups; 1 splits every expert's width over the tp ranks instead",
    )
    nnodes: int = option(1, "machines the tp ranks span (--tp-size / --nnodes ranks each)")
    node_rank: int = option(
        0, "this machine's index, 0 .. nnodes - 1; only node 0 serves HTTP and schedules"
    )
    dist_init_addr: str | None = option(
        None,
        "host:port of node 0's torch.distributed rendezvous (tcp); needed with --nnodes > 1 "
        "(default: a free loopback port)",
    )
    dist_timeout: float = option(
        600.0, "seconds a collective (gloo/nccl) may wait before the ranks give up"
    )

    def __post_init__(self) -> None:
        for name in ("tp_size", "ep_size", "nnodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.tp_size % self.ep_size:
            raise ValueError(f"--ep-size {self.ep_size} must divide --tp-size {self.tp_size}")
        if self.tp_size % self.nnodes:
            raise ValueError(f"--nnodes {self.nnodes} must divide --tp-size {self.tp_size}")
        if not 0 <= self.node_rank < self.nnodes:
            raise ValueError(f"--node-rank {self.node_rank} must be in 0 .. {self.nnodes - 1}")
        if self.nnodes > 1 and not self.dist_init_addr:
            raise ValueError("--nnodes > 1 needs --dist-init-addr host:port (node 0's address)")
        if self.dist_init_addr is not None:
            host, sep, port = self.dist_init_addr.rpartition(":")
            if not (sep and host and port.isdigit() and 0 < int(port) < 65536):
                raise ValueError(f"--dist-init-addr must be host:port, got {self.dist_init_addr!r}")
        if not self.dist_timeout > 0:
            raise ValueError("dist_timeout must be > 0")

    @property
    def ranks_per_node(self) -> int:
        return self.tp_size // self.nnodes


KV_CHOICES = ("auto", "bf16", "fp16", "fp32", "fp8_e4m3", "nvfp4")


@dataclass(frozen=True)
class CacheConfig:
    max_total_tokens: int | None = option(
        None,
        "KV pool capacity in tokens (default on a GPU: from --mem-fraction-static; on the CPU: 4 "
        "x the context length, capped by --mem-fraction-static of total RAM)",
    )
    mem_fraction_static: float = option(
        0.2, "fraction of free GPU memory (CPU: of total RAM, as a cap) for weights + KV pool"
    )
    page_size: int = option(1, "tokens per radix-cache page")
    kv_cache_dtype: str = option(
        "auto",
        "KV precision of both pools ('auto': the model dtype, the fastest on a GPU too: fp8_e4m3 "
        "and the fp8 prefix + nvfp4 branch pair hold 2x and ~3x the tokens, but were measured "
        "slower than bf16, see docs/BENCHMARKS.md); fp8_e4m3 and nvfp4 quantize on write",
        KV_CHOICES,
    )
    kv_prefix_dtype: str | None = option(
        None, "KV precision of prompt tokens (default: from --kv-cache-dtype)", KV_CHOICES
    )
    kv_branch_dtype: str | None = option(
        None, "KV precision of generated tokens (default: from --kv-cache-dtype)", KV_CHOICES
    )
    kv_branch_fraction: float = option(
        0.5, "share of the KV byte budget for the branch pool when the two precisions differ"
    )
    kv_branch_window: str = option(
        "4,16",
        "when the two precisions differ: 'SINK,RECENT' keeps each request's first SINK and "
        "newest RECENT generated tokens in the prefix precision (older ones move to the branch "
        "pool); 'none' writes every generated token to the branch pool",
    )
    kv_rotation: str = option(
        "auto",
        "multiply q and k by a Hadamard matrix after RoPE, so quantized keys keep "
        "q.k more exactly ('auto': when a pool is fp8_e4m3 or nvfp4)",
        ("auto", "on", "off"),
    )
    disable_radix_cache: bool = option(False, "turn the radix prefix cache off")
    kv_events_config: str | None = option(
        None,
        "JSON (vLLM's and SGLang's flag): publish the radix cache's stored and evicted blocks as "
        'KV events over ZMQ, e.g. \'{"enable_kv_cache_events": true, "endpoint": '
        '"tcp://*:5557", "topic": "kv"}\'; keys: enable_kv_cache_events, publisher '
        "(zmq|null), endpoint, replay_endpoint, buffer_steps, hwm, max_queue_size, topic, and "
        "block_size (tokens per reported block, a multiple of --page-size, default 16)",
    )

    def __post_init__(self) -> None:
        self.branch_window  # noqa: B018 (validates the flag)
        if not self.kv_events_config:
            return
        events = KVEventsConfig.from_json(self.kv_events_config)
        if events.enable_kv_cache_events and self.disable_radix_cache:
            raise ValueError("kv_events_config reports the radix cache: drop --disable-radix-cache")
        if events.block_size % self.page_size:
            raise ValueError(
                f"kv_events_config block_size ({events.block_size}) must be a multiple of "
                f"page_size ({self.page_size})"
            )

    @property
    def kv_events(self) -> "KVEventsConfig | None":
        """--kv-events-config parsed; None unless events are enabled with a publisher."""
        if not self.kv_events_config:
            return None
        events = KVEventsConfig.from_json(self.kv_events_config)
        return events if events.enable_kv_cache_events and events.publisher != "null" else None

    @property
    def branch_window(self) -> tuple[int, int] | None:
        """--kv-branch-window as (sink, recent), None for 'none'."""
        if self.kv_branch_window.strip().lower() == "none":
            return None
        try:
            sink, recent = (int(x) for x in self.kv_branch_window.split(","))
        except ValueError:
            raise ValueError(
                f"kv_branch_window must be 'SINK,RECENT' or 'none', got {self.kv_branch_window!r}"
            ) from None
        if sink < 0 or recent < 0:
            raise ValueError(f"kv_branch_window counts must be >= 0, got {self.kv_branch_window!r}")
        return sink, recent


@dataclass(frozen=True)
class KVEventsConfig:
    """vLLM's KVEventsConfig keys (same defaults), and `block_size`: tokens per reported block."""

    enable_kv_cache_events: bool = False
    publisher: str = "zmq"
    endpoint: str = "tcp://*:5557"  # bound when it has '*', '::' or is ipc/inproc; else connected
    replay_endpoint: str | None = None  # a ROUTER socket that resends batches from a seq number
    buffer_steps: int = 10_000  # batches kept for replay
    hwm: int = 100_000  # the PUB socket's high-water mark
    max_queue_size: int = 100_000  # batches waiting for the publisher thread
    topic: str = ""
    block_size: int = 16

    @classmethod
    def from_json(cls, text: str) -> "KVEventsConfig":
        """ValueError naming what is wrong (not JSON, an unknown key, a bad value)."""
        import json

        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"kv_events_config is not JSON: {exc}") from None
        if not isinstance(values, dict):
            raise ValueError("kv_events_config must be a JSON object")
        known = {f.name: type(f.default) for f in dataclasses.fields(cls)}
        known["replay_endpoint"] = (str, type(None))
        for key, value in values.items():
            if key not in known:
                raise ValueError(
                    f"kv_events_config: unknown key {key!r}; known: {', '.join(known)}"
                )
            if not isinstance(value, known[key]) or (known[key] is int and isinstance(value, bool)):
                raise ValueError(f"kv_events_config: {key} has the wrong type ({value!r})")
        events = cls(**values)
        if events.publisher not in ("zmq", "null"):
            raise ValueError(
                f"kv_events_config: publisher must be 'zmq' or 'null', got {events.publisher!r}"
            )
        for key in ("buffer_steps", "hwm", "max_queue_size", "block_size"):
            if getattr(events, key) < 1:
                raise ValueError(f"kv_events_config: {key} must be >= 1")
        return events


@dataclass(frozen=True)
class SchedulerConfig:
    chunked_prefill_size: int | None = option(
        None, "max prompt tokens per prefill step (default 512 on CPU, 8192 on GPU; -1 disables)"
    )
    mixed_chunk_size: int | None = option(
        None,
        "max prompt tokens per step while requests are decoding, so a "
        "prefill chunk riding along with their decode step keeps it short "
        "(default 128 on CPU, the chunked prefill size on GPU)",
    )
    max_running_requests: int = option(256, "max requests decoding at once")
    max_prefill_tokens: int = option(16384, "max prompt tokens per step (caps the chunk sizes)")
    schedule_policy: str = option(
        "lpm", "queue order: lpm (longest cached prefix first, with aging) or fcfs", ("lpm", "fcfs")
    )
    new_token_ratio: float = option(
        0.4, "fraction of each request's remaining max_new_tokens reserved at admission"
    )
    aging_seconds: float = option(
        5.0, "a request waiting longer than this goes ahead of better-cached ones"
    )
    in_batch_prefix_tokens: int | None = option(
        None,
        "a waiting request sharing at least this many uncached prompt "
        "tokens with one admitted this step waits a step to hit the cache "
        "(default 8 on CPU, where prefill is compute-bound, 32 on GPU)",
    )
    max_num_partial_prefills: int = option(
        4,
        "max prompts prefilled in part at once (mid-prefill after a step), "
        "each with its own share of the step's token budget; a short prompt "
        "prefilled whole in one step does not count. 1: one chunked prompt at a "
        "time, the others wait for its last chunk",
    )
    max_long_partial_prefills: int = option(
        2,
        "max long prompts (see --long-prefill-token-threshold) prefilled at "
        "once; more wait while short prompts go ahead. 2, so a long prompt "
        "arriving behind a much longer one is not blocked by it (the one with "
        "fewer tokens left goes first)",
    )
    long_prefill_token_threshold: int | None = option(
        None,
        "a prompt with more uncached tokens than this is long: "
        "it gets at most this many tokens a step and keeps at most "
        "half the step's budget from short prompts, which are "
        "prefilled in the step after they arrive (default: the "
        "chunked prefill size / 2 on CPU = 256, where smaller chunks "
        "cost little: 215 vs 220 tok/s at 256 vs 512; / 4 on GPU = "
        "2048)",
    )
    max_step_ms: float | None = option(
        None,
        "step-time target: the long prompts' tokens a step are steered by the "
        "measured step times so a step takes about this long, so decode steps and "
        "new prompts wait about one step at most; 0: off (default: off on CPU, "
        "where chunks are already short and step times noisy; 50 on GPU, so a "
        "short request's TTFT is the step in flight plus its own: about 100 ms)",
    )
    warmup: bool | None = option(
        None,
        "before reporting ready, run a few requests of each step kind (chunked "
        "and mixed prefill, a prefix hit, greedy, sampled and logprob decoding) so the first "
        "request pays no kernel compilation and the step-time target's cost model has "
        "learnt the device; nothing of it stays in the cache or the counters (default: on "
        "a GPU, off on CPU)",
    )
    grammar_whitespace: str = option(
        "compact", "whitespace JSON-schema outputs may use", ("compact", "flexible")
    )
    disable_jump_forward: bool = option(False, "decode grammar-forced tokens one step at a time")

    def __post_init__(self) -> None:
        if self.in_batch_prefix_tokens is not None and self.in_batch_prefix_tokens < 1:
            raise ValueError("in_batch_prefix_tokens must be >= 1")
        if self.mixed_chunk_size is not None and self.mixed_chunk_size < 1:
            raise ValueError("mixed_chunk_size must be >= 1")
        if self.max_prefill_tokens < 1:
            raise ValueError("max_prefill_tokens must be >= 1")
        if self.max_num_partial_prefills < 1 or self.max_long_partial_prefills < 1:
            raise ValueError("max_num_partial_prefills and max_long_partial_prefills must be >= 1")
        if self.max_long_partial_prefills > self.max_num_partial_prefills:
            raise ValueError(
                f"max_long_partial_prefills ({self.max_long_partial_prefills}) must be <= "
                f"max_num_partial_prefills ({self.max_num_partial_prefills})"
            )
        if self.long_prefill_token_threshold is not None and self.long_prefill_token_threshold < 1:
            raise ValueError("long_prefill_token_threshold must be >= 1")
        if self.max_step_ms is not None and not self.max_step_ms >= 0:
            raise ValueError("max_step_ms must be >= 0 (0 turns the step-time target off)")


SPECULATIVE_ALGORITHMS = ("none", "radix", "draft", "radix+draft")


@dataclass(frozen=True)
class SpeculativeConfig:
    speculative_algorithm: str = option(
        "none",
        "draft tokens from the radix tree's n-grams ('radix'), a draft model "
        "('draft') or both, verified by the target in one forward",
        SPECULATIVE_ALGORITHMS,
    )
    speculative_draft_model_path: str | None = option(
        None, "HF folder of the draft model (same tokenizer); needed by 'draft' and 'radix+draft'"
    )
    speculative_num_draft_tokens: int = option(
        12,
        "max draft tokens (tree nodes) verified per request and step (fewer while its drafts are "
        "rejected)",
    )
    speculative_depth: int = option(12, "max draft tree depth (tokens ahead)")
    speculative_draft_max_total_tokens: int = option(
        8192, "KV capacity of the draft model's own prefix cache"
    )

    def __post_init__(self) -> None:
        if self.speculative_algorithm not in SPECULATIVE_ALGORITHMS:
            raise ValueError(f"speculative_algorithm must be one of {SPECULATIVE_ALGORITHMS}")
        if self.speculative_num_draft_tokens < 1 or self.speculative_depth < 1:
            raise ValueError("speculative_num_draft_tokens and speculative_depth must be >= 1")
        if "draft" in self.speculative_algorithm and not self.speculative_draft_model_path:
            raise ValueError(
                f"--speculative-algorithm {self.speculative_algorithm} needs "
                "--speculative-draft-model-path"
            )

    @property
    def enabled(self) -> bool:
        return self.speculative_algorithm != "none"


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class LoraConfig:
    enable_lora: bool = option(False, "serve LoRA adapters (PEFT format) beside the base model")
    lora_paths: tuple[str, ...] = option(
        (),
        "adapters loaded at startup, each NAME=PATH (a PEFT folder) or a PATH (named by it); "
        "Engine(lora_paths=...) also takes a {name: path} dict",
    )
    max_loras_per_batch: int = option(
        8,
        "adapter slots of the pool: distinct adapters one batch may use (the base model "
        "takes none)",
    )
    max_lora_rank: int | None = option(
        None, "largest adapter rank the pool holds (default: the largest of --lora-paths, else 16)"
    )
    lora_target_modules: tuple[str, ...] = option(
        (),
        "projections the pool holds adapters for, of " + ", ".join(LORA_TARGETS) + " or 'all' "
        "(default: all)",
    )

    def __post_init__(self) -> None:
        paths = self.lora_paths
        if isinstance(paths, dict):
            paths = tuple(f"{name}={path}" for name, path in paths.items())
        elif isinstance(paths, str):
            paths = (paths,)
        object.__setattr__(self, "lora_paths", tuple(paths))
        targets = self.lora_target_modules
        targets = (targets,) if isinstance(targets, str) else tuple(targets)
        if "all" in targets:
            targets = LORA_TARGETS
        unknown = [t for t in targets if t not in LORA_TARGETS]
        if unknown:
            raise ValueError(f"lora_target_modules: {unknown} not among {', '.join(LORA_TARGETS)}")
        object.__setattr__(self, "lora_target_modules", targets)
        if self.max_loras_per_batch < 1:
            raise ValueError("max_loras_per_batch must be >= 1")
        if self.max_lora_rank is not None and self.max_lora_rank < 1:
            raise ValueError("max_lora_rank must be >= 1")
        if (self.lora_paths or self.lora_target_modules) and not self.enable_lora:
            raise ValueError("--lora-paths and --lora-target-modules need --enable-lora")

    @property
    def named_paths(self) -> dict[str, str]:
        """--lora-paths as {name: path}."""
        out = {}
        for entry in self.lora_paths:
            name, sep, path = entry.partition("=")
            out[name if sep else entry] = path if sep else entry
        return out


@dataclass(frozen=True)
class EngineConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    speculative: SpeculativeConfig = field(default_factory=SpeculativeConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> "EngineConfig":
        """Flat keyword arguments (`dtype=`, `max_total_tokens=`...) to nested configs."""
        parts: dict[str, dict[str, Any]] = {part: {} for part in _SUBCONFIGS}
        owners = {
            f.name: part for part, sub in _SUBCONFIGS.items() for f in dataclasses.fields(sub)
        }
        for key, value in kwargs.items():
            if key not in owners:
                raise ValueError(f"unknown engine option: {key}")
            parts[owners[key]][key] = value
        return cls(**{part: _SUBCONFIGS[part](**vals) for part, vals in parts.items()})


@dataclass(frozen=True)
class ServerConfig:
    host: str = option("127.0.0.1", "address the HTTP server listens on")
    port: int = option(30000, "port the HTTP server listens on")
    api_key: str | None = option(
        None, "if set, every route but /health needs 'Authorization: Bearer <key>'"
    )
    served_model_name: str | None = option(
        None, "model name in the OpenAI API (default: the model folder's name)"
    )
    log_level: str = option(
        "info", "log level of every server process", ("debug", "info", "warning", "error")
    )
    shutdown_timeout: float = option(
        30.0,
        "on SIGTERM: seconds in-flight requests may take to finish (new ones "
        "get 503 meanwhile); streams still running then end with an error event",
    )
    dp_size: int = option(
        1,
        "data-parallel replicas: N > 1 starts N servers on ports port+1..port+N (loopback, one "
        "GPU each when there are GPUs) behind sglang-router on --host:--port, with its "
        "cache-aware policy (pip install sglang-router); the router's Prometheus metrics on "
        "port+N+1",
    )
    enable_metrics: bool = option(False, "accepted for SGLang compatibility: /metrics is always on")
    max_request_bytes: int = option(
        8 * 1024 * 1024, "largest request body accepted; a larger one gets 413 before it is read"
    )
    otlp_traces_endpoint: str | None = option(
        None,
        "OTLP HTTP/protobuf collector that receives one trace span per request, e.g. "
        "http://localhost:4318 (path /v1/traces when none is given); off when unset. "
        "--oltp-traces-endpoint (SGLang's spelling) is the same flag",
    )

    def __post_init__(self) -> None:
        if self.shutdown_timeout < 0:
            raise ValueError("shutdown_timeout must be >= 0")
        if self.dp_size < 1:
            raise ValueError("dp_size must be >= 1")
        self.otlp_traces_url  # noqa: B018 (validates the flag)

    @property
    def otlp_traces_url(self) -> str | None:
        """--otlp-traces-endpoint as the exporter's URL: `host:port` gets http://, a URL
        without a path gets /v1/traces (the OTLP HTTP traces path)."""
        if not self.otlp_traces_endpoint:
            return None
        url = self.otlp_traces_endpoint.strip()
        url = url if "://" in url else f"http://{url}"
        scheme, _, rest = url.partition("://")
        host, _, path = rest.partition("/")
        if scheme not in ("http", "https") or not host:
            raise ValueError(
                "otlp_traces_endpoint must be an http(s) URL or host:port, got "
                f"{self.otlp_traces_endpoint!r}"
            )
        return url if path else f"{scheme}://{host}/v1/traces"


_SUBCONFIGS = {
    "model": ModelConfig,
    "cache": CacheConfig,
    "scheduler": SchedulerConfig,
    "speculative": SpeculativeConfig,
    "lora": LoraConfig,
    "parallel": ParallelConfig,
}


def add_arguments(parser: argparse.ArgumentParser, config_cls: type) -> None:
    """Add one `--flag-name` per field of a config dataclass."""
    hints = get_type_hints(config_cls)
    for f in dataclasses.fields(config_cls):
        flag = "--" + f.name.replace("_", "-")
        base = _base_type(hints[f.name])
        help_text = f"{f.metadata.get('help', '')} (default: {f.default})"
        if base is bool:
            parser.add_argument(flag, action="store_true", default=f.default, help=help_text)
        elif get_origin(base) is tuple:
            parser.add_argument(flag, nargs="+", type=str, default=f.default, help=help_text)
        else:
            parser.add_argument(
                flag,
                type=base,
                default=f.default,
                help=help_text,
                choices=f.metadata.get("choices"),
            )


def from_namespace(config_cls: type, namespace: argparse.Namespace) -> Any:
    """Build a config from parsed CLI args (fields missing from the namespace keep defaults)."""
    values = {
        f.name: getattr(namespace, f.name)
        for f in dataclasses.fields(config_cls)
        if hasattr(namespace, f.name)
    }
    return config_cls(**values)


def to_arguments(config: Any) -> list[str]:
    """The flags that rebuild `config` (a config dataclass) through `add_arguments`: one per
    field that differs from its default."""
    args: list[str] = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if value == f.default or value is None:
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            args += [flag] if value else []  # a store_true flag cannot say False
        else:
            args += [flag, str(value)]
    return args


def _base_type(hint: Any) -> type:
    if get_origin(hint) in (Union, getattr(__import__("types"), "UnionType", Union)):
        hint = next(a for a in get_args(hint) if a is not type(None))
    return hint
