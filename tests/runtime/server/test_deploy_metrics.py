"""The Prometheus series the Kubernetes manifests (HPA, adapter rule) name exist in a live
server's /metrics."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.test_deploy_manifests import referenced_metrics


def test_metrics_the_manifests_name_are_exposed(client):
    resp = client.get("/metrics")
    assert resp.status_code == 200
    families = {f.name for f in text_string_to_metric_families(resp.text)}
    wanted = referenced_metrics()
    assert "radixgen:num_queue_reqs" in wanted
    assert wanted <= families, wanted - families
