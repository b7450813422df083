"""The service images as their Dockerfiles describe them (tests/test_containers.py builds and
runs them): each copies exactly the sources of its package and of the repo's packages it depends
on, runs as the chart's non-root user, exposes the ports its settings default to, checks its own
health, and the router's leaves torch out."""

import ast
import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, metadata, packages_distributions, requires

import pytest
import yaml
from packaging.requirements import Requirement

from sstools.devstack.paths import REPO_ROOT
from sstools.devstack.stack import SETTINGS

# Where each of the repo's own packages lives: what an image copies to build it.
LOCAL_PACKAGES = {
    "sstools-protos": "protos",
    "sstools-common": "libs/common",
    **{f"sstools-{name}": f"services/{name}" for name in SETTINGS},
}


def _chart_user() -> str:
    """uid:gid the chart's pod security context runs every container as."""
    context = yaml.safe_load((REPO_ROOT / "helm" / "sstools-agent" / "values.yaml").read_text())[
        "podSecurityContext"
    ]
    return f"{context['runAsUser']}:{context['runAsGroup']}"


_CHART_USER = _chart_user()


def _local_sources(package: str) -> set[str]:
    """The folders of ``package`` and of every repo package it needs, as installed (its
    declared dependencies, followed through; extras it is not asked for left out)."""
    needed, pending = set(), [package]
    while pending:
        name = pending.pop()
        if name in needed:
            continue
        needed.add(name)
        for line in requires(name) or []:
            requirement = Requirement(line)
            if requirement.name in LOCAL_PACKAGES and not (
                requirement.marker and "extra" in str(requirement.marker)
            ):
                pending.append(requirement.name)
    return {LOCAL_PACKAGES[name] for name in needed}


def _final_stage(name: str) -> list[str]:
    text = (REPO_ROOT / "services" / name / "Dockerfile").read_text()
    joined = re.sub(r"\\\n\s*", " ", text)  # continuation lines joined
    stages = re.split(r"^FROM ", joined, flags=re.M)
    return [line.strip() for line in stages[-1].splitlines() if line.strip() and not line.startswith("#")]


def _all_lines(name: str) -> list[str]:
    return [line.strip() for line in (REPO_ROOT / "services" / name / "Dockerfile").read_text().splitlines()]


