"""The page's browser suite (web/e2e: Vitest driving Debian's Chromium) against a running stack.

The stack test runs it once (tests/test_stack.py). ``sstools-browser-suite --runs N`` starts a
stack of its own once — a fresh data folder, free ports, the real Superset pair — and runs the
suite N times over it, printing a JSON line per run (passed or not, seconds, the tests that
failed) and a last line with the tally and the median time: the suite's own flakiness, measured.
"""

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import delete

from sstools.common.catalogue import Role
from sstools.common.db import create_engine
from sstools.devstack import documents
from sstools.devstack.paths import REPO_ROOT
from sstools.devstack.running import RunningStack, stack_environment
from sstools.devstack.stack import LOCAL_SSO_SWITCH, OIDC_PROVIDER_NAME, page_address
from sstools.devstack.superset import default_home
from sstools.devstack.testing import free_port
from sstools.ops.store.tables import limits
from sstools.ops.store.users import UserStore

ANALYST, ANALYST_PASSWORD = "anna", "anna-analyst-pass-123"  # the page's permission-denied case
SCREENSHOTS = REPO_ROOT / "web" / "test-results" / "screenshots"  # CI keeps them as artifacts
SUITE_TIMEOUT_SECONDS = 900


@dataclass
class SuiteRun:
    """One run of the suite: its exit code, output, wall time and each test's outcome."""

    returncode: int
    output: str
    seconds: float
    outcomes: dict[str, str] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)  # a failed test's first lines

    def summary(self) -> dict[str, Any]:
        return {
            "passed": self.returncode == 0,
            "seconds": round(self.seconds, 1),
            "tests": len(self.outcomes),
            "failed": self.failures,
        }


async def add_analyst(database_url: str) -> None:
    """The analyst the permission-denied case signs in as."""
    engine = create_engine(database_url)
    try:
        await UserStore(engine).create(ANALYST, ANALYST_PASSWORD, Role.ANALYST)
    finally:
        await engine.dispose()


async def forget_sign_in_failures(database_url: str) -> None:
    """Every run's browser signs in from the same loopback address, and the wrong-password case
    fails six times: over runs, ops' per-address limit (20 failures an hour) would block the
    address mid-case. Each run starts with none counted."""
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(delete(limits).where(limits.c.key.startswith("login:address:")))
    finally:
        await engine.dispose()


def run_suite(
    environment: dict[str, str],
    data_root: Path,
    database_url: str,
    supersets: Mapping[str, str],
    screenshots: Path = SCREENSHOTS,
) -> SuiteRun:
    """web/e2e against the stack that ``environment`` describes, with the secrets it keeps in
    ``data_root``, its database at ``database_url`` and its Supersets at ``supersets`` (the
    drawer's cases); each state's screenshots in ``screenshots``."""
    asyncio.run(forget_sign_in_failures(database_url))
    report = documents.pdf(
        data_root, "квартальный-отчёт.pdf", ["Квартальный отчёт", "Риск: задержка поставок в регионе Сибирь."]
    )
    results = data_root / "e2e-results.json"
    results.unlink(missing_ok=True)
    # an earlier run's screenshots would pass for this one's: the folder holds this run's alone
    shutil.rmtree(screenshots, ignore_errors=True)
    started = time.monotonic()
    e2e = subprocess.run(
        [
            *("npm", "--prefix", str(REPO_ROOT / "web"), "--loglevel=error", "run", "e2e", "--"),
            *("--reporter=default", "--reporter=json", f"--outputFile={results}"),
        ],
        env={
            **environment,
            "E2E_BASE_URL": page_address(environment).url,
            "E2E_USERNAME": "admin",
            "E2E_PASSWORD": (data_root / "ops-admin-password").read_text().strip(),
            "E2E_ANALYST_USERNAME": ANALYST,
            "E2E_ANALYST_PASSWORD": ANALYST_PASSWORD,
            "E2E_PDF": str(report),
            "E2E_SUPERSET_DEV": supersets["dev"],
            "E2E_SUPERSET_PROD": supersets["prod"],
            "E2E_SUPERSET_PASSWORD": default_home().admin_password(),
            # the stack's sign-in provider: its people file (a test moves a person to another
            # group) and the name its button shows
            **(
                {}
                if environment.get(LOCAL_SSO_SWITCH) == "off"
                else {
                    "E2E_OIDC_PEOPLE": str(data_root / "oidc" / "people.json"),
                    "E2E_SSO_NAME": OIDC_PROVIDER_NAME,
                }
            ),
            "E2E_SCREENSHOTS": str(screenshots),
            # the stack's own signing key: the session tests make tokens that end soon
            "E2E_SIGNING_KEY": (data_root / "jwt-private-key.pem").read_text(),
        },
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT_SECONDS,
    )
    run = SuiteRun(e2e.returncode, e2e.stdout + e2e.stderr, time.monotonic() - started)
    if results.exists():
        for suite in json.loads(results.read_text())["testResults"]:
            for test in suite["assertionResults"]:
                run.outcomes[test["title"]] = test["status"]
                if test["status"] == "failed":  # not one its stack's configuration skips
                    run.failures[test["title"]] = "\n".join(test["failureMessages"])[:600]
    return run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10, help="how many times to run the suite")
    parser.add_argument(
        "--without-sso", action="store_true", help="a stack with no sign-in provider: passwords alone"
    )
    args = parser.parse_args()
    environment = stack_environment()
    if args.without_sso:
        environment[LOCAL_SSO_SWITCH] = "off"
    runs: list[SuiteRun] = []
    with tempfile.TemporaryDirectory(prefix="browser-suite-") as folder:
        data_dir = Path(folder) / "pg"
        stack = RunningStack(data_dir, environment, f"dev={free_port()},prod={free_port()}")
        try:
            stack.wait_until_ready()
            database = f"postgresql://postgres@/sstools?host={data_dir}"
            asyncio.run(add_analyst(database))
            for number in range(1, args.runs + 1):
                shots = Path(folder) / "screenshots"
                runs.append(run_suite(environment, Path(folder), database, stack.supersets, shots))
                print(json.dumps({"run": number, **runs[-1].summary()}, ensure_ascii=False), flush=True)
                if runs[-1].returncode and not runs[-1].outcomes:
                    print(runs[-1].output[-4000:], flush=True)  # it did not get as far as its tests
        finally:
            stopped = stack.interrupt() if stack.process.poll() is None else stack.process.returncode
            stack.kill_leftovers()
    times = [run.seconds for run in runs]
    passed = sum(run.returncode == 0 for run in runs)
    tally = {"runs": len(runs), "passed": passed, "median_seconds": round(statistics.median(times), 1)}
    print(json.dumps({**tally, "stack_stopped_with": stopped}), flush=True)
    if passed < len(runs):
        raise SystemExit(1)
