"""Real Superset for `make run` and the tests: installed once in its own virtualenv, initialised
once into a template metadata database, then any number of instances on loopback.

Superset 6.1 needs three packages it does not declare or pins wrongly: ``flask-caching<2.5``
(2.5 breaks every command), ``cachetools`` (else every database connection fails with a bare
422) and ``rich`` (else the CLI fails at import). ``superset init`` takes most of a minute, so
each new instance starts from a copy of the template instead. Database drivers (psycopg2, for
PostgreSQL data sources) go into the same virtualenv; adding one does not rebuild the template.
"""

import hashlib
import logging
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from sstools.devstack.locks import exclusive
from sstools.devstack.paths import DATA_DIR, REPO_ROOT
from sstools.devstack.restarting import command_line as restarting_command
from sstools.devstack.restarting import stop_group
from sstools.ops.settings import OpsSettings

SUPERSET_REQUIREMENTS = ("apache-superset==6.1.0", "flask-caching<2.5", "cachetools", "rich")
# Drivers for the databases Superset reads; `superset init` registers nothing of theirs.
DRIVERS = ("psycopg2-binary",)
# Sign-in through an OpenID Connect provider (FAB's AUTH_OAUTH registers it with authlib).
SSO_REQUIREMENTS = ("authlib>=1.3,<2",)
ADMIN_USERNAME = "admin"
_log = logging.getLogger(__name__)

