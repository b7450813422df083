"""What `make run` gives each of its processes, taken from the stack's own functions without
starting it: a service exactly the variables its settings class reads (and the operating
system's), never a secret it does not read; the page's Caddy what its Caddyfile reads; Prometheus
nothing of the project's. And each local Superset signs in at the provider with a client secret
of its own."""

import re
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sstools.common.settings import environment_variables
from sstools.devstack import oidc, stack
from sstools.devstack.demo import PASSWORD_ENV, environments
from sstools.devstack.monitoring import LocalPrometheus
from sstools.devstack.paths import CADDYFILE, VENV_BIN
from sstools.devstack.stack import (
    SERVICE_RUNTIME_PREFIXES,
    SETTINGS,
    SHARED_SUPERSET_SECRET,
    StackProcess,
    is_os_variable,
    proxy_environment,
    single_sign_on,
    stack_configuration,
    stack_processes,
    superset_secret_variable,
)
from sstools.devstack.superset import Instance

PAGE_URL = "http://127.0.0.1:8080"
SUPERSET_PORTS = {"dev": 8088, "prod": 8089}
# Variables a developer's shell may hold: one a setting of the router's alone, an LLM key (agent
# and ops), a secret of something else entirely, and the operating system's own.
SHELL = {
    "ROUTER_EMBEDDING_TOP_K": "5",
    "LLM_API_KEY": "sk-llm-key",
    "CLOUD_ACCESS_SECRET": "not-the-stacks",
    "LC_ALL": "C.UTF-8",
    "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=laptop",
}
# Every secret the stack holds, and the services whose settings read it: no other process may
# see it. The Superset admin's password reaches ops through the variable ENVIRONMENTS names.
SECRET_READERS = {
    "JWT_PRIVATE_KEY": {"ops"},
    "CONFIRMATION_SECRET": {"agent", "ops"},
    "OPS_ADMIN_PASSWORD": {"ops"},
    "OPS_SERVICE_CLIENTS": {"ops"},
    "OPS_OIDC_CLIENT_SECRET": {"ops"},
    PASSWORD_ENV: {"ops"},
    "AGENT_OPS_CLIENT_SECRET": {"agent"},
    "DATABASE_URL": {"agent", "convo", "ops"},
    "LLM_API_KEY": {"agent", "ops"},
    "CLOUD_ACCESS_SECRET": set(),
}


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> list[oidc.Client]:
    """The local sign-in provider, not started: the clients the stack registers there."""
    registered: list[oidc.Client] = []

    @contextmanager
    def running(
        folder: Path, port: int, clients: Iterable[oidc.Client], *_: Any
    ) -> Iterator[oidc.RunningProvider]:
        registered.extend(clients)
        yield oidc.RunningProvider(f"http://127.0.0.1:{port}", folder / "people.json", folder / "oidc.log")

    monkeypatch.setattr(oidc, "running", running)
    for variable in ("OPS_OIDC_ISSUER", stack.LOCAL_SSO_SWITCH, "OIDC_AGENT_SECRET", SHARED_SUPERSET_SECRET):
        monkeypatch.delenv(variable, raising=False)
    for env_id in SUPERSET_PORTS:
        monkeypatch.delenv(superset_secret_variable(env_id), raising=False)
    return registered


@pytest.fixture
def configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: list[oidc.Client]
) -> dict[str, str]:
    """What `make run` configures its processes with, as main() builds it: local Supersets and
    sign-in, secrets made for a checkout of its own, a shell with some variables of its own."""
    for variable in [*SECRET_READERS, "JWT_PUBLIC_KEYS", "ENVIRONMENTS"]:
        monkeypatch.delenv(variable, raising=False)
    for variable, value in SHELL.items():
        monkeypatch.setenv(variable, value)
    instances = {
        env_id: Instance(env_id, tmp_path / "superset" / env_id, port)
        for env_id, port in SUPERSET_PORTS.items()
    }
    supersets = {
        "ENVIRONMENTS": environments(instances, PASSWORD_ENV),
        PASSWORD_ENV: "superset-admin-password",
    }
    with single_sign_on(tmp_path, PAGE_URL, SUPERSET_PORTS) as sso:
        return stack_configuration(tmp_path, "postgresql://postgres@/sstools?host=/tmp", supersets, sso.ops)


@pytest.fixture
def processes(configuration: dict[str, str]) -> dict[str, StackProcess]:
    prometheus = LocalPrometheus("prometheus", "127.0.0.1", {"http_port": 9090}, "exec prometheus")
    return {process.name: process for process in stack_processes(configuration, prometheus)}


def _projects(environment: dict[str, str]) -> dict[str, str]:
    """The project's part of a process's environment: what is not the operating system's."""
    return {key: value for key, value in environment.items() if not is_os_variable(key)}


def _reads(name: str) -> set[str]:
    """What service ``name`` reads: its settings class's variables (ops: also the Superset
    password ENVIRONMENTS names)."""
    return set(environment_variables(SETTINGS[name])) | ({PASSWORD_ENV} if name == "ops" else set())


def test_the_stack_runs_each_service_the_web_proxy_and_prometheus(processes: dict[str, StackProcess]) -> None:
    assert set(processes) == {*SETTINGS, "web", "prometheus"}


