"""Where things are in the repository checkout."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[5]
PROTO_ROOT = REPO_ROOT / "protos"
DATA_DIR = REPO_ROOT / ".data"
PROCFILE = REPO_ROOT / "Procfile"
WEB_ROOT = REPO_ROOT / "web" / "build"  # the built /agent page (`make web`)
CADDYFILE = REPO_ROOT / "tools" / "devstack" / "Caddyfile"