_CONFIG = """\
# Written by sstools-devstack for a local instance; edits are overwritten at the next start.
SECRET_KEY = {secret_key!r}
SQLALCHEMY_DATABASE_URI = {metadata_uri!r}
PREVENT_UNSAFE_DB_CONNECTIONS = False  # the demo data is a SQLite file
FAB_ADD_SECURITY_API = True  # roles and users over REST, for the permission audit
TALISMAN_ENABLED = False
RATELIMIT_ENABLED = False
AUTH_RATE_LIMITED = False
CACHE_CONFIG = {{"CACHE_TYPE": "SimpleCache"}}
DATA_CACHE_CONFIG = {{"CACHE_TYPE": "SimpleCache"}}
FEATURE_FLAGS = {{"TAGGING_SYSTEM": True}}  # dashboards found by tag
"""
# The agent's drawer on every page, as a production Superset adds it (README): the same file.
DRAWER_CONFIG = REPO_ROOT / "web" / "superset" / "drawer_config.py"
# The hook through which ops acts as a person, as a production Superset adds it (README).
PERSON_CONFIG = REPO_ROOT / "services" / "ops" / "superset" / "sstools_person_config.py"
# Sign-in through the company's OpenID Connect provider, as a production Superset adds it (README).
OIDC_CONFIG = REPO_ROOT / "services" / "ops" / "superset" / "sstools_oidc_config.py"
# The template is rebuilt when what it was made from changes (`superset init` registers the
# permissions of the features the configuration turns on).
_TEMPLATE_VERSION = hashlib.sha256("\n".join([_CONFIG, *SUPERSET_REQUIREMENTS]).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SupersetHome:
    """Where the shared installation and template live (``.data/superset`` by default)."""

    root: Path

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    @property
    def template(self) -> Path:
        return self.root / "template"

    @property
    def admin_password_file(self) -> Path:
        return self.root / "admin-password"

    def admin_password(self) -> str:
        return self.admin_password_file.read_text().strip()


@dataclass(frozen=True)
class Instance:
    env_id: str
    folder: Path
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def config(self) -> Path:
        return self.folder / "superset_config.py"

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        return {**base, "SUPERSET_CONFIG_PATH": str(self.config), "PYTHONUNBUFFERED": "1"}

    def command(self, home: SupersetHome) -> list[str]:
        return [
            str(home.bin / "gunicorn"),
            *("-w", "1", "--threads", "8", "-k", "gthread", "--timeout", "120"),
            *("-b", f"127.0.0.1:{self.port}", "--graceful-timeout", "5"),
            "superset.app:create_app()",
        ]


def default_home() -> SupersetHome:
    return SupersetHome(Path(os.environ.get("SSTOOLS_SUPERSET_HOME", DATA_DIR / "superset")).resolve())


@dataclass(frozen=True)
class SupersetSso:
    """An instance's sign-in through an OpenID Connect provider (sstools_oidc_config.py): its
    client there, the name FAB routes it by (``/login/<name>``, ``/oauth-authorized/<name>``;
    the login page's button reads "Sign in with <Name>") and the groups that give roles."""

    issuer: str
    client_id: str
    client_secret: str
    provider_name: str
    roles_mapping: Mapping[str, Sequence[str]] = field(hash=False)
    username_claim: str = "preferred_username"
    groups_claim: str = "groups"

    def redirect_uri(self, superset_url: str) -> str:
        """The redirect URI to register for this client at the provider."""
        return f"{superset_url.rstrip('/')}/oauth-authorized/{self.provider_name}"

    def settings(self) -> str:
        mapping = {group: list(roles) for group, roles in self.roles_mapping.items()}
        return (
            f"SSTOOLS_OIDC_ISSUER = {self.issuer!r}\n"
            f"SSTOOLS_OIDC_CLIENT_ID = {self.client_id!r}\n"
            f"SSTOOLS_OIDC_CLIENT_SECRET = {self.client_secret!r}\n"
            f"SSTOOLS_OIDC_PROVIDER_NAME = {self.provider_name!r}\n"
            f"SSTOOLS_OIDC_ROLES_MAPPING = {mapping!r}\n"
            f"SSTOOLS_OIDC_USERNAME_CLAIM = {self.username_claim!r}\n"
            f"SSTOOLS_OIDC_GROUPS_CLAIM = {self.groups_claim!r}\n"
        )


@dataclass(frozen=True)
class Agent:
    """What an instance's configuration adds to the template's: its id (in the agent's
    environments, and in the name of its session cookie), where the agent's page is (the
    drawer), where ops publishes the keys of the tokens it acts as a person with (the person
    hook), and the provider people sign in through (``sso``)."""

    env_id: str
    page_url: str | None = None
    ops_jwks_url: str | None = None
    sso: SupersetSso | None = None


def session_cookie_name(env_id: str) -> str:
    """Browsers send 127.0.0.1's cookies to every port: under one name, two instances would
    overwrite (and, signed with another key, throw away) each other's sessions."""
    return f"superset_session_{env_id}"


def _write_config(folder: Path, agent: Agent | None = None) -> None:
    """The instance's configuration; with ``agent``, a session cookie of its own, and, as the
    README tells a production Superset's operator to do: sign-in through the provider (``sso``),
    the agent's drawer on its pages, and ops acting in it as a person."""
    key_file = folder / "secret-key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(42))
    metadata_uri = f"sqlite:///{folder / 'superset.db'}"
    text = _CONFIG.format(secret_key=key_file.read_text().strip(), metadata_uri=metadata_uri)
    # as long as ops lets a statement run (OPS_SQL_TIMEOUT_SECONDS; gunicorn's --timeout above)
    text += f"SQLLAB_TIMEOUT = {int(OpsSettings.model_fields['sql_timeout_seconds'].default)}\n"
    if agent is not None:
        text += f"\nSSTOOLS_ENV_ID = {agent.env_id!r}\n"
        text += f"SESSION_COOKIE_NAME = {session_cookie_name(agent.env_id)!r}\n"
        text += f"REMEMBER_COOKIE_NAME = {f'superset_remember_{agent.env_id}'!r}\n"
        # Above the person hook, whose security manager then builds on this one's.
        if agent.sso is not None:
            text += f"\n{agent.sso.settings()}{OIDC_CONFIG.read_text()}"
        if agent.page_url is not None:
            text += f"\nSSTOOLS_AGENT_URL = {agent.page_url!r}\n{DRAWER_CONFIG.read_text()}"
        if agent.ops_jwks_url is not None:
            text += f"\nSSTOOLS_OPS_JWKS_URL = {agent.ops_jwks_url!r}\n{PERSON_CONFIG.read_text()}"
    (folder / "superset_config.py").write_text(text)


def ensure_installed(home: SupersetHome) -> None:
    """Superset and the drivers in its own virtualenv, with uv when the dev environment has it
    (seconds, not minutes). An existing virtualenv is completed in place, so adding a driver
    does not pull the installation from under an instance that is running."""
    stamp = home.venv / ".sstools-requirements"
    requirements = (*SUPERSET_REQUIREMENTS, *DRIVERS, *SSO_REQUIREMENTS)
    wanted = "\n".join(requirements)
    if stamp.exists() and stamp.read_text() == wanted:
        return
    _log.info("installing %s into %s", ", ".join(requirements), home.venv)
    home.root.mkdir(parents=True, exist_ok=True)
    if not (home.bin / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(home.venv)], check=True)
    uv = Path(sys.executable).parent / "uv"
    if uv.exists():
        install = [str(uv), "pip", "install", "--quiet", "--python", str(home.bin / "python")]
    else:
        install = [str(home.bin / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*install, *requirements], check=True)
    stamp.write_text(wanted)


