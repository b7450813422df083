"""Prometheus' ``promtool``, which checks alerting rules and runs their unit tests without a
Prometheus: it comes with Debian's ``prometheus`` package (``.ci/run`` installs it)."""

import shutil
import subprocess
from pathlib import Path

DEBIAN_PROMTOOL = Path("/usr/bin/promtool")  # where the package puts it, should PATH leave it out


class PromtoolMissing(Exception):
    """No promtool here: the message says how to get one."""


def promtool() -> Path:
    found = shutil.which("promtool")
    if found is not None:
        return Path(found)
    if DEBIAN_PROMTOOL.is_file():
        return DEBIAN_PROMTOOL
    raise PromtoolMissing(
        f"promtool is neither on PATH nor at {DEBIAN_PROMTOOL}: apt-get install prometheus (Debian's "
        "package ships it; .ci/run installs it)"
    )


def run_promtool(*arguments: str | Path) -> subprocess.CompletedProcess[str]:
    """``promtool <arguments>``, its exit status and what it printed, for the caller to judge."""
    return subprocess.run(
        [str(promtool()), *map(str, arguments)], capture_output=True, text=True, timeout=120
    )
