"""The README's cluster install, run as written. Its marked shell block runs in bash, in a folder
that stands for a checkout (the chart linked in), with the variables it says the operator sets;
`kubectl` and `helm` there are this module's shims, which record what the steps ask a cluster
for (the Secret; the release, its values and its settings) and refuse anything else. What they
recorded is then checked as a cluster would take it (every key the pods read is in the Secret,
someone can sign in, ops has a Superset), rendered, and played by podman on this host
(``sstools.devstack.kubeplay``), with only what a single host adds: the host network and free
ports. A README step that is wrong makes the install fail here, not at an operator's.

    python -m sstools.devstack.install kubectl ...   (the shims; not for people)
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sstools.devstack.manifests import CHART, helm, render, value_arguments
from sstools.devstack.paths import REPO_ROOT

README = REPO_ROOT / "README.md"
# Each marks the fenced block that follows it.
STEPS_MARK = "<!-- install-steps: run as written by sstools.devstack.install -->"
VALUES_MARK = "<!-- install-values: my-values.yaml, read by sstools.devstack.install -->"
MY_VALUES = "my-values.yaml"
# The variables the README says the operator sets before the steps.
OPERATOR_VARIABLES = ("DATABASE_URL", "ADMIN_PASSWORD", "SUPERSET_PASSWORD")
_RECORD = "SSTOOLS_INSTALL_RECORD"
_FENCED = re.compile(r"```[a-z]*\n(.*?)```", re.DOTALL)


class InstallFailed(Exception):
    """A step of the documented install failed, or what it installs would not work."""


def marked_block(readme: str, mark: str) -> str:
    """The fenced block right after ``mark``."""
    at = readme.find(mark)
    if at < 0:
        raise InstallFailed(f"the README has no {mark!r}")
    found = _FENCED.search(readme, at + len(mark))
    if found is None or readme[at + len(mark) : found.start()].strip():
        raise InstallFailed(f"no fenced block right after {mark!r}")
    return found.group(1)


@dataclass(frozen=True)
class Release:
    """What `helm install` was asked for."""

    name: str
    chart: Path
    values_files: tuple[Path, ...]
    set_values: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class DocumentedInstall:
    """What the README's steps asked a cluster for."""

    secrets: Mapping[str, Mapping[str, str]]  # Secret name -> key -> value
    release: Release

    def rendered(self, extra_values: Sequence[Path] = ()) -> list[dict[str, Any]]:
        """``helm template`` of the release, with ``extra_values`` after the operator's."""
        release = self.release
        values = [*release.values_files, *extra_values]
        return render(release.chart, values, dict(release.set_values), release.name)

    def notes(self) -> str:
        """What `helm install` prints after installing: its NOTES (a client-side dry run)."""
        release = self.release
        arguments = value_arguments(release.values_files, dict(release.set_values))
        output = helm("install", release.name, str(release.chart), *arguments, "--dry-run=client")
        return output.split("NOTES:", 1)[1] if "NOTES:" in output else ""


