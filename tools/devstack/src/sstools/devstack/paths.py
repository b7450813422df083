"""Where things are in the repository checkout, and in its virtualenv."""

import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[5]
PROTO_ROOT = REPO_ROOT / "protos"
DATA_DIR = REPO_ROOT / ".data"
PROCFILE = REPO_ROOT / "Procfile"
WEB_ROOT = REPO_ROOT / "web" / "build"  # the built /agent page (`make web`)
CADDYFILE = REPO_ROOT / "tools" / "devstack" / "Caddyfile"
# The eval's second demo database (eval/domain/), which the stack makes from this very script.
VETCLINIC_SQL = REPO_ROOT / "services" / "agent" / "eval" / "domain" / "domain.sql"
VENV_BIN = Path(sys.executable).parent  # the services' console scripts, Node.js and npm, Caddy


def on_venv_path(path: str | None) -> str:
    """A ``PATH`` value with the virtualenv's programs first: what the services, the page's
    tools and the tests start by name is this checkout's."""
    return f"{VENV_BIN}{os.pathsep}{path or ''}"
