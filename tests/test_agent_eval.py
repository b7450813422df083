"""The agent's held-out request set, through a stack of its own started as `make run` starts it:
the built-in planner must understand at least the floor's share of requests it was never tuned
on, and answer every one in the person's language (services/agent/eval/README.md)."""

import json
import subprocess
from pathlib import Path

import pytest

from sstools.agent.eval import HOLDOUT
from sstools.devstack import running
from sstools.devstack.paths import REPO_ROOT, VENV_BIN
from sstools.devstack.running import RunningStack
from sstools.devstack.stack import page_address
from sstools.devstack.superset import default_home
from sstools.devstack.testing import free_port

UNDERSTOOD_FLOOR = 0.85
RIGHT_LANGUAGE_FLOOR = 0.98


@pytest.mark.timeout(1500)
def test_the_built_in_planner_meets_its_floors_on_the_held_out_set(tmp_path: Path) -> None:
    environment = running.stack_environment()
    environment["AGENT_OFFLINE_WORDS_PER_SECOND"] = "0"  # the planner's answers need no pacing here
    # ops' default budget of heavy reads, as a person has it: a question costs at most two
    del environment["OPS_HEAVY_READS_PER_MINUTE"]
    stack = RunningStack(tmp_path / "pg", environment, f"dev={free_port()},prod={free_port()}")
    try:
        stack.wait_until_ready()
        supersets = [item for env, url in stack.supersets.items() for item in ("--superset", f"{env}={url}")]
        evaluated = subprocess.run(
            [
                *(str(VENV_BIN / "python"), "-m", "sstools.agent.eval", "--requests", str(HOLDOUT)),
                *("--url", page_address(environment).url),
                *("--password-file", str(tmp_path / "ops-admin-password")),
                *("--superset-password-file", str(default_home().admin_password_file)),
                *supersets,
            ],
            cwd=REPO_ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=1200,
        )
    finally:
        stack.interrupt()
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    report = json.loads(evaluated.stdout)
    print({key: report[key] for key in ("requests", "understood", "right_language")})  # in the run's log
    misses = json.dumps(report["missed"], ensure_ascii=False, indent=1)[:6000]
    assert report["requests"] == len(HOLDOUT.read_text(encoding="utf-8").splitlines())
    assert report["understood"] >= UNDERSTOOD_FLOOR, misses
    assert report["right_language"] >= RIGHT_LANGUAGE_FLOOR, report["wrong_language"]
