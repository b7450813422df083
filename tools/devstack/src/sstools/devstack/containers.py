"""The project's images run with podman on the host's network, as the tests and the chaos script
start them: each container as its image says (its user, its entrypoint), on a read-only root
filesystem, given exactly the variables its service's settings class reads."""

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sstools.common.settings import environment_variables
from sstools.devstack.images import podman, tag
from sstools.devstack.stack import SETTINGS


@dataclass(frozen=True)
class Container:
    name: str

    def inspect(self) -> dict[str, Any]:
        found = podman("container", "inspect", self.name)
        if found.returncode != 0:
            raise LookupError(f"no container {self.name}: {found.stderr.strip()}")
        (details,) = json.loads(found.stdout)
        return dict(details)

    def running(self) -> bool:
        return bool(self.inspect()["State"]["Running"])

    def exec(self, *command: str) -> subprocess.CompletedProcess[str]:
        return podman("exec", self.name, *command)

    def healthy(self) -> bool:
        """The image's HEALTHCHECK, run now (no systemd timer runs it here)."""
        return podman("healthcheck", "run", self.name).returncode == 0

    def logs(self) -> str:
        shown = podman("logs", self.name)
        return shown.stdout + shown.stderr

    def remove(self) -> None:
        podman("rm", "--force", "--time", "10", self.name)


def service_environment(name: str, given: Mapping[str, str], extra: Sequence[str] = ()) -> dict[str, str]:
    """What the ``name`` service is given of ``given``: the variables its settings class reads
    (ops alone gets the signing key, as in the chart), and the ``extra`` ones named."""
    wanted = {*environment_variables(SETTINGS[name]), *extra} if name in SETTINGS else set(extra)
    return {variable: value for variable, value in given.items() if variable in wanted}


def start(
    name: str, container: str, environment: Mapping[str, str], command: Sequence[str] = ()
) -> Container:
    """``name``'s image in the background, on the host's network, its root filesystem read-only
    (podman mounts a fresh tmpfs on /tmp, as the chart mounts an emptyDir)."""
    flags = [f"--env={variable}={value}" for variable, value in environment.items()]
    started = podman(
        "run", "--detach", f"--name={container}", "--network=host", "--read-only", *flags, tag(name), *command
    )
    if started.returncode != 0:
        raise RuntimeError(f"podman run {name}: {started.stderr.strip()}")
    return Container(container)


def run_to_end(
    name: str, environment: Mapping[str, str], command: Sequence[str], timeout: float = 300
) -> str:
    """``name``'s image running ``command`` to its end (a migration, say); its output, or an error."""
    flags = [f"--env={variable}={value}" for variable, value in environment.items()]
    done = podman(
        "run", "--rm", "--network=host", "--read-only", *flags, tag(name), *command, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} {' '.join(command)} exited {done.returncode}: {done.stdout}{done.stderr}")
    return done.stdout