def test_each_service_is_given_exactly_what_its_settings_read(
    configuration: dict[str, str], processes: dict[str, StackProcess]
) -> None:
    for name in SETTINGS:
        given = _projects(processes[name].environment)
        runtime = {key for key in given if key.startswith(SERVICE_RUNTIME_PREFIXES)}
        assert set(given) - runtime <= _reads(name), name  # nothing it does not read
        # everything it reads that the stack holds, as the stack holds it
        wanted = {key: configuration[key] for key in _reads(name) if key in configuration}
        assert {key: given[key] for key in set(given) - runtime} == wanted, name
        assert "OTEL_RESOURCE_ATTRIBUTES" in runtime, name  # the tracing SDK's own
    assert processes["router"].environment["ROUTER_EMBEDDING_TOP_K"] == "5"  # the shell's setting reaches it


def test_a_secret_reaches_only_the_services_whose_settings_read_it(
    configuration: dict[str, str], processes: dict[str, StackProcess], tmp_path: Path
) -> None:
    assert set(SECRET_READERS) <= set(configuration)  # the stack holds each of them
    holders = {
        secret: {name for name, process in processes.items() if secret in process.environment}
        for secret in SECRET_READERS
    }
    assert holders == SECRET_READERS
    for name, process in processes.items():  # nor under another name
        leaked = {
            key
            for key, value in process.environment.items()
            for secret in SECRET_READERS
            if value == configuration[secret] and name not in SECRET_READERS[secret]
        }
        assert leaked == set(), name
    # the local Supersets' client secrets are theirs and the provider's alone
    supersets = {
        (tmp_path / f"oidc-superset-{env_id}-secret").read_text().strip() for env_id in SUPERSET_PORTS
    }
    given = {value for process in processes.values() for value in process.environment.values()}
    assert supersets & given == set()


def test_the_os_variables_are_no_project_variable_and_run_the_services(
    processes: dict[str, StackProcess],
) -> None:
    project = {variable for settings in SETTINGS.values() for variable in environment_variables(settings)}
    assert {variable for variable in project | set(SECRET_READERS) if is_os_variable(variable)} == set()
    for name, process in processes.items():
        path = process.environment["PATH"].split(":")
        assert path[0] == str(VENV_BIN), name  # the checkout's console scripts, Caddy, Node.js
        assert process.environment["LC_ALL"] == "C.UTF-8", name
        assert "CLOUD_ACCESS_SECRET" not in process.environment, name
    assert {process.environment.get("PYTHONUNBUFFERED") for process in processes.values()} == {"1"}


def test_the_page_proxy_is_given_what_its_caddyfile_reads_and_prometheus_nothing_of_the_project(
    configuration: dict[str, str], processes: dict[str, StackProcess]
) -> None:
    placeholders = set(re.findall(r"\{\$([A-Z0-9_]+)\}", CADDYFILE.read_text()))
    assert _projects(processes["web"].environment) == proxy_environment(configuration)
    assert set(proxy_environment(configuration)) == placeholders
    assert _projects(processes["prometheus"].environment) == {}


def test_each_migration_runs_with_its_services_environment(
    configuration: dict[str, str], processes: dict[str, StackProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: dict[str, dict[str, str]] = {}

    def run(command: list[str], env: dict[str, str], check: bool) -> None:
        ran[command[0].removeprefix("sstools-")] = env

    monkeypatch.setattr(subprocess, "run", run)
    stack.migrate(configuration)
    assert set(ran) == {"agent", "convo", "ops"}
    assert {name: env for name, env in ran.items()} == {name: processes[name].environment for name in ran}


def test_each_local_superset_has_a_client_secret_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: list[oidc.Client]
) -> None:
    with single_sign_on(tmp_path, PAGE_URL, SUPERSET_PORTS) as sso:
        secrets = {env_id: superset.client_secret for env_id, superset in sso.supersets.items()}
        agent_secret = sso.ops["OPS_OIDC_CLIENT_SECRET"]
    assert set(secrets) == set(SUPERSET_PORTS)
    assert len({*secrets.values(), agent_secret}) == len(secrets) + 1  # no two clients share one
    # the provider knows each client by its own secret, the same each Superset is configured with
    registered = {client.client_id: client.client_secret for client in provider}
    assert registered == {
        stack.OIDC_AGENT_CLIENT: agent_secret,
        **{sso.supersets[env_id].client_id: secret for env_id, secret in secrets.items()},
    }
    # kept for the checkout: the next start registers the same ones
    with single_sign_on(tmp_path, PAGE_URL, SUPERSET_PORTS) as again:
        assert {env_id: superset.client_secret for env_id, superset in again.supersets.items()} == secrets
    # the one variable that once gave them all the same secret gives none; each has its own
    monkeypatch.setenv(SHARED_SUPERSET_SECRET, "one-for-all")
    monkeypatch.setenv(superset_secret_variable("prod"), "prods-own")
    with single_sign_on(tmp_path / "fresh", PAGE_URL, SUPERSET_PORTS) as given:
        given_secrets = {env_id: superset.client_secret for env_id, superset in given.supersets.items()}
    assert given_secrets["prod"] == "prods-own"
    assert given_secrets["dev"] not in {"one-for-all", "prods-own"}
