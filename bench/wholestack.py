"""`make run`'s whole stack for the chaos and soak benchmarks: started as a person starts it
(its own dev and prod Superset, every listener on a free port), the admin signed in, its
service processes found by name."""

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from sstools.agent.ui.app import CHAT_PATH
from sstools.devstack.demo import PASSWORD_ENV, client
from sstools.devstack.running import RunningStack, stack_environment
from sstools.devstack.stack import SETTINGS
from sstools.devstack.superset import Instance, default_home
from sstools.devstack.testing import free_port, sign_in
from sstools.ops.superset.client import SupersetClient


@dataclass
class WholeStack:
    stack: RunningStack
    environment: dict[str, str]
    supersets: dict[str, Instance]
    data_root: Path

    @property
    def chat_url(self) -> str:
        return f"http://127.0.0.1:{self.environment['AGENT_HTTP_PORT']}{CHAT_PATH}/"

    @property
    def convo_url(self) -> str:
        return f"http://127.0.0.1:{self.environment['CONVO_HTTP_PORT']}"

    def sign_in(self) -> str:
        """The admin `make run` made, signed in at ops as the page does."""
        ops = f"http://127.0.0.1:{self.environment['OPS_HTTP_PORT']}"
        return sign_in(ops, (self.data_root / "ops-admin-password").read_text().strip())

    def superset(self, env_id: str) -> SupersetClient:
        return client(self.supersets[env_id], PASSWORD_ENV)

    def services(self) -> dict[str, psutil.Process]:
        """Each service's own process (not its restart wrapper), by name."""
        found = {}
        for process in self.stack.descendants():
            with contextlib.suppress(psutil.NoSuchProcess):
                command = process.cmdline()
                for name in SETTINGS:
                    if command[1:2] and command[1].endswith(f"/sstools-{name}"):
                        found[name] = process
        return found

    def superset_server(self, env_id: str) -> psutil.Process:
        """The gunicorn master of a local Superset (under its restart wrapper)."""
        for process in self.stack.descendants():
            with contextlib.suppress(psutil.NoSuchProcess):
                if process.cmdline()[-2:-1] == [f"superset-{env_id}"]:
                    (server,) = process.children()
                    return server
        raise LookupError(f"no Superset {env_id} under the stack")


@contextlib.contextmanager
def whole_stack(data_root: Path, database_url: str | None = None) -> Iterator[WholeStack]:
    """The stack on ``database_url`` (else its embedded server, in ``data_root``); one user talks
    in every conversation and stays signed in for the whole run."""
    ports = {"dev": free_port(), "prod": free_port()}
    environment = {
        **stack_environment(),
        "AGENT_TURNS_PER_USER": "1000000",
        "OPS_USER_TOKEN_TTL_SECONDS": "7200",
        "LOG_LEVEL": "WARNING",
        **({"DATABASE_URL": database_url} if database_url else {}),
    }
    stack = RunningStack(
        data_root / "pg", environment, ",".join(f"{env}={port}" for env, port in ports.items())
    )
    os.environ.setdefault(PASSWORD_ENV, default_home().admin_password())  # as the stack gives ops
    supersets = {env: Instance(env, data_root / "superset" / env, port) for env, port in ports.items()}
    try:
        stack.wait_until_ready()
        yield WholeStack(stack, environment, supersets, data_root)
    finally:
        if stack.process.poll() is None:
            stack.interrupt()
        stack.kill_leftovers()