@pytest.mark.parametrize("name", list(SETTINGS))
def test_the_image_copies_only_its_service_and_what_it_shares(name: str) -> None:
    copied = {
        line.split()[1] for line in _all_lines(name) if line.startswith("COPY ") and "--from" not in line
    }
    assert copied == {"requirements.lock"} | _local_sources(f"sstools-{name}")
    assert _local_sources(f"sstools-{name}") == {"protos", "libs/common", f"services/{name}"}
    ignored = {
        line.strip()
        for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert not copied & ignored  # what the image needs reaches the build context


@pytest.mark.parametrize("name", list(SETTINGS))
def test_the_image_runs_as_non_root_on_its_settings_ports_with_a_health_check(name: str) -> None:
    final = _final_stage(name)
    assert final[0].startswith("python:3.11-slim")
    users = [line.split()[1] for line in final if line.startswith("USER ")]
    assert users == [_CHART_USER]
    settings = SETTINGS[name]
    prefix = name.upper()
    defaults = {
        field: info.default for field, info in settings.model_fields.items() if field.endswith("_port")
    }
    exposed = {int(port) for line in final if line.startswith("EXPOSE ") for port in line.split()[1:]}
    assert exposed == set(defaults.values())
    assert f"ENV {prefix}_HOST=0.0.0.0" in final  # a pod's listeners face the pod network
    (check,) = [line for line in final if line.startswith("HEALTHCHECK ")]
    assert f"'{prefix}_METRICS_PORT', '{defaults['metrics_port']}'" in check
    assert "/healthz" in check


def test_the_router_image_needs_no_torch() -> None:
    """torch and sentence-transformers come only with the `st` extra, which the image never asks for."""
    heavy = [
        requirement
        for requirement in requires("sstools-router") or []
        if re.match(r"(torch|sentence-transformers)\b", requirement)
    ]
    assert heavy  # they exist, as an extra
    assert all(requirement.endswith("extra == 'st'") for requirement in heavy), heavy
    built = [line for line in _all_lines("router") if "pip wheel" in line]
    assert built
    assert all("./services/router" in line and "services/router[" not in line for line in built)


def test_the_page_image_serves_the_built_page_as_non_root_with_a_health_check() -> None:
    lines = [line.strip() for line in (REPO_ROOT / "web" / "Dockerfile").read_text().splitlines()]
    assert "RUN npm ci --no-audit --no-fund" in lines  # exactly the lock's packages
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users == [_CHART_USER]
    assert "EXPOSE 8080" in lines
    assert any(line.startswith("HEALTHCHECK ") for line in lines)
    assert "healthz" in (REPO_ROOT / "web" / "Caddyfile").read_text()


def test_the_agent_runs_without_the_router_package() -> None:
    """The agent's image holds no router service: its in-process keyword tier is the shared
    library's. Imported with every `sstools.router` module but the protocol's stubs refused,
    the agent starts its app and routes a message without the service."""
    script = """
import importlib.abc, sys
class NoRouterService(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith("sstools.router.") and not name.startswith("sstools.router.v1"):
            raise ImportError(f"{name} is the router service's, not in the agent's image")
sys.meta_path.insert(0, NoRouterService())
import sstools.agent.main
from opentelemetry.sdk.trace import TracerProvider
from sstools.agent.clients.router import ToolRouter
from sstools.common.grpc_auth import FixedServiceToken
local = ToolRouter("127.0.0.1:9", 0.1, TracerProvider(), FixedServiceToken("unused"))._local
print(local.route("не делай бэкап, покажи дашборды").names)
"""
    routed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert routed.returncode == 0, routed.stderr[-3000:]
    assert routed.stdout.split("\n")[-2] == "['search_dashboards', 'show_capabilities']"


def _provided(package: str) -> set[str]:
    """Every distribution installing ``package`` brings — its declared dependencies, with the
    extras it asks for, followed through — or its own extras would (code behind an extra, such
    as the router's `st` backend, may import what that extra brings), normalised."""
    own_extras = frozenset(metadata(package).get_all("Provides-Extra") or [])
    provided, pending = set(), [(package, own_extras)]
    while pending:
        name, extras = pending.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if (key, extras) in provided:
            continue
        provided.add((key, extras))
        try:
            lines = requires(name) or []
        except PackageNotFoundError:
            continue  # a marker's dependency for another platform or Python
        for line in lines:
            requirement = Requirement(line)
            if requirement.marker and not any(
                requirement.marker.evaluate({"extra": extra}) for extra in [*extras, ""]
            ):
                continue
            pending.append((requirement.name, frozenset(requirement.extras)))
    return {key for key, _ in provided}


@pytest.mark.parametrize("package", list(LOCAL_PACKAGES))
def test_every_module_a_package_imports_is_one_it_declares(package: str) -> None:
    """An image installs a package's declared dependencies alone: an import that works in the
    shared .venv only because another package brought it would fail in the image (sstools-common
    imported `cryptography`, which only a service's other dependencies brought)."""
    distributions = packages_distributions()
    provided = _provided(package)
    undeclared = set()
    for path in (REPO_ROOT / LOCAL_PACKAGES[package] / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for top in {module.split(".")[0] for module in modules} - set(sys.stdlib_module_names):
                if top == "sstools":
                    continue
                owners = {re.sub(r"[-_.]+", "-", owner).lower() for owner in distributions.get(top, [top])}
                if not owners & provided:
                    undeclared.add(f"{top} ({path.relative_to(REPO_ROOT)}:{node.lineno})")
    assert sorted(undeclared) == []
