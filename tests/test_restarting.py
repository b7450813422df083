"""`make run`'s restart of a process that exits: back-off, the bad-setting exit, a clean stop."""

import os
import signal
import subprocess
import time
from pathlib import Path

from sstools.devstack.restarting import Backoff, command_line


def test_the_back_off_doubles_to_its_ceiling_and_starts_over_after_a_stable_run() -> None:
    backoff = Backoff(first=1, most=8, stable_after=60)
    assert [backoff.after(ran_for=0.5) for _ in range(6)] == [1, 2, 4, 8, 8, 8]
    assert backoff.after(ran_for=61) == 1
    assert backoff.after(ran_for=3) == 2


def _wrapped(name: str, command: str) -> "subprocess.Popen[str]":
    # in a process group of its own, as the stack's supervisor starts each process
    return subprocess.Popen(
        command_line(name, command),
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _starts(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_process_that_exits_is_started_again_and_a_signal_to_the_group_stops_it(tmp_path: Path) -> None:
    log = tmp_path / "starts"
    wrapper = _wrapped("worker", f"echo started >> {log}; exit 1")
    assert wrapper.stderr is not None
    # each line is said once its run has ended: after the third, the wrapper waits out 4 s
    said = [wrapper.stderr.readline().rstrip("\n") for _ in range(3)]
    assert said == [f"worker exited (1); restart {n} in {delay} s" for n, delay in ((1, 1), (2, 2), (3, 4))]
    os.killpg(wrapper.pid, signal.SIGTERM)  # while it waits out the back-off
    assert wrapper.wait(timeout=10) == 1
    assert wrapper.stderr.read() == ""
    time.sleep(1.5)
    assert _starts(log) == 3  # and nothing started after the stop


def test_a_running_process_stopped_with_its_group_is_not_restarted(tmp_path: Path) -> None:
    log = tmp_path / "starts"
    wrapper = _wrapped("server", f"echo started >> {log}; exec sleep 60")
    deadline = time.monotonic() + 30
    while _starts(log) < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(wrapper.pid, signal.SIGTERM)
    assert wrapper.wait(timeout=10) == 128 + signal.SIGTERM
    time.sleep(1.5)
    assert _starts(log) == 1
    assert wrapper.stderr is not None
    assert wrapper.stderr.read() == ""


def test_a_killed_process_is_restarted(tmp_path: Path) -> None:
    log = tmp_path / "starts"
    wrapper = _wrapped("server", f"echo $$ >> {log}; exec sleep 60")
    try:
        deadline = time.monotonic() + 30
        while _starts(log) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(int(log.read_text().split()[0]), signal.SIGKILL)
        while _starts(log) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _starts(log) == 2
        assert wrapper.poll() is None
    finally:
        os.killpg(wrapper.pid, signal.SIGTERM)
        wrapper.wait(timeout=10)
    assert wrapper.stderr is not None
    assert wrapper.stderr.read().splitlines() == ["server exited (-9); restart 1 in 1 s"]


def test_a_bad_setting_is_not_restarted_the_wrapper_exits_with_it(tmp_path: Path) -> None:
    log = tmp_path / "starts"
    wrapper = _wrapped("ops", f"echo started >> {log}; echo 'OPS_HTTP_PORT: not a port' >&2; exit 2")
    assert wrapper.wait(timeout=30) == 2
    assert _starts(log) == 1
    assert wrapper.stderr is not None
    assert wrapper.stderr.read() == "OPS_HTTP_PORT: not a port\n"
