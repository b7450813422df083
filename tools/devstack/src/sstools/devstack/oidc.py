"""A real OpenID Connect provider on loopback for `make run` and the tests (tools/oidc:
oidc-provider on the virtualenv's Node.js), so ops and the local Superset instances sign people
in as they would through a company's single sign-on, not through a stub.

The provider reads the people file again at every sign-in and every claims lookup: a test moves
a person to another group by rewriting it, and the next sign-in carries the new groups.

DEMO_PEOPLE are for `make run` alone; their passwords ("<name>-demo") are published here and must
never be reused anywhere real.
"""

import hashlib
import json
import logging
import os
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import httpx

from sstools.devstack.locks import exclusive
from sstools.devstack.paths import DATA_DIR, REPO_ROOT, VENV_BIN, on_venv_path
from sstools.devstack.restarting import stop_group

OIDC_ROOT = REPO_ROOT / "tools" / "oidc"
SERVER = OIDC_ROOT / "server.mjs"
PACKAGE_LOCK = OIDC_ROOT / "package-lock.json"
# What `npm ci` was last run for: the lock file's digest (npm's own marker survives a failed run).
INSTALL_STAMP = OIDC_ROOT / "node_modules" / ".sstools-lock-sha256"
INSTALL_LOCK = DATA_DIR / "oidc" / ".install-lock"
CONFIG_NAME = "oidc.json"
PEOPLE_NAME = "people.json"
LOG_NAME = "oidc.log"
DEFAULT_PROVIDER_NAME = "Local SSO"
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Person:
    """Someone who can sign in; ``username`` is their ``sub`` and, unless ``preferred_username``
    says another, their ``preferred_username`` (a provider where people choose it)."""

    username: str
    password: str
    email: str
    name: str
    groups: tuple[str, ...] = ()
    preferred_username: str | None = None


@dataclass(frozen=True)
class Client:
    """A first-party relying party: the provider grants it what it asks for, without a consent
    page. Authlib (Superset's FAB) authenticates with ``client_secret_basic`` by default."""

    client_id: str
    client_secret: str
    redirect_uris: tuple[str, ...]
    post_logout_redirect_uris: tuple[str, ...] = ()
    token_endpoint_auth_method: str = "client_secret_basic"


DEMO_PEOPLE = (
    Person("ana", "ana-demo", "ana@example.com", "Ana Analyst", ("analysts",)),
    Person("olga", "olga-demo", "olga@example.com", "Olga Operator", ("operators",)),
    Person("vera", "vera-demo", "vera@example.com", "Vera Viewer", ("viewers",)),
    Person("adam", "adam-demo", "adam@example.com", "Adam Admin", ("admins",)),
    # in no group the agent or Superset maps: refused by both, with a reason
    Person("carl", "carl-demo", "carl@example.com", "Carl Contractor", ("contractors",)),
)


@dataclass
class Form:
    """An HTML form as a browser would send it: where, and its named inputs' values."""

    action: str
    fields: dict[str, str] = field(default_factory=dict)


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "form":
            self.forms.append(Form(values.get("action", "")))
        elif tag == "input" and self.forms and "name" in values:
            self.forms[-1].fields[values["name"]] = values.get("value", "")


def only_form(page: httpx.Response) -> Form:
    """The one form of ``page`` (the provider's sign-in), its action made absolute, for tests
    that drive a sign-in with plain HTTP as a browser would."""
    parser = _Forms()
    parser.feed(page.text)
    assert len(parser.forms) == 1, page.text
    form = parser.forms[0]
    form.action = urljoin(str(page.url), form.action)
    return form


@dataclass(frozen=True)
class RunningProvider:
    """A started provider: its issuer (what clients are configured with) and its people file."""

    issuer: str
    people_file: Path
    log_file: Path

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    def write_people(self, people: Iterable[Person]) -> None:
        """Replace everyone; seen from the next sign-in or claims lookup on."""
        _write_json(self.people_file, [asdict(person) for person in people])


