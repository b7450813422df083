"""`make mutation`: mutation testing of the safety core with mutmut.

Each module of :data:`SAFETY_CORE` is mutated alone, in its own workspace under
``.data/mutation/<name>/`` (mutmut copies the module's whole package there and imports the
mutated copy first), against the fast tests that cover it. A mutant the tests do not notice
survives; the score is the share of mutants killed. One JSON object per module is printed:
its counts, score and every survivor's diff.

``--record`` keeps each module's score in :data:`RECORD`, with the digest of the source and
tests it was measured on. ``--changed`` mutates only the modules whose source or tests differ
from what the record measured: `make test` (and so CI) runs it with ``--min-score``, so a
change to the safety core or its tests is not green unless its tests still notice mutants.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sstools.devstack.paths import DATA_DIR, REPO_ROOT, VENV_BIN
from sstools.devstack.postgres import database_url

WORKSPACES = DATA_DIR / "mutation"
RECORD = REPO_ROOT / "tools" / "devstack" / "mutation-scores.json"
# mutmut's exit codes of a mutant's test run (mutmut.stats.status_by_exit_code): a failing
# test run kills a mutant, as does one that times out (an endless loop is noticed).
FAILED_CODES = frozenset({1, 3})
TIMEOUT_CODES = frozenset({24, -24, 36, 152, 255})
SKIPPED_CODE = 34


@dataclass(frozen=True)
class Target:
    """One module of the safety core: its package's source root, its path there, its tests."""

    source_root: str
    module: str
    tests: tuple[str, ...]

    def files(self) -> list[str]:
        return [f"{self.source_root}/{self.module}", *self.tests]


COMMON = "libs/common/src"
AGENT = "services/agent/src"
OPS = "services/ops/src"
SAFETY_CORE: dict[str, Target] = {
    "policy": Target(
        COMMON,
        "sstools/common/policy.py",
        ("libs/common/tests/test_policy.py", "libs/common/tests/test_catalogue.py"),
    ),
    "sql": Target(
        COMMON,
        "sstools/common/sql.py",
        ("libs/common/tests/test_sql.py", "libs/common/tests/test_sql_columns.py"),
    ),
    "sql_columns": Target(
        COMMON, "sstools/common/sql_columns.py", ("libs/common/tests/test_sql_columns.py",)
    ),
    "tokens": Target(COMMON, "sstools/common/tokens.py", ("libs/common/tests/test_tokens.py",)),
    "confirmation": Target(
        COMMON, "sstools/common/confirmation.py", ("libs/common/tests/test_confirmation.py",)
    ),
    "gate": Target(AGENT, "sstools/agent/gate.py", ("services/agent/tests/test_gate.py",)),
    "limits": Target(AGENT, "sstools/agent/limits.py", ("services/agent/tests/test_limits.py",)),
    "admission": Target(AGENT, "sstools/agent/admission.py", ("services/agent/tests/test_admission.py",)),
    "fastpath": Target(AGENT, "sstools/agent/fastpath.py", ("services/agent/tests/test_fastpath.py",)),
    "guard": Target(OPS, "sstools/ops/api/guard.py", ("services/ops/tests/test_guard.py",)),
    "idempotency": Target(OPS, "sstools/ops/api/idempotency.py", ("services/ops/tests/test_idempotency.py",)),
}


def digest(target: Target) -> str:
    """What a score was measured on: the module's and its tests' paths and contents."""
    hashed = hashlib.sha256()
    for file in target.files():
        hashed.update(file.encode() + b"\0" + (REPO_ROOT / file).read_bytes() + b"\0")
    return hashed.hexdigest()


def recorded() -> dict[str, dict[str, Any]]:
    return json.loads(RECORD.read_text()) if RECORD.exists() else {}


def changed_modules() -> list[str]:
    """The safety-core modules whose source or tests differ from what the record measured."""
    record = recorded()
    return [
        name for name, target in SAFETY_CORE.items() if record.get(name, {}).get("digest") != digest(target)
    ]


def score(exit_codes: dict[str, int | None]) -> dict[str, Any]:
    """Counts of a module's mutants by outcome, and the share killed (a mutant no test reaches
    counts as surviving)."""
    killed = [key for key, code in exit_codes.items() if code in FAILED_CODES | TIMEOUT_CODES]
    skipped = [key for key, code in exit_codes.items() if code == SKIPPED_CODE]
    survivors = sorted(set(exit_codes) - set(killed) - set(skipped))
    tested = len(exit_codes) - len(skipped)
    return {
        "mutants": len(exit_codes),
        "killed": len(killed),
        "timed_out": sum(code in TIMEOUT_CODES for code in exit_codes.values()),
        "survived": len(survivors),
        "score": round(100 * len(killed) / tested, 1) if tested else 100.0,
        "survivors": survivors,
    }


