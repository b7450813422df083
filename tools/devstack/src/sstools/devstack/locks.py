"""One process at a time on this machine: test workers, `make run` and `make images` share what
they set up under ``.data``."""

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(lock_file: Path) -> Iterator[None]:
    """Held by this process alone until the block ends (the system lets go if the process dies);
    the file and its folder are made if missing."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