def ensure_template(home: SupersetHome) -> None:
    """An initialised metadata database with the admin user, made once — by one process at a
    time: test workers and a `make run` beside them share the home."""
    with exclusive(home.root / ".lock"):
        ensure_installed(home)
        done = home.template / ".initialised"
        if not (done.exists() and done.read_text() == _TEMPLATE_VERSION):
            _make_template(home)
            done.write_text(_TEMPLATE_VERSION)


def _make_template(home: SupersetHome) -> None:
    shutil.rmtree(home.template, ignore_errors=True)
    home.template.mkdir(parents=True)
    if not home.admin_password_file.exists():
        home.admin_password_file.write_text(secrets.token_urlsafe(18))
        home.admin_password_file.chmod(0o600)
    _write_config(home.template)
    environment = Instance("template", home.template, 0).environment(os.environ)
    superset = str(home.bin / "superset")
    admin = [
        *("--username", ADMIN_USERNAME, "--firstname", "Superset", "--lastname", "Admin"),
        *("--email", "admin@localhost", "--password", home.admin_password()),
    ]
    _log.info("initialising the Superset metadata template (about 30 s, once)")
    for step in (["db", "upgrade"], ["fab", "create-admin", *admin], ["init"]):
        result = subprocess.run(
            [superset, *step], env=environment, cwd=home.template, capture_output=True, text=True
        )
        if result.returncode != 0:
            raise RuntimeError(f"superset {step[0]} failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")


def prepare_instance(
    home: SupersetHome,
    folder: Path,
    env_id: str,
    port: int,
    agent_url: str | None = None,
    ops_jwks_url: str | None = None,
    sso: SupersetSso | None = None,
) -> Instance:
    """A Superset instance in ``folder``: the template's metadata on first use, kept afterwards;
    with a session cookie of its own; its pages load the drawer of the agent at ``agent_url``
    when one is given, ops (whose keys are at ``ops_jwks_url``) may act in it as a person when
    that is given, and people sign in through the provider of ``sso`` when that is given."""
    ensure_template(home)
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "superset.db").exists():
        shutil.copyfile(home.template / "superset.db", folder / "superset.db")
    _write_config(folder, Agent(env_id, agent_url, ops_jwks_url, sso))
    return Instance(env_id, folder, port)


def wait_healthy(
    instance: Instance, within_seconds: float = 120, process: "subprocess.Popen[bytes] | None" = None
) -> None:
    deadline = time.monotonic() + within_seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"Superset {instance.env_id} exited with {process.returncode}")
        try:
            if httpx.get(f"{instance.url}/health", timeout=2).text == "OK":
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(
        f"Superset {instance.env_id} not healthy on {instance.url} after {within_seconds:.0f} s"
    )


def _start(home: SupersetHome, instance: Instance) -> "subprocess.Popen[bytes]":
    """The instance's server under the restart wrapper (a killed Superset comes back, as the
    services under `make run` do), in a process group of its own."""
    command = f"exec {shlex.join(instance.command(home))}"
    with (instance.folder / "superset.log").open("ab") as log:
        return subprocess.Popen(
            restarting_command(f"superset-{instance.env_id}", command),
            env=instance.environment(os.environ),
            cwd=instance.folder,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(process: "subprocess.Popen[bytes]") -> None:
    """The wrapper stops restarting, gunicorn drains; killed if not done in 15 s."""
    stop_group(process, 15)


@contextmanager
def running(home: SupersetHome, instances: Iterable[Instance]) -> Iterator[None]:
    """Start the instances side by side (logs in their folders), wait until all are healthy,
    stop them after."""
    started: list[tuple[Instance, subprocess.Popen[bytes]]] = []
    try:
        for instance in instances:
            started.append((instance, _start(home, instance)))
        for instance, process in started:
            wait_healthy(instance, process=process)
        yield
    finally:
        for _, process in started:
            _stop(process)
