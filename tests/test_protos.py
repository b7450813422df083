"""The committed gRPC stubs match their .proto files, and an edit without regeneration is caught."""

import shutil
from pathlib import Path

from sstools.devstack.paths import PROTO_ROOT
from sstools.devstack.protos import generate, proto_files, stale_stubs


def test_committed_stubs_are_current() -> None:
    assert stale_stubs() == []


def test_proto_edit_without_regeneration_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "protos"
    shutil.copytree(PROTO_ROOT / "sstools", root / "sstools")
    router_proto = root / "sstools" / "router" / "v1" / "router.proto"
    router_proto.write_text(router_proto.read_text() + "\nmessage AddedLater {\n  string note = 1;\n}\n")
    assert stale_stubs(root) == [
        "sstools/router/v1/router_pb2.py",
        "sstools/router/v1/router_pb2.pyi",
    ]


def test_deleted_stub_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "protos"
    shutil.copytree(PROTO_ROOT / "sstools", root / "sstools")
    (root / "sstools" / "convo" / "v1" / "convo_pb2_grpc.py").unlink()
    assert stale_stubs(root) == ["sstools/convo/v1/convo_pb2_grpc.py"]


def test_every_proto_has_all_four_stubs(tmp_path: Path) -> None:
    generate(tmp_path)
    for proto in proto_files():
        stem = proto.relative_to(PROTO_ROOT).with_suffix("")
        for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi"):
            assert (tmp_path / f"{stem}{suffix}").is_file()
