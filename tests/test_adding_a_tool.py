"""A tool is one unit: a throwaway 25th tool, declared once in a package of its own with the ops
handler that performs it (tests/fixtures/added-tool), installed beside the project — and the
whole stack routes it, gates it, plans it and answers it, with no file of the project changed.

The stack runs in a pytest of its own: the catalogue reads installed tools once, when it is
first imported, and this process imported it long before."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sstools.common.catalogue import TOOLS
from sstools.devstack.paths import REPO_ROOT

ADDED = REPO_ROOT / "tests" / "fixtures" / "added-tool"


def test_the_project_itself_does_not_know_the_added_tool() -> None:
    assert "rotate_cache_keys" not in {spec.name for spec in TOOLS}
    assert len(TOOLS) == 24


@pytest.mark.timeout(900)
def test_a_tool_declared_once_in_an_installed_package_works_end_to_end(tmp_path: Path) -> None:
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ADDED), os.environ.get("PYTHONPATH")])),
    }
    checked = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", str(ADDED / "check_added_tool.py")),
            *("-p", "no:cacheprovider", "-p", "no:xdist", "-q", "--timeout", "600"),
            # A basetemp of its own: a pytest that makes one under /tmp/pytest-of-<user> takes away
            # the traversal rights the embedded PostgreSQL of a stack test running beside it needs.
            *("--basetemp", str(tmp_path / "inner")),
        ],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=800,
    )
    assert checked.returncode == 0, checked.stdout[-6000:] + checked.stderr[-3000:]
    assert "2 passed" in checked.stdout, checked.stdout[-3000:]
