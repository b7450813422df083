"""`make images`: every image of the project built with podman, on a machine with no Docker
daemon and no container registry.

What it sets up where missing (as root, as `.ci/run` does for PostgreSQL): Debian's podman, runc
and debootstrap; a runtime configuration podman can start containers with here (runc, and
default ulimits below the machine's hard limits); the base image ``python:3.11-slim``, made
from Debian bookworm with debootstrap from the mirror apt already uses and imported under that
name, since no registry is reachable. Then it builds each image from its Dockerfile
(`make dockerfiles`), tagged ``localhost/sstools-<name>:<the chart's appVersion>``, the name the
chart's manifests run.
"""

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import yaml

from sstools.devstack.locks import exclusive
from sstools.devstack.paths import DATA_DIR, REPO_ROOT
from sstools.devstack.stack import SETTINGS

BASE_IMAGE = "docker.io/library/python:3.11-slim"
IMAGES = (*SETTINGS, "web")
DEBIAN_PACKAGES = ("podman", "runc", "debootstrap")
CONTAINERS_CONF = Path("/etc/containers/containers.conf")
# crun (podman's default) cannot start containers on these machines, and no process may raise its
# hard limits (open files 20000), so the defaults podman asks for must stay below them.
RUNTIME_CONF = """\
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
"""
BASE_PACKAGES = "python3,python3-venv,python3-pip,python-is-python3,ca-certificates"
# What pip and npm inside a build read from this machine: its registry settings and the CA
# bundle they trust. Mounted read-only into every RUN step when present.
BUILD_MOUNTS = (Path("/etc/pip.conf"), Path("/etc/ssl/certs/ca-certificates.crt"), Path("/root/.npmrc"))
BUILD_LINES_KEPT = 60


@cache
def app_version() -> str:
    chart = yaml.safe_load((REPO_ROOT / "helm" / "sstools-agent" / "Chart.yaml").read_text())
    return str(chart["appVersion"])


def tag(name: str) -> str:
    """The image the chart runs for ``name`` (its repository ``sstools-<name>``, tag appVersion)."""
    return f"localhost/sstools-{name}:{app_version()}"


def dockerfile(name: str) -> Path:
    return REPO_ROOT / ("web" if name == "web" else f"services/{name}") / "Dockerfile"


def podman(*args: str, check: bool = False, timeout: float | None = 120) -> subprocess.CompletedProcess[str]:
    """A podman command, its output captured (podman's "no systemd" notices go to stderr) and by
    default its exit code left to the caller."""
    return subprocess.run(["podman", *args], check=check, text=True, capture_output=True, timeout=timeout)


def ensure_packages() -> None:
    missing = [package for package in DEBIAN_PACKAGES if shutil.which(package) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        raise SystemExit(f"podman is needed: apt-get install -y {' '.join(DEBIAN_PACKAGES)} (as root)")
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=environment)
    subprocess.run(["apt-get", "install", "-y", "-qq", *DEBIAN_PACKAGES], check=True, env=environment)


def ensure_runtime_conf() -> None:
    """Writes the runtime configuration unless one exists (somebody else's is left alone)."""
    if CONTAINERS_CONF.exists():
        return
    CONTAINERS_CONF.parent.mkdir(parents=True, exist_ok=True)
    CONTAINERS_CONF.write_text(RUNTIME_CONF)


def debian_mirror() -> str:
    """The Debian mirror apt uses on this machine (deb822 ``URIs:`` or a one-line ``deb`` entry)."""
    sources = sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))
    for path in [*sources, Path("/etc/apt/sources.list")]:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            found = re.match(r"\s*(?:URIs:\s*|deb\s+(?:\[[^]]*\]\s+)?)(\S+)", line)
            if found and "security" not in found.group(1):
                return found.group(1)
    return "http://deb.debian.org/debian"


def ensure_base_image() -> None:
    if podman("image", "exists", BASE_IMAGE).returncode == 0:
        return
    with tempfile.TemporaryDirectory(prefix="sstools-base-") as folder:
        rootfs = Path(folder) / "rootfs"
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={BASE_PACKAGES}",
                "bookworm",
                str(rootfs),
                debian_mirror(),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        # pip installs into the system Python, as in the official image
        (rootfs / "usr/lib/python3.11/EXTERNALLY-MANAGED").unlink(missing_ok=True)
        for trimmed in ("var/lib/apt/lists", "usr/share/doc", "usr/share/man", "var/cache/apt"):
            shutil.rmtree(rootfs / trimmed, ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(
            ["podman", "import", "--change", "ENV LANG=C.UTF-8", "-", BASE_IMAGE],
            stdin=tar.stdout,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        if tar.wait() != 0:
            raise RuntimeError("could not archive the base image's root filesystem")


def ensure_podman() -> None:
    """podman, its runtime configuration and the base image, each where missing."""
    ensure_packages()
    ensure_runtime_conf()
    ensure_base_image()


class BuildFailed(RuntimeError):
    """A podman build that failed twice; the message ends with what it printed last."""


def _build_once(command: list[str]) -> tuple[int, str]:
    """Runs ``command``, its output on screen as it comes (a build's progress) and its last lines
    kept for the error."""
    last: deque[str] = deque(maxlen=BUILD_LINES_KEPT)
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:
        assert process.stdout is not None
        for line in process.stdout:
            print(line, end="", flush=True)
            last.append(line)
    return process.returncode, "".join(last)


def build(name: str) -> None:
    context = dockerfile(name).parent if name == "web" else REPO_ROOT
    mounts = [f"--volume={path}:{path}:ro" for path in BUILD_MOUNTS if path.exists()]
    command = [
        "podman",
        "build",
        "--pull=never",  # the base exists only here
        "--network=host",
        "--format=docker",  # the OCI format drops HEALTHCHECK
        "--layers",
        *mounts,
        f"--file={dockerfile(name)}",
        f"--tag={tag(name)}",
        str(context),
    ]
    # A build fetches packages from the registry; a second try (its finished layers cached) rides
    # out a dropped download, and a build that fails twice says why.
    for _ in range(2):
        returncode, output = _build_once(command)
        if returncode == 0:
            return
    raise BuildFailed(f"podman build of {name} failed twice (exit {returncode}); its last lines:\n{output}")


def build_images(names: Sequence[str] = IMAGES) -> dict[str, float]:
    """Sets podman up where needed and builds ``names``; the seconds each build took."""
    seconds = {}
    # one setup or build at a time on this machine (two test workers, or one and `make images`)
    with exclusive(DATA_DIR / "images.lock"):
        ensure_podman()
        for name in names:
            started = time.monotonic()
            build(name)
            seconds[name] = round(time.monotonic() - started, 1)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "names", nargs="*", metavar="name", help=f"images to build (default: all of {', '.join(IMAGES)})"
    )
    args = parser.parse_args()
    unknown = set(args.names) - set(IMAGES)
    if unknown:
        parser.error(f"no such image: {', '.join(sorted(unknown))}")
    for name, seconds in build_images(args.names or IMAGES).items():
        print(f"{tag(name)}  built in {seconds} s")
