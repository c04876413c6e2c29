"""The cluster recipes in infra/ are complete and secure by default: KubeRay manifests carry the
required fields, a valid `lmforge` entrypoint, token auth and Secrets on every Ray container; the
cluster launcher YAML passes Ray's own schema; the image installs every package; every script
keeps the dashboard on loopback unless told otherwise."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml
from source_tree import package_folders

from lmforge.pipeline.cli.main import _parser
from lmforge.pipeline.config_tree import compose

REPO = Path(__file__).resolve().parents[3]
K8S = REPO / "infra" / "k8s"
OVERRIDE = re.compile(r"^[+~]*[A-Za-z_][\w.]*=")
SECRET_ENV = re.compile(r"TOKEN|PASSWORD|SECRET|KEY", re.I)

_CONTAINER = {
    "type": "object",
    "required": ["name", "image"],
    "properties": {"name": {"type": "string"}, "image": {"type": "string", "minLength": 1}},
}
_POD = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "spec": {
            "type": "object",
            "required": ["containers"],
            "properties": {"containers": {"type": "array", "minItems": 1, "items": _CONTAINER}},
        }
    },
}
_RAY_START = {"type": "object", "additionalProperties": {"type": "string"}}
RAY_CLUSTER_SPEC = {
    "type": "object",
    "required": ["rayVersion", "headGroupSpec", "workerGroupSpecs"],
    "properties": {
        "rayVersion": {"type": "string", "pattern": r"^2\.\d+\.\d+$"},
        "headGroupSpec": {
            "type": "object",
            "required": ["rayStartParams", "template"],
            "properties": {"rayStartParams": _RAY_START, "template": _POD},
        },
        "workerGroupSpecs": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["groupName", "replicas", "minReplicas", "maxReplicas", "template"],
                "properties": {
                    "groupName": {"type": "string"},
                    "replicas": {"type": "integer", "minimum": 0},
                    "minReplicas": {"type": "integer", "minimum": 0},
                    "maxReplicas": {"type": "integer", "minimum": 1},
                    "rayStartParams": _RAY_START,
                    "template": _POD,
                },
            },
        },
    },
}
_RESOURCE = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {"metadata": {"type": "object", "required": ["name"]}},
}


def _manifest(name: str) -> dict:
    docs = [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]
    assert len(docs) == 1
    jsonschema.validate(docs[0], _RESOURCE)
    return docs[0]


def _cluster_specs() -> dict[str, dict]:
    return {
        "raycluster.yaml": _manifest("raycluster.yaml")["spec"],
        "rayjob.yaml": _manifest("rayjob.yaml")["spec"]["rayClusterSpec"],
    }


def _ray_containers(spec: dict) -> list[dict]:
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    return [c for g in groups for c in g["template"]["spec"]["containers"]]


def test_raycluster_and_rayjob_have_kuberays_required_fields():
    assert _manifest("raycluster.yaml")["apiVersion"] == "ray.io/v1"
    assert _manifest("raycluster.yaml")["kind"] == "RayCluster"
    job = _manifest("rayjob.yaml")
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob")
    assert job["spec"]["entrypoint"]
    for spec in _cluster_specs().values():
        jsonschema.validate(spec, RAY_CLUSTER_SPEC)
        for group in spec["workerGroupSpecs"]:
            assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]


def test_the_rayjob_entrypoint_is_a_valid_lmforge_command_on_the_shared_volume():
    job = _manifest("rayjob.yaml")["spec"]
    words = shlex.split(job["entrypoint"])
    prefix = ["python", "-m", "lmforge.pipeline.cli.main"]
    rest = words[3:] if words[:3] == prefix else words[1:]
    assert words[0] in ("lmforge", "python"), words
    overrides = [w for w in rest if OVERRIDE.match(w)]
    args = _parser().parse_args([w for w in rest if not OVERRIDE.match(w)])
    assert args.command in ("run", "rerun")
    assert args.ray_address == "auto"  # the driver attaches to the job's cluster
    config = compose(overrides)  # raises on an unknown key or bad value
    mounts = {
        m["mountPath"]
        for c in _ray_containers(job["rayClusterSpec"])
        for m in c.get("volumeMounts", [])
    }
    assert any(str(config["workdir"]).startswith(m + "/") for m in mounts), config["workdir"]


@pytest.mark.parametrize("name", ["raycluster.yaml", "rayjob.yaml"])
def test_every_ray_container_has_token_auth_and_secrets_from_a_secret(name):
    spec = _cluster_specs()[name]
    containers = _ray_containers(spec)
    if name == "rayjob.yaml":
        containers += _manifest(name)["spec"]["submitterPodTemplate"]["spec"]["containers"]
    for container in containers:
        env = {e["name"]: e for e in container["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token", container["name"]
        assert "secretKeyRef" in env["RAY_AUTH_TOKEN"]["valueFrom"]
        for var in env.values():
            if SECRET_ENV.search(var["name"]) and var["name"] != "RAY_AUTH_MODE":
                assert "value" not in var, f"{var['name']} is a literal in {name}"
    for container in _ray_containers(spec):
        env = {e["name"]: e for e in container["env"]}
        for var in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
            assert "secretKeyRef" in env[var]["valueFrom"], (name, container["name"], var)


@pytest.mark.parametrize("name", ["raycluster.yaml", "rayjob.yaml"])
def test_cpu_head_gpu_workers_shared_volume_and_no_public_service(name):
    spec = _cluster_specs()[name]
    head = spec["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"
    assert head.get("serviceType", "ClusterIP") == "ClusterIP"
    assert not any(
        "nvidia.com/gpu" in c.get("resources", {}).get("limits", {})
        for c in head["template"]["spec"]["containers"]
    )
    gpu_groups = [
        g
        for g in spec["workerGroupSpecs"]
        if all(
            "nvidia.com/gpu" in c["resources"]["limits"]
            for c in g["template"]["spec"]["containers"]
        )
    ]
    assert gpu_groups
    claim = _manifest("shared-volume.yaml")
    assert claim["kind"] == "PersistentVolumeClaim"
    assert "ReadWriteMany" in claim["spec"]["accessModes"]
    for group in [head, *spec["workerGroupSpecs"]]:
        pod = group["template"]["spec"]
        claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
        assert claim["metadata"]["name"] in claims
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert all(c["volumeMounts"] for c in pod["containers"])


def test_cluster_launcher_config_passes_rays_schema_with_secure_defaults():
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load((REPO / "infra" / "ray" / "cluster.yaml").read_text())
    validate_config(prepare_config(config))
    assert "--env RAY_AUTH_MODE=token" in config["docker"]["run_options"]
    head_start = " ".join(config["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head_start
    assert "--num-cpus=0" in head_start
    assert any("auth_token" in remote for remote in config["file_mounts"])


def test_the_image_installs_every_package_on_a_cuda_base_as_non_root():
    dockerfile = (REPO / "infra" / "docker" / "Dockerfile").read_text()
    assert re.search(r"^ARG CUDA_IMAGE=nvidia/cuda:\S+", dockerfile, re.M)
    assert re.search(r"^USER ray$", dockerfile, re.M)
    assert re.search(r"RAY_AUTH_MODE=token", dockerfile)
    folders = set(package_folders().values())
    copied = set(re.findall(r"^COPY --chown=\S+ (\w+) ", dockerfile, re.M))
    assert folders <= copied, f"the image misses {folders - copied}"
    lines = (REPO / "infra" / "docker" / "Dockerfile.dockerignore").read_text().splitlines()
    ignore = [line for line in lines if line and not line.startswith("#")]
    assert ignore[0] == "**" and all(f"!{f}/" in ignore for f in folders)


def test_every_infra_script_parses_and_the_local_ones_bind_loopback():
    scripts = sorted((REPO / "infra").rglob("*.sh"))
    assert scripts
    for script in scripts:
        subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)
    cluster = (REPO / "infra" / "local" / "netns_cluster.sh").read_text()
    assert "DASHBOARD_HOST=${DASHBOARD_HOST:-127.0.0.1}" in cluster
    assert "export RAY_AUTH_MODE=token" in cluster
    mlflow = (REPO / "infra" / "mlflow" / "start_server.sh").read_text()
    assert "HOST=${HOST:-127.0.0.1}" in mlflow
    assert "--app-name basic-auth" in mlflow
