"""`make run`'s supervisor end to end: embedded database, every service ready, data kept, clean stop."""

import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import psycopg
import pytest

from sstools.devstack.stack import SETTINGS, addresses, is_ready
from sstools.devstack.testing import free_port

READY_BANNER = "SS-Tools stack is ready:"


class RunningStack:
    """`sstools-stack` in its own process group, as a terminal runs it, with its output read live."""

    def __init__(self, data_dir: Path, environment: dict[str, str]) -> None:
        self.environment = environment
        self.process = subprocess.Popen(
            ["sstools-stack", "--data-dir", str(data_dir), "--ready-timeout", "120"],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if text in self.lines.get(timeout=1):
                    return
            except queue.Empty:
                if self.process.poll() is not None:
                    break
        raise AssertionError(f"no {text!r} in stack output:\n{''.join(self.output)}")

    def descendants(self) -> list[psutil.Process]:
        children: list[psutil.Process] = psutil.Process(self.process.pid).children(recursive=True)
        return children

    def interrupt(self) -> int:
        """Ctrl-C: SIGINT to the whole foreground process group."""
        if self.process.poll() is not None:
            raise AssertionError(f"stack exited early ({self.process.returncode}):\n{''.join(self.output)}")
        os.killpg(self.process.pid, signal.SIGINT)
        return self.process.wait(timeout=60)


@pytest.fixture
def stack_environment() -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    for name, settings_class in SETTINGS.items():
        for field in settings_class.model_fields:
            if field.endswith("_port"):
                environment[f"{name.upper()}_{field.upper()}"] = str(free_port())
    return environment


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "pg"


def _postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().split()[0])


def test_stack_runs_every_service_on_embedded_postgres_keeps_data_and_stops_clean(
    data_dir: Path, stack_environment: dict[str, str]
) -> None:
    database = f"postgresql://postgres@/sstools?host={data_dir}"

    first = RunningStack(data_dir, stack_environment)
    try:
        first.wait_for(READY_BANNER, 150)
        services = addresses(stack_environment)
        assert {service.name for service in services} == set(SETTINGS)
        assert all(is_ready(service) for service in services)
        started = [*first.descendants(), psutil.Process(_postmaster_pid(data_dir))]
        with psycopg.connect(database, autocommit=True) as connection:
            connection.execute("CREATE TABLE kept_between_runs (note text)")
            connection.execute("INSERT INTO kept_between_runs VALUES ('first run')")
            versions = connection.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'alembic_version_%'"
            ).fetchone()
        assert versions == (2,)  # convo and ops were migrated before they started
    finally:
        returncode = first.interrupt()
    assert returncode == 0, "".join(first.output)
    assert len(started) >= len(SETTINGS) + 1
    assert [process.pid for process in started if _alive(process)] == []
    assert "embedded PostgreSQL stopped" in "".join(first.output)

    second = RunningStack(data_dir, stack_environment)
    try:
        second.wait_for(READY_BANNER, 150)
        with psycopg.connect(database) as connection:
            assert connection.execute("SELECT note FROM kept_between_runs").fetchall() == [("first run",)]
        started = [*second.descendants(), psutil.Process(_postmaster_pid(data_dir))]
    finally:
        assert second.interrupt() == 0, "".join(second.output)
    assert [process.pid for process in started if _alive(process)] == []


def _alive(process: psutil.Process) -> bool:
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
