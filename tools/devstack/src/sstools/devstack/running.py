"""`sstools-stack` driven as a person at a terminal drives it, for the tests and the browser
suite's runner: in its own process group, its output on a pipe, stopped with Ctrl-C."""

import contextlib
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import psutil

from sstools.devstack.paths import VENV_BIN, on_venv_path
from sstools.devstack.stack import NOT_READY, READY_BANNER, READY_TIMEOUT_SECONDS, SETTINGS
from sstools.devstack.testing import free_port

STOP_TIMEOUT = 90  # Ctrl-C to the last process gone: every service's grace, and the databases'
# Variables a developer's shell may set that would point the stack at something else.
_GIVEN = (
    "DATABASE_URL",
    "ENVIRONMENTS",
    "JWT_PRIVATE_KEY",
    "JWT_PUBLIC_KEYS",
    "CONFIRMATION_SECRET",
    "OPS_ADMIN_PASSWORD",
    "OPS_OIDC_ISSUER",
)


def free_listeners() -> dict[str, str]:
    """Every listener's variable (``<SERVICE>_<LISTENER>_PORT``, the page's ``WEB_PORT``, the
    sign-in provider's ``SSTOOLS_OIDC_PORT`` and Prometheus' ``SSTOOLS_PROMETHEUS_PORT``), each set
    to a free port."""
    listeners = {
        f"{name.upper()}_{field.upper()}": str(free_port())
        for name, settings_class in SETTINGS.items()
        for field in settings_class.model_fields
        if field.endswith("_port")
    }
    return {
        **listeners,
        **{name: str(free_port()) for name in ("WEB_PORT", "SSTOOLS_OIDC_PORT", "SSTOOLS_PROMETHEUS_PORT")},
    }


def stack_environment() -> dict[str, str]:
    """This process's environment for a stack of its own: every listener on a free port, the
    offline model paced, so that an answer streams for seconds as a real model's would, and the
    person's heavy reads not budgeted: the browser suite, the eval and the task study ask as one
    person far faster than anyone does (ops' own tests check the budget)."""
    environment = {key: value for key, value in os.environ.items() if key not in _GIVEN}
    environment["PATH"] = on_venv_path(environment.get("PATH"))  # the page's suite runs npm by name
    environment.update(free_listeners())
    environment["AGENT_OFFLINE_WORDS_PER_SECOND"] = "12"  # the browser suite stops one halfway
    environment["AGENT_TASK_WAIT_SHARE"] = "0"  # a deploy answers "started": the page follows it
    environment["OPS_HEAVY_READS_PER_MINUTE"] = "100000"
    return environment


def _postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().split()[0])


class RunningStack:
    """`sstools-stack` in its own process group, as a terminal runs it, its output on a pipe."""

    def __init__(self, data_dir: Path, environment: dict[str, str], superset_ports: str) -> None:
        # where each local Superset is opened in a browser (its drawer's page is this stack's)
        self.supersets = {
            env_id: f"http://127.0.0.1:{port}"
            for env_id, port in (pair.split("=", 1) for pair in superset_ports.split(",") if pair)
        }
        self._output_fd, write_fd = os.pipe()
        self.process = subprocess.Popen(
            [
                *(str(VENV_BIN / "sstools-stack"), "--data-dir", str(data_dir)),
                *("--superset-ports", superset_ports),
            ],
            env=environment,
            stdout=write_fd,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        os.close(write_fd)
        self._output = b""
        self.started: list[psutil.Process] = []

    @property
    def output(self) -> str:
        return self._output.decode(errors="replace")

    def _read(self, timeout: float) -> bool:
        """Read what is there within ``timeout``; False at end of output."""
        if not select.select([self._output_fd], [], [], timeout)[0]:
            return True
        chunk = os.read(self._output_fd, 65536)
        self._output += chunk
        return bool(chunk)

    def _read_until(self, *texts: str, timeout: float) -> None:
        """Until one of ``texts`` is in the output, the output ends, or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while not any(text in self.output for text in texts):
            if time.monotonic() > deadline or not self._read(1):
                break

    def problems(self) -> str:
        """The warnings and errors its services logged so far, for the message of a test that
        failed while the stack ran (what the page showed says what, these say why)."""
        while self._read(0.1) and select.select([self._output_fd], [], [], 0)[0]:
            pass
        marks = ('"level": "warning"', '"level": "error"', '"level": "critical"', "Traceback")
        return "\n".join(line for line in self.output.splitlines() if any(mark in line for mark in marks))

    def wait_for(self, text: str, timeout: float) -> None:
        self._read_until(text, timeout=timeout)
        assert text in self.output, f"no {text!r} in stack output ({machine_load()}):\n{self.output}"

    def wait_until_ready(self, timeout: float = READY_TIMEOUT_SECONDS + 240) -> None:
        """Until the banner; the stack gives up by itself (its ready-timeout) or exits first, and
        ``timeout`` also covers its databases' and local Supersets' start before that."""
        self._read_until(READY_BANNER, NOT_READY, timeout=timeout)
        assert READY_BANNER in self.output, f"stack not ready ({machine_load()}):\n{self.output}"

    def kill_leftovers(self) -> None:
        """After a failed test: nothing this stack started may outlive it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for process in self.started:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()

    def record_started(self, data_dir: Path) -> list[psutil.Process]:
        """Every process the stack runs now: its supervisor's children and the database server."""
        self.started = [*self.descendants(), psutil.Process(_postmaster_pid(data_dir))]
        return self.started

    def descendants(self) -> list[psutil.Process]:
        children: list[psutil.Process] = psutil.Process(self.process.pid).children(recursive=True)
        return children

    def interrupt(self, *, hang_up_first: bool = False) -> int:
        """Ctrl-C: SIGINT to the whole foreground process group.

        ``hang_up_first`` closes the reading end before, as when `make run | tee` loses its tee
        to the same Ctrl-C: the stack must still stop everything.
        """
        if self.process.poll() is not None:
            raise AssertionError(f"stack exited early ({self.process.returncode}):\n{self.output}")
        if hang_up_first:
            os.close(self._output_fd)
            os.killpg(self.process.pid, signal.SIGINT)
            return self.process.wait(timeout=STOP_TIMEOUT)
        os.killpg(self.process.pid, signal.SIGINT)
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline and self._read(1):
            pass
        os.close(self._output_fd)
        try:
            return self.process.wait(timeout=max(deadline - time.monotonic(), 0) + 5)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"stack still running {STOP_TIMEOUT} s after Ctrl-C ({machine_load()}):\n{self.output}"
            ) from None


def machine_load() -> str:
    """What else this machine is doing, for a message about something that was too slow."""

    def cpu_seconds(process: psutil.Process) -> float:
        times = process.info["cpu_times"]
        return float(times.user + times.system) if times else 0.0

    busiest = sorted(psutil.process_iter(["pid", "name", "cpu_times", "cmdline"]), key=cpu_seconds)[-6:]
    lines = (
        f"{process.pid} {cpu_seconds(process):.0f} s: "
        + " ".join(process.info["cmdline"] or [process.info["name"]])[:120]
        for process in reversed(busiest)
    )
    return f"load average {os.getloadavg()}; most CPU used by: " + "; ".join(lines)
