"""docs/configuration.md is what `make docs` renders from radixgen/config.py."""

import dataclasses

from radixgen.__main__ import SERVE_CONFIGS
from radixgen.config_docs import DOC_PATH, main, render


def test_committed_page_is_current():
    assert DOC_PATH.read_text() == render(), "docs/configuration.md is stale: run `make docs`"


def test_every_flag_is_documented_with_its_default():
    page = render()
    for config_cls in SERVE_CONFIGS:
        assert f"## {config_cls.__name__}" in page
        for f in dataclasses.fields(config_cls):
            flag = "--" + f.name.replace("_", "-")
            rows = [line for line in page.splitlines() if line.startswith(f"| `{flag}`")]
            assert len(rows) == 1, f"{flag}: {len(rows)} rows"
            assert (f"`{f.default}`" if f.default is not None else "none") in rows[0], flag


def test_check_mode_reports_a_stale_page(tmp_path):
    stale = tmp_path / "configuration.md"
    stale.write_text("old\n")
    assert main(["--check", "--output", str(stale)]) == 1
    assert main(["--output", str(stale)]) == 0
    assert main(["--check", "--output", str(stale)]) == 0
    assert stale.read_text() == render()
