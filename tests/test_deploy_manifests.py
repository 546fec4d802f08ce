"""deploy/kubernetes/: every manifest validates against the Kubernetes schema
(kubernetes-validate, strict: unknown fields fail); the ServiceMonitors (a Prometheus Operator
CRD, which has no schema there) and the kustomization are checked structurally; the probes,
grace period and HPA agree with the server's flags."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

kubernetes_validate = pytest.importorskip("kubernetes_validate")
yaml = pytest.importorskip("yaml")

MANIFESTS = Path(__file__).resolve().parent.parent / "deploy" / "kubernetes"
CRD_KINDS = {"ServiceMonitor"}  # monitoring.coreos.com: not in the Kubernetes schema
NOT_RESOURCES = {"kustomization.yaml"}  # kustomize's own config, not an API object


def documents() -> list[tuple[str, dict]]:
    docs = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        if path.name not in NOT_RESOURCES:
            docs += [(path.name, d) for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def by_kind(kind: str) -> list[dict]:
    return [d for _, d in documents() if d["kind"] == kind]


def test_every_manifest_validates_against_the_kubernetes_schema():
    version = kubernetes_validate.latest_version()
    checked = 0
    for name, doc in documents():
        if doc["kind"] in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{name} ({doc['kind']}): {exc.message}")
        checked += 1
    assert checked >= 10


def test_service_monitors_select_existing_services_and_ports():
    services = by_kind("Service")
    monitors = by_kind("ServiceMonitor")
    assert len(monitors) == 2
    for monitor in monitors:
        assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
        labels = monitor["spec"]["selector"]["matchLabels"]
        (service,) = [s for s in services if labels.items() <= s["metadata"]["labels"].items()]
        port_names = {p["name"] for p in service["spec"]["ports"]}
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint["port"] in port_names and endpoint["path"] == "/metrics"
            assert re.fullmatch(r"\d+s", endpoint["interval"])


def test_kustomization_lists_every_manifest():
    listed = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["resources"]
    on_disk = {p.name for p in MANIFESTS.glob("*.yaml")} - NOT_RESOURCES
    assert sorted(listed) == sorted(on_disk)


def _worker_container() -> dict:
    (deployment,) = [d for d in by_kind("Deployment") if d["metadata"]["name"] == "radixgen-worker"]
    return deployment, deployment["spec"]["template"]["spec"]["containers"][0]


def test_worker_probes_gpu_and_graceful_termination():
    deployment, container = _worker_container()
    assert container["readinessProbe"]["httpGet"]["path"] == "/health_generate"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    flags = dict(a.split("=", 1) for a in container["args"] if a.startswith("--"))
    pre_stop = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    # the drain (--shutdown-timeout) and the preStop sleep end before the SIGKILL
    assert float(flags["--shutdown-timeout"]) + pre_stop < grace
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert int(flags["--port"]) == ports["http"]


def test_hpa_scales_the_workers_on_the_adapter_metric():
    (hpa,) = by_kind("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "radixgen-worker"
    (metric,) = hpa["spec"]["metrics"]
    (config_map,) = by_kind("ConfigMap")
    (rule,) = yaml.safe_load(config_map["data"]["rules.yaml"])["rules"]
    series = re.match(r"'?([a-z_:]+)\{", rule["seriesQuery"]).group(1)
    exposed = re.sub(rule["name"]["matches"], rule["name"]["as"].replace("${1}", r"\1"), series)
    assert metric["pods"]["metric"]["name"] == exposed == "radixgen_num_queue_reqs"


def referenced_metrics() -> set[str]:
    """Every radixgen:* Prometheus series the manifests name."""
    text = "\n".join(p.read_text() for p in MANIFESTS.glob("*.yaml"))
    return set(re.findall(r"radixgen:[a-z_]+", text))
