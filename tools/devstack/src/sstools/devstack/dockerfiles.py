"""The services' Dockerfiles, made from one pattern: `make dockerfiles` writes them, `make test`
checks that the committed ones are what the pattern makes (as with the gRPC stubs).

Each image builds wheels of its own package and of every repo package that package declares it
needs (read from their pyproject.toml files, followed through; an extra it is not asked for
left out), installs them into python:3.11-slim, and runs as a non-root user, listening on all
interfaces on its settings' default ports, with a HEALTHCHECK on its probes port.
"""

import argparse
import tomllib
from dataclasses import dataclass

from packaging.requirements import Requirement

from sstools.devstack.paths import REPO_ROOT
from sstools.devstack.stack import SETTINGS

# Where each of the repo's own packages lives, in the order an image copies them.
PACKAGE_DIRS = {
    "sstools-protos": "protos",
    "sstools-common": "libs/common",
    **{f"sstools-{name}": f"services/{name}" for name in SETTINGS},
}


@dataclass(frozen=True)
class Needs:
    """What one service's image has beyond the pattern."""

    debian_packages: tuple[str, ...] = ()
    why: str = ""
    state_dir: str = ""  # a folder the service writes, owned by its user
    start_period_seconds: int = 30


NEEDS = {
    "ops": Needs(
        ("git",), "git: the exports repository is driven through the git CLI", "/var/lib/sstools-ops"
    ),
    "router": Needs(start_period_seconds=90),  # the embedding model loads before /healthz answers
}


def local_sources(package: str) -> list[str]:
    """The folders of ``package`` and of the repo packages it needs, in copying order."""
    needed, pending = set(), [package]
    while pending:
        name = pending.pop()
        if name in needed:
            continue
        needed.add(name)
        project = tomllib.loads((REPO_ROOT / PACKAGE_DIRS[name] / "pyproject.toml").read_text())["project"]
        for line in project.get("dependencies", []):
            requirement = Requirement(line)
            an_extra = requirement.marker is not None and "extra" in str(requirement.marker)
            if requirement.name in PACKAGE_DIRS and not an_extra:
                pending.append(requirement.name)
    return [folder for name, folder in PACKAGE_DIRS.items() if name in needed]


def render(name: str) -> str:
    sources = local_sources(f"sstools-{name}")
    needs = NEEDS.get(name, Needs())
    fields = SETTINGS[name].model_fields
    ports = {field: info.default for field, info in fields.items() if field.endswith("_port")}
    serving_first = sorted(ports, key=lambda field: field == "metrics_port")
    prefix = name.upper()
    user = "useradd --system --uid 10001 sstools"
    if needs.state_dir:
        user += f" && mkdir -p {needs.state_dir} && chown 10001 {needs.state_dir}"
    if needs.debian_packages:
        user = (
            f"apt-get update && apt-get install -y --no-install-recommends {' '.join(needs.debian_packages)}"
            f" && rm -rf /var/lib/apt/lists/* \\\n && {user}"
        )
    health = (
        "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + "
        f"os.environ.get('{prefix}_METRICS_PORT', '{ports['metrics_port']}') + '/healthz', timeout=3)"
    )
    lines = [
        "# Made by `make dockerfiles` (sstools.devstack.dockerfiles): edit the pattern there, not this file.",
        f"# Build from the repository root: docker build -f services/{name}/Dockerfile -t sstools-{name} .",
        "FROM python:3.11-slim AS build",
        "WORKDIR /src",
        "COPY requirements.lock ./",
        *(f"COPY {folder} {folder}" for folder in sources),
        "RUN grep -v '^-e ' requirements.lock > constraints.txt \\",
        " && pip wheel --no-cache-dir --wheel-dir /wheels --constraint constraints.txt "
        + " ".join(f"./{folder}" for folder in sources),
        "",
        "FROM python:3.11-slim",
        *([f"# {needs.why}"] if needs.why else []),
        f"RUN {user}",
        "COPY --from=build /wheels /wheels",
        "RUN pip install --no-cache-dir --no-index /wheels/*.whl && rm -rf /wheels",
        "USER 10001",
        f"ENV {prefix}_HOST=0.0.0.0",
        f"EXPOSE {' '.join(str(ports[field]) for field in serving_first)}",
        "# Liveness for plain Docker (Kubernetes uses its own probes): the probes port's /healthz",
        "HEALTHCHECK --interval=30s --timeout=5s"
        f" --start-period={needs.start_period_seconds}s --retries=3 \\",
        f'  CMD ["python", "-c", "{health}"]',
        f'ENTRYPOINT ["sstools-{name}"]',
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="fail if a committed Dockerfile differs")
    args = parser.parse_args()
    stale = []
    for name in SETTINGS:
        path = REPO_ROOT / "services" / name / "Dockerfile"
        made = render(name)
        if path.read_text() != made:
            if args.check:
                stale.append(str(path.relative_to(REPO_ROOT)))
            else:
                path.write_text(made)
                print(f"wrote {path.relative_to(REPO_ROOT)}")
    if stale:
        raise SystemExit(f"not what `make dockerfiles` makes: {', '.join(stale)}")
