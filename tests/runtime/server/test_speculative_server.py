"""A server with `--speculative-algorithm radix` on a tiny dummy-weight model: outputs equal a
server without it, and the speculation figures reach meta_info and /metrics through the
scheduler, detokenizer and main processes."""

import pytest

from tests.runtime.server.conftest import ServerProcess

IDS = [[7, 8, 9, 10] * 6, [300, 301, 302, 300, 301, 302, 300]]
PARAMS = {"max_new_tokens": 12, "temperature": 0, "ignore_eos": True}


@pytest.fixture(scope="module")
def servers(tiny_model_path, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("spec-server")
    common = ("--load-format", "dummy", "--max-total-tokens", "1024")
    plain = ServerProcess(tiny_model_path, log_dir, *common)
    spec = ServerProcess(tiny_model_path, log_dir, *common, "--speculative-algorithm", "radix")
    try:
        yield plain.wait_healthy(), spec.wait_healthy()
    finally:
        plain.stop()
        spec.stop()


def _generate(server):
    with server.client(timeout=120) as c:
        resp = c.post("/generate", json={"input_ids": IDS, "sampling_params": PARAMS})
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_speculation_figures_reach_meta_info_and_metrics(servers):
    plain, spec = servers
    want = _generate(plain)
    for _ in range(2):  # the second run drafts from the first one's cached outputs
        got = _generate(spec)
        assert [o["output_ids"] for o in got] == [o["output_ids"] for o in want]
    metas = [o["meta_info"] for o in got]
    assert all(m["spec_verify_ct"] > 0 and m["spec_accept_length"] >= 1 for m in metas), metas
    assert "spec_verify_ct" not in want[0]["meta_info"]
    with spec.client() as c:
        text = c.get("/metrics").text
        info = c.get("/get_server_info").json()
    assert "radixgen:spec_accept_length" in text and 'position="1"' in text
    stats = info["scheduler"]
    assert stats["spec_verify_steps"] > 0 and stats["spec_algorithm"] == "radix"
    assert info["engine_config"]["speculative"]["speculative_algorithm"] == "radix"