def ensure_installed() -> None:
    """``npm ci`` in tools/oidc once per lock file, by one process at a time (test workers and a
    `make run` beside them share the checkout's node_modules)."""
    with exclusive(INSTALL_LOCK):
        wanted = hashlib.sha256(PACKAGE_LOCK.read_bytes()).hexdigest()
        if INSTALL_STAMP.exists() and INSTALL_STAMP.read_text() == wanted:
            return
        _log.info("installing the OIDC provider's packages (npm ci in %s)", OIDC_ROOT)
        result = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=OIDC_ROOT,
            env=_environment(),
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"npm ci in {OIDC_ROOT} failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
            )
        INSTALL_STAMP.write_text(wanted)


def write_config(
    folder: Path,
    port: int,
    clients: Iterable[Client],
    people: Iterable[Person],
    provider_name: str = DEFAULT_PROVIDER_NAME,
) -> Path:
    """The provider's configuration and people file in ``folder`` (both rewritten); the
    configuration's path."""
    folder.mkdir(parents=True, exist_ok=True)
    people_file = folder / PEOPLE_NAME
    _write_json(people_file, [asdict(person) for person in people])
    config = {
        "issuer": _issuer(port),
        "port": port,
        "provider_name": provider_name,
        "people_file": str(people_file.resolve()),
        "clients": [asdict(client) for client in clients],
    }
    config_file = folder / CONFIG_NAME
    _write_json(config_file, config)
    return config_file


def start(folder: Path, port: int) -> "subprocess.Popen[bytes]":
    """The provider of ``folder``'s configuration (see write_config), logging to ``oidc.log``
    there, in a process group of its own."""
    config_file = folder / CONFIG_NAME
    configured = json.loads(config_file.read_text())["port"]
    if configured != port:
        raise ValueError(f"{config_file} is for port {configured}, not {port}")
    ensure_installed()
    with (folder / LOG_NAME).open("ab") as log:
        return subprocess.Popen(
            [_node(), str(SERVER), str(config_file.resolve())],
            cwd=OIDC_ROOT,
            env=_environment(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(process: "subprocess.Popen[bytes]") -> None:
    """The server closes and exits 0; killed if not done in 10 s."""
    stop_group(process, 10)


def wait_ready(
    provider: RunningProvider, process: "subprocess.Popen[bytes]", within_seconds: float = 30
) -> None:
    """Until the discovery document names the issuer; the log's tail in the error otherwise."""
    deadline = time.monotonic() + within_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"the OIDC provider exited with {process.returncode}:\n{_tail(provider.log_file)}"
            )
        with suppress(httpx.HTTPError, ValueError):
            reply = httpx.get(provider.discovery_url, timeout=2)
            if reply.status_code == 200 and reply.json().get("issuer") == provider.issuer:
                return
        time.sleep(0.2)
    raise TimeoutError(
        f"the OIDC provider did not answer {provider.discovery_url} within {within_seconds:.0f} s:\n"
        f"{_tail(provider.log_file)}"
    )


@contextmanager
def running(
    folder: Path,
    port: int,
    clients: Iterable[Client],
    people: Iterable[Person],
    provider_name: str = DEFAULT_PROVIDER_NAME,
) -> Iterator[RunningProvider]:
    """A provider on ``127.0.0.1:port`` for the block: configured, started, answering."""
    write_config(folder, port, clients, people, provider_name)
    provider = RunningProvider(_issuer(port), (folder / PEOPLE_NAME).resolve(), folder / LOG_NAME)
    process = start(folder, port)
    try:
        wait_ready(provider, process)
        yield provider
    finally:
        stop(process)


def _issuer(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def _environment() -> dict[str, str]:
    return {**os.environ, "PATH": on_venv_path(os.environ.get("PATH"))}


def _node() -> str:
    """The Node.js binary itself: the virtualenv's ``node`` is a Python wrapper that would not
    pass SIGTERM on."""
    wrapper = VENV_BIN / "node"
    result = subprocess.run(
        [str(wrapper) if wrapper.exists() else "node", "-p", "process.execPath"],
        env=_environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def _write_json(path: Path, value: object) -> None:
    """Whole or not at all (the provider may read it at any moment), readable by this user
    alone (people files hold passwords)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(value, indent=2))
    partial.chmod(0o600)
    os.replace(partial, path)


def _tail(log_file: Path, characters: int = 3000) -> str:
    try:
        return log_file.read_text(errors="replace")[-characters:]
    except FileNotFoundError:
        return "(no log)"
