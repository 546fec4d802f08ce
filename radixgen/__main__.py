"""`radixgen` / `python -m radixgen` command line.

radixgen serve [--model-path DIR] [--port 30000] ...   start the HTTP server
radixgen materialize-model                            print the embedded model's folder
"""

from __future__ import annotations

import argparse
import gc
import sys

from radixgen.config import (
    CacheConfig,
    EngineConfig,
    LoraConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    ServerConfig,
    SpeculativeConfig,
    add_arguments,
    from_namespace,
)

SERVE_CONFIGS = (
    ModelConfig,
    CacheConfig,
    SchedulerConfig,
    SpeculativeConfig,
    LoraConfig,
    ParallelConfig,
    ServerConfig,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="radixgen")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "materialize-model",
        help="convert the embedded SmolLM2 GGUF into an HF folder and print its path",
    )
    serve = sub.add_parser("serve", help="start the HTTP server (native and OpenAI-compatible API)")
    for config_cls in SERVE_CONFIGS:
        group = serve.add_argument_group(config_cls.__name__)
        add_arguments(group, config_cls)
    serve.add_argument(
        "--oltp-traces-endpoint",
        dest="otlp_traces_endpoint",
        default=argparse.SUPPRESS,
        help="SGLang's spelling of --otlp-traces-endpoint",
    )
    return parser


def serve_configs(args: argparse.Namespace) -> tuple[EngineConfig, ServerConfig]:
    """The engine and server configs of parsed `serve` arguments."""
    engine = EngineConfig(
        model=from_namespace(ModelConfig, args),
        cache=from_namespace(CacheConfig, args),
        scheduler=from_namespace(SchedulerConfig, args),
        speculative=from_namespace(SpeculativeConfig, args),
        lora=from_namespace(LoraConfig, args),
        parallel=from_namespace(ParallelConfig, args),
    )
    return engine, from_namespace(ServerConfig, args)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        from radixgen.runtime.server import launch_server

        try:
            configs = serve_configs(args)
        except ValueError as exc:  # flags that are fine alone but not together
            parser.error(str(exc))
        code = launch_server(*configs)
        # every child is reaped and every socket closed: what is left dies with the process, so
        # the interpreter's final collection over it (seconds on a busy CPU) is skipped
        gc.freeze()
        return code
    from radixgen.runtime.model.embedded import default_model_path

    try:
        print(default_model_path())
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
