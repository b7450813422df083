"""The chart's rendered manifests run by `podman kube play` on this one host: its Deployments and
its migration Job, from the built images, with their env, secret references, commands and
security contexts as rendered.

podman is not a cluster; what it does differently, and what this module does about it (each
checked with podman 4.3, ../shared/notes/containers.md):
- it skips Jobs: the Job's pod template runs as a Pod, to its end;
- it knows no hooks: ``helm test``'s Pods are played only when :meth:`Played.helm_test` is called,
  as ``helm test`` runs them after the install;
- a Secret in the YAML becomes a podman secret env ``secretKeyRef`` cannot read: the Secret is
  made with ``podman secret create`` instead, as JSON of base64 values;
- on the host's network it refuses ``containerPort``s ("PortMappings can only be used with Bridge
  or slirp4netns networking"): they are dropped, and the probes name their port by number;
- it runs no readiness or startup probe: the caller probes each service itself;
- emptyDirs become named volumes shared by every pod, left behind by ``podman kube down``: those
  the play made are removed after (a volume of the same name that was there before is left alone).
Everything else (Services, an HPA, policies, the ingress) podman skips, as a single host has none.
"""

import base64
import copy
import json
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sstools.devstack.containers import Container
from sstools.devstack.images import podman


def _numbered_ports(container: dict[str, Any]) -> None:
    """Drops the container's ports; its probes name them by number instead."""
    numbers = {port["name"]: port["containerPort"] for port in container.pop("ports", []) if "name" in port}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        action = container.get(probe, {}).get("httpGet")
        if action and isinstance(action["port"], str):
            action["port"] = numbers[action["port"]]


def is_helm_test(document: Mapping[str, Any]) -> bool:
    annotations: Mapping[str, str] = document.get("metadata", {}).get("annotations", {})
    return annotations.get("helm.sh/hook") == "test"


def pod_of(document: Mapping[str, Any]) -> dict[str, Any]:
    """What podman plays for a Deployment (itself), a Job (its pod template, as a Pod) or a Pod."""
    played = copy.deepcopy(dict(document))
    if played["kind"] == "Pod":
        spec = played["spec"]
    elif played["kind"] == "Job":
        template = played["spec"]["template"]
        played = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**template["metadata"], "name": played["metadata"]["name"]},
            "spec": template["spec"],
        }
        spec = played["spec"]
    else:
        spec = played["spec"]["template"]["spec"]
    if spec.get("hostNetwork"):
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            _numbered_ports(container)
    return played


def secret_file(values: Mapping[str, str], folder: Path) -> Path:
    """A podman secret's content that env ``secretKeyRef`` reads: ``{key: base64 of value}``."""
    path = folder / "secret.json"
    path.write_text(
        json.dumps({key: base64.b64encode(value.encode()).decode() for key, value in values.items()})
    )
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class TestRun:
    """One ``helm test`` Pod's run: its container's exit code and log."""

    name: str
    exit_code: int
    log: str


@dataclass(frozen=True)
class Played:
    """The pods podman started, by the name of the object they came from, and the release's
    ``helm test`` Pods, played on :meth:`helm_test`."""

    pods: Mapping[str, str]  # object name -> pod name
    tests: tuple[dict[str, Any], ...] = ()

    def containers(self, name: str) -> list[Container]:
        """The pod's own containers (not its infra container)."""
        listed = podman("ps", "--all", f"--filter=pod={self.pods[name]}", "--format=json")
        return [
            Container(entry["Names"][0])
            for entry in json.loads(listed.stdout or "[]")
            if not entry.get("IsInfra")
        ]

    def helm_test(self, within_seconds: float = 180) -> list[TestRun]:
        """What ``helm test`` does: each test Pod run to its end, its exit code and log kept,
        then taken down (a later call plays them anew)."""
        runs = []
        for test in self.tests:
            name = test["metadata"]["name"]
            with tempfile.TemporaryDirectory(prefix="sstools-kube-test-") as scratch:
                path = Path(scratch) / "test.yaml"
                path.write_text(yaml.safe_dump(test))
                try:
                    started = Played(_play(path))
                    ((container, code),) = wait_exited(started, name, within_seconds)
                    runs.append(TestRun(name, code, Container(container).logs()))
                finally:
                    podman("kube", "down", str(path), timeout=300)
        return runs


def _play(path: Path) -> dict[str, str]:
    played = podman("kube", "play", "--start", str(path), timeout=300)
    if played.returncode != 0:
        raise RuntimeError(f"podman kube play: {played.stdout}{played.stderr}")
    pods = {}
    for document in yaml.safe_load_all(path.read_text()):
        name = document["metadata"]["name"]
        # podman names a Deployment's pod <name>-pod, a Pod's pod after itself
        pods[name] = f"{name}-pod" if document["kind"] == "Deployment" else name
    return pods


def wait_exited(played: Played, name: str, within_seconds: float) -> list[tuple[str, int]]:
    """Waits for every container of the pod that ``name`` became to exit; their exit codes."""
    deadline = time.monotonic() + within_seconds
    while time.monotonic() < deadline:
        states = [(container, container.inspect()["State"]) for container in played.containers(name)]
        if states and all(state["Status"] == "exited" for _, state in states):
            return [(container.name, int(state["ExitCode"])) for container, state in states]
        time.sleep(1)
    raise TimeoutError(f"{name} still running after {within_seconds} s")


def _volumes(documents: list[dict[str, Any]]) -> set[str]:
    specs = [
        document["spec"]["template"]["spec"] if document["kind"] == "Deployment" else document["spec"]
        for document in documents
    ]
    return {volume["name"] for spec in specs for volume in spec.get("volumes", [])}


@contextmanager
def played(
    documents: list[dict[str, Any]], secret_name: str, secret_values: Mapping[str, str]
) -> Iterator[Played]:
    """``documents`` (``helm template``'s, parsed) played: the Secret made, the Job's pod started
    first and waited for (it must end with 0), then every Deployment. All of it is taken down,
    secret and volumes too, when the block ends."""
    jobs = [pod_of(document) for document in documents if document["kind"] == "Job"]
    deployments = [pod_of(document) for document in documents if document["kind"] == "Deployment"]
    tests = tuple(pod_of(document) for document in documents if is_helm_test(document))
    with tempfile.TemporaryDirectory(prefix="sstools-kube-") as scratch:
        folder = Path(scratch)
        files = []
        for index, group in enumerate((jobs, deployments)):
            path = folder / f"{index}.yaml"
            path.write_text(yaml.safe_dump_all(group))
            files.append(path)
        existing = set(podman("volume", "ls", "--quiet").stdout.split())
        podman("secret", "rm", secret_name)  # one a stopped run left
        created = podman("secret", "create", secret_name, str(secret_file(secret_values, folder)))
        if created.returncode != 0:
            raise RuntimeError(f"podman secret create: {created.stderr}")
        pods: dict[str, str] = {}
        try:
            pods.update(_play(files[0]))
            for job in jobs:
                name = job["metadata"]["name"]
                exits = wait_exited(Played(pods), name, within_seconds=300)
                if any(code != 0 for _, code in exits):
                    logs = "\n".join(Container(container).logs() for container, _ in exits)
                    raise RuntimeError(f"{name} failed: {exits}\n{logs}")
            pods.update(_play(files[1]))
            yield Played(pods, tests)
        finally:
            for path in reversed(files):
                podman("kube", "down", str(path), timeout=300)
            podman("secret", "rm", secret_name)
            for volume in sorted(_volumes([*jobs, *deployments, *tests]) - existing):
                podman("volume", "rm", "--force", volume)
