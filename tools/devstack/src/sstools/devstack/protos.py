"""Regenerate the gRPC stubs from protos/, or check that the committed ones are current.

The stubs sit beside their .proto files (protos/sstools/<service>/v1/) inside the
sstools-protos distribution. ``--check`` generates into a temporary folder and compares, so CI
fails when someone edits a .proto and forgets to regenerate.
"""

import argparse
import sys
import tempfile
from importlib import resources
from pathlib import Path

from grpc_tools import protoc

from sstools.devstack.paths import PROTO_ROOT

GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")


def proto_files(root: Path = PROTO_ROOT) -> list[Path]:
    return sorted(root.rglob("*.proto"))


def generated_files(root: Path) -> dict[Path, bytes]:
    return {
        path.relative_to(root): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name.endswith(GENERATED_SUFFIXES)
    }


def generate(out_dir: Path, root: Path = PROTO_ROOT) -> None:
    mypy_plugin = Path(sys.executable).parent / "protoc-gen-mypy"
    mypy_grpc_plugin = Path(sys.executable).parent / "protoc-gen-mypy_grpc"
    well_known = resources.files("grpc_tools") / "_proto"
    arguments = [
        "grpc_tools.protoc",
        f"--proto_path={root}",
        f"--proto_path={well_known}",
        f"--plugin=protoc-gen-mypy={mypy_plugin}",
        f"--plugin=protoc-gen-mypy_grpc={mypy_grpc_plugin}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--mypy_out={out_dir}",
        f"--mypy_grpc_out={out_dir}",
        *(str(path.relative_to(root)) for path in proto_files(root)),
    ]
    if protoc.main(arguments) != 0:
        raise SystemExit("protoc failed; see the messages above")


def stale_stubs(root: Path = PROTO_ROOT) -> list[str]:
    """Paths (relative to root) whose committed stub differs from a fresh generation."""
    with tempfile.TemporaryDirectory() as scratch:
        fresh_root = Path(scratch)
        generate(fresh_root, root)
        fresh = generated_files(fresh_root)
    committed = generated_files(root)
    return sorted(
        str(path) for path in fresh.keys() | committed.keys() if fresh.get(path) != committed.get(path)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if committed stubs are stale")
    args = parser.parse_args()
    if args.check:
        stale = stale_stubs()
        if stale:
            print("stale gRPC stubs (run `make protos`):", *stale, sep="\n  ", file=sys.stderr)
            raise SystemExit(1)
        print(f"gRPC stubs are current ({len(proto_files())} proto files)")
        return
    for stub in generated_files(PROTO_ROOT):
        (PROTO_ROOT / stub).unlink()
    generate(PROTO_ROOT)
    print(f"generated stubs for {len(proto_files())} proto files")