def _workspace(name: str, target: Target) -> Path:
    """A fresh workspace: the package's sources, the folders of its tests (mutmut copies both
    into ``mutants/`` and runs the tests there, so they keep their paths) and the settings
    that name the one module to mutate and its tests."""
    workspace = WORKSPACES / name
    shutil.rmtree(workspace, ignore_errors=True)
    workspace.mkdir(parents=True)
    (workspace / "src").symlink_to(REPO_ROOT / target.source_root, target_is_directory=True)
    copied = ["conftest.py", *sorted({str(Path(test).parent) for test in target.tests})]
    for path in copied:
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).symlink_to(REPO_ROOT / path)
    settings = {
        "source_paths": ["src"],
        "only_mutate": [f"src/{target.module}"],
        "also_copy": copied,
        # the repository's pytest settings (import mode, asyncio); no pytest-timeout, whose
        # timer thread a forked test run does not get (mutmut times mutants out itself)
        "pytest_add_cli_args": ["-c", str(REPO_ROOT / "pyproject.toml"), "-p", "no:timeout"],
        "pytest_add_cli_args_test_selection": list(target.tests),
    }
    lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    (workspace / "pyproject.toml").write_text("[tool.mutmut]\n" + "\n".join(lines) + "\n")
    return workspace


# Each survivor's diff, read by mutmut's own function in one process (not a `mutmut show` each).
_DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
path, *names = sys.argv[1:]
print(json.dumps({name: get_diff_for_mutant(name, path=path) for name in names}))
"""


def _diffs(workspace: Path, target: Target, mutants: list[str]) -> dict[str, str]:
    """The changed lines of each mutant."""
    shown = subprocess.run(
        [sys.executable, "-c", _DIFFS, f"src/{target.module}", *mutants],
        cwd=workspace,
        check=True,
        capture_output=True,
        text=True,
    )
    diffs: dict[str, str] = json.loads(shown.stdout)
    return {
        mutant: "\n".join(
            line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("---", "+++")
        )
        for mutant, diff in diffs.items()
    }


def mutate(name: str, max_children: int, environment: dict[str, str]) -> dict[str, Any]:
    """Run mutmut over one module; its score, with each survivor's change."""
    target = SAFETY_CORE[name]
    workspace = _workspace(name, target)
    run = subprocess.run(
        [str(VENV_BIN / "mutmut"), "run", "--max-children", str(max_children)],
        cwd=workspace,
        env=environment,
        capture_output=True,
        text=True,
    )
    meta = workspace / "mutants" / "src" / f"{target.module}.meta"
    exit_codes: dict[str, int | None] = (
        json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
    )
    about = {"module": name, "file": f"{target.source_root}/{target.module}"}
    if run.returncode or not exit_codes or None in exit_codes.values():
        # mutmut stopped short (the tests fail unmutated, or could not be collected)
        return {**about, "error": (run.stdout + run.stderr).strip().splitlines()[-20:]}
    result = {**about, **score(exit_codes)}
    result["survivors"] = _diffs(workspace, target, result["survivors"])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--module", action="append", choices=sorted(SAFETY_CORE), help="only these")
    parser.add_argument("--changed", action="store_true", help="only modules changed since recorded")
    parser.add_argument("--record", action="store_true", help=f"keep the scores in {RECORD.name}")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--min-score", type=float, default=0.0, help="fail when a module scores lower")
    args = parser.parse_args()
    names = args.module or list(SAFETY_CORE)
    if args.changed:
        names = [name for name in names if name in changed_modules()]
        print(f"mutation: modules changed since recorded: {', '.join(names) or 'none'}", flush=True)
    failed = False
    record = recorded()
    # the tests of ops' guard and idempotency use a real PostgreSQL, as `make test` gives them
    with database_url(DATA_DIR / "pg-test", database="sstools_test") as url:
        environment = {**os.environ, "DATABASE_URL": url}
        for name in names:
            measured = digest(SAFETY_CORE[name])
            result = mutate(name, args.max_children, environment)
            print(json.dumps(result, ensure_ascii=False), flush=True)
            if "error" in result or result["score"] < args.min_score:
                failed = True
            elif args.record:
                kept = {key: result[key] for key in ("mutants", "killed", "score")}
                record[name] = {"digest": measured, **kept, "survivors": sorted(result["survivors"])}
                RECORD.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    if failed:
        raise SystemExit(1)
