"""`radixgen` / `python -m radixgen` command line."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="radixgen")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("materialize-model", help="convert the embedded SmolLM2 GGUF into an HF folder and print its path")
    args = parser.parse_args(argv)
    if args.command == "materialize-model":
        from radixgen.runtime.model.embedded import default_model_path

        try:
            print(default_model_path())
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