def run_steps(folder: Path, variables: Mapping[str, str], readme: str | None = None) -> DocumentedInstall:
    """The README's steps run in ``folder`` (a stand-in checkout: the chart linked in, the
    README's my-values.yaml with ``environments`` as the Supersets), with ``variables`` set."""
    text = README.read_text() if readme is None else readme
    missing = [name for name in OPERATOR_VARIABLES if name not in variables]
    if missing:
        raise InstallFailed(f"the operator's variables are not all given: {missing}")
    (folder / "helm").symlink_to(CHART.parent, target_is_directory=True)
    shims = folder / "bin"
    shims.mkdir()
    for tool in ("kubectl", "helm"):
        shim = shims / tool
        shim.write_text(
            f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m sstools.devstack.install {tool} "$@"\n'
        )
        shim.chmod(0o755)
    record = folder / "recorded.json"
    record.write_text("{}")
    environment = {
        "PATH": f"{shims}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(folder),
        _RECORD: str(record),
        **variables,
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", marked_block(text, STEPS_MARK)],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise InstallFailed(f"a README step failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    recorded = json.loads(record.read_text())
    if "release" not in recorded:
        raise InstallFailed("the README's steps install no release (`helm install`)")
    release = recorded["release"]
    return DocumentedInstall(
        secrets=recorded.get("secrets", {}),
        release=Release(
            name=release["name"],
            chart=Path(release["chart"]),
            values_files=tuple(Path(path) for path in release["values_files"]),
            set_values=tuple((key, value) for key, value in release["set_values"]),
        ),
    )


def my_values(readme: str, environments: str | None) -> dict[str, Any]:
    """The README's my-values.yaml; with ``environments`` (ENVIRONMENTS' JSON) instead of its
    example Supersets, each keeping the example's password variable, as an operator edits it."""
    values: dict[str, Any] = yaml.safe_load(marked_block(readme, VALUES_MARK))
    if environments is None:
        return values
    password_env = values["ops"]["environments"][0]["password_env"]
    values["ops"]["environments"] = [
        {**entry, "password_env": password_env} for entry in json.loads(environments)
    ]
    return values


def what_would_not_work(install: DocumentedInstall, documents: Sequence[Mapping[str, Any]]) -> list[str]:
    """What a cluster would do with the rendered release that a person would not want: a pod
    that cannot start for a Secret key it lacks, no one who can sign in, no Superset to ask."""
    found = []
    admin_key = None
    for document in documents:
        if document["kind"] not in ("Deployment", "Job"):
            continue
        spec = document["spec"]["template"]["spec"]
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            for variable in container.get("env", []):
                reference = variable.get("valueFrom", {}).get("secretKeyRef")
                if reference is None:
                    continue
                held = install.secrets.get(reference["name"], {})
                if variable["name"] == "OPS_ADMIN_PASSWORD" and reference["key"] in held:
                    admin_key = reference["key"]
                if reference["key"] not in held and not reference.get("optional"):
                    found.append(
                        f"{document['metadata']['name']}: {variable['name']} needs key "
                        f"{reference['key']!r} of Secret {reference['name']!r}, which the steps do not make"
                    )
    ops_env = _ops_environment(documents)
    if admin_key is None and not ops_env.get("OPS_OIDC_ISSUER"):
        found.append("no one can sign in: the Secret holds no admin password and no single sign-on is set")
    if not json.loads(ops_env.get("ENVIRONMENTS") or "[]"):
        found.append("ops has no Superset: ENVIRONMENTS is empty")
    return sorted(set(found))


def _ops_environment(documents: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    (ops,) = [
        document
        for document in documents
        if document["kind"] == "Deployment"
        and document["metadata"]["labels"].get("app.kubernetes.io/component") == "ops"
    ]
    (container,) = ops["spec"]["template"]["spec"]["containers"]
    return {
        variable["name"]: variable["value"] for variable in container.get("env", []) if "value" in variable
    }


def _recorded(update: Mapping[str, Any]) -> None:
    path = Path(os.environ[_RECORD])
    recorded = json.loads(path.read_text())
    for key, value in update.items():
        recorded[key] = {**recorded.get(key, {}), **value} if key == "secrets" else value
    path.write_text(json.dumps(recorded))


def _kubectl(arguments: list[str]) -> None:
    """`kubectl create secret generic NAME --from-file=KEY=PATH --from-literal=KEY=VALUE ...`."""
    parser = argparse.ArgumentParser(prog="kubectl create secret generic", allow_abbrev=False)
    parser.add_argument("name")
    parser.add_argument("--from-file", action="append", default=[])
    parser.add_argument("--from-literal", action="append", default=[])
    parser.add_argument("--namespace", "-n")
    if arguments[:3] != ["create", "secret", "generic"]:
        raise SystemExit(f"the documented install runs no `kubectl {' '.join(arguments[:3])}`")
    given = parser.parse_args(arguments[3:])
    data: dict[str, str] = {}
    for pair in given.from_file:
        key, _, path = pair.partition("=")
        data[key] = Path(path).read_text()
    for pair in given.from_literal:
        key, _, value = pair.partition("=")
        data[key] = value
    _recorded({"secrets": {given.name: data}})


def _helm(arguments: list[str]) -> None:
    """`helm install RELEASE CHART [-f VALUES]... [--set KEY=VALUE]... [--namespace NS]`."""
    parser = argparse.ArgumentParser(prog="helm install", allow_abbrev=False)
    parser.add_argument("release")
    parser.add_argument("chart")
    parser.add_argument("-f", "--values", action="append", default=[])
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--namespace", "-n")
    parser.add_argument("--create-namespace", action="store_true")
    if arguments[:1] != ["install"]:
        raise SystemExit(f"the documented install runs no `helm {' '.join(arguments[:1])}`")
    given = parser.parse_args(arguments[1:])
    for path in [given.chart, *given.values]:
        if not Path(path).exists():
            raise SystemExit(f"helm install: {path} does not exist")
    _recorded(
        {
            "release": {
                "name": given.release,
                "chart": str(Path(given.chart).resolve()),
                "values_files": [str(Path(path).resolve()) for path in given.values],
                "set_values": [pair.split("=", 1) for pair in given.set],
            }
        }
    )


def main() -> None:
    tool, *arguments = sys.argv[1:]
    {"kubectl": _kubectl, "helm": _helm}[tool](arguments)


if __name__ == "__main__":
    main()
