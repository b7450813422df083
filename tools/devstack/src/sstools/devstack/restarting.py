"""One Procfile process under `make run`, restarted when it exits, as a cluster restarts a pod.

    python -m sstools.devstack.restarting NAME COMMAND

runs COMMAND with ``/bin/sh -c`` and, when it exits without being asked to, says so and starts
it again after a back-off (1 s, doubling up to 30 s; back to 1 s once a run lasted a minute).
A process that exits with 2 — a bad setting, which no restart mends — is not restarted: this
wrapper exits with it, and the stack stops with the process's own message on screen.

SIGTERM or SIGINT (the stack's supervisor sends them to the whole process group, child
included) stops the restarting: the wrapper waits for its child and exits with its code.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field
from types import FrameType

BAD_SETTING = 2  # a service's exit code for a setting it refuses


@dataclass
class Backoff:
    """How long to wait before the next start."""

    first: float = 1.0
    most: float = 30.0
    stable_after: float = 60.0
    _next: float = field(default=0.0, init=False)

    def after(self, ran_for: float) -> float:
        """The wait before a restart of a run that lasted ``ran_for`` seconds."""
        if ran_for >= self.stable_after or not self._next:
            self._next = self.first
        delay = self._next
        self._next = min(self._next * 2, self.most)
        return delay


def stop_group(process: "subprocess.Popen[bytes]", grace_seconds: float) -> None:
    """SIGTERM to ``process``'s whole group (started with ``start_new_session``), then SIGKILL if
    it has not ended within ``grace_seconds``."""
    for signum, wait in ((signal.SIGTERM, grace_seconds), (signal.SIGKILL, None)):
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signum)
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def command_line(name: str, command: str) -> list[str]:
    """How the stack's supervisor runs ``command`` under this wrapper."""
    return [sys.executable, "-m", __name__, name, command]


def _exit_code(returncode: int) -> int:
    return returncode if returncode >= 0 else 128 - returncode  # killed by a signal: 128 + its number


def run(name: str, command: str, backoff: Backoff) -> int:
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()  # the child had the same signal: it is stopping too

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    restarts = 0
    while True:
        started = time.monotonic()
        returncode = subprocess.Popen(["/bin/sh", "-c", command]).wait()
        if stopping.is_set() or returncode == BAD_SETTING:
            return _exit_code(returncode)
        delay = backoff.after(time.monotonic() - started)
        restarts += 1
        print(f"{name} exited ({returncode}); restart {restarts} in {delay:g} s", file=sys.stderr, flush=True)
        if stopping.wait(delay):
            return _exit_code(returncode)


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    raise SystemExit(run(sys.argv[1], sys.argv[2], Backoff()))


if __name__ == "__main__":
    main()
