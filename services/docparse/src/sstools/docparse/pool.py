"""Parsing happens in worker processes, so a hostile file can only take its own worker down.

Each worker runs under an address-space limit; each file gets a deadline. A worker that runs
out of time is killed; one that dies (out of memory, a crash in a native library) is noticed;
either way it is replaced by a fresh one and the caller gets a typed error. Workers come from a
forkserver that has the parsing libraries preloaded, so a replacement starts in milliseconds
and never inherits the gRPC server's threads.
"""

import asyncio
import logging
import multiprocessing
import resource
import signal
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from sstools.docparse.model import ErrorCode, Extraction, Kind, Limits, ParseFailure

_log = logging.getLogger(__name__)
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["sstools.docparse.extract"])


def _worker_main(connection: Connection, memory_bytes: int, limits: Limits) -> None:
    from sstools.docparse.extract import extract

    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    while True:
        try:
            kind, content = connection.recv()
        except EOFError:
            return
        reply: tuple[Any, ...]
        try:
            reply = ("ok", extract(kind, content, limits))
        except ParseFailure as failure:
            reply = ("failed", failure.code, failure.message, failure.limit_bytes)
        except MemoryError:
            reply = (
                "failed",
                ErrorCode.TOO_LARGE,
                "the file needs more memory than a parser may use",
                memory_bytes,
            )
        except RecursionError:
            reply = ("failed", ErrorCode.MALFORMED, "the file nests too deeply to read", 0)
        except Exception as error:  # noqa: BLE001 — any other library failure means an unreadable file
            reply = ("failed", ErrorCode.MALFORMED, f"the file cannot be read: {error!r:.200}", 0)
        del content
        connection.send(reply)


@contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Start a worker without it re-importing our __main__.

    multiprocessing makes every new process import the parent's main script first; for the
    service that is the console script, which imports the whole gRPC/HTTP stack: ~0.8 s per
    replacement worker for nothing, since the worker's code lives in this importable module.
    """
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


@dataclass
class _Worker:
    process: BaseProcess
    connection: Connection


class ParserPool:
    def __init__(
        self,
        *,
        workers: int,
        memory_bytes: int,
        timeout_seconds: float,
        limits: Limits,
        on_replace: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self._size = workers
        self._memory_bytes = memory_bytes
        self._timeout = timeout_seconds
        self._limits = limits
        self._on_replace = on_replace
        self._idle: asyncio.Queue[_Worker] = asyncio.Queue()
        self._all: list[_Worker] = []

    async def start(self) -> None:
        # Spawning happens on the event loop's thread (a request to the forkserver, milliseconds),
        # so hiding __main__ for it never races another thread.
        for _ in range(self._size):
            self._idle.put_nowait(self._spawn())

    async def parse(self, kind: Kind, content: bytes) -> Extraction:
        worker = await self._idle.get()
        try:
            await asyncio.to_thread(worker.connection.send, (kind, content))
            reply = await asyncio.wait_for(asyncio.to_thread(worker.connection.recv), self._timeout)
        except TimeoutError:
            await self._replace(worker, "timeout")
            raise ParseFailure(ErrorCode.TIMEOUT, f"parsing took longer than {self._timeout:g} s") from None
        except (EOFError, OSError):
            exit_code = await self._replace(worker, "died")
            if exit_code == -signal.SIGKILL:  # the kernel's OOM killer
                raise ParseFailure(
                    ErrorCode.TOO_LARGE,
                    "the parser ran out of memory on this file",
                    limit_bytes=self._memory_bytes,
                ) from None
            raise ParseFailure(
                ErrorCode.MALFORMED, f"the parser crashed on this file (exit {exit_code})"
            ) from None
        except BaseException:
            await self._replace(worker, "cancelled")  # its state is unknown: do not reuse it
            raise
        self._idle.put_nowait(worker)
        if reply[0] == "ok":
            extraction: Extraction = reply[1]
            return extraction
        _, code, message, limit_bytes = reply
        raise ParseFailure(code, message, limit_bytes=limit_bytes)

    async def close(self) -> None:
        for worker in self._all:
            worker.connection.close()
            worker.process.terminate()
        await asyncio.gather(*(asyncio.to_thread(worker.process.join, 5) for worker in self._all))
        self._all.clear()

    @property
    def pids(self) -> list[int | None]:
        return [worker.process.pid for worker in self._all]

    def _spawn(self) -> _Worker:
        parent, child = _CONTEXT.Pipe()
        process = _CONTEXT.Process(
            target=_worker_main,
            args=(child, self._memory_bytes, self._limits),
            daemon=True,
            name="docparse-worker",
        )
        with _main_module_hidden():
            process.start()
        child.close()
        worker = _Worker(process, parent)
        self._all.append(worker)
        return worker

    async def _replace(self, worker: _Worker, reason: str) -> int | None:
        """Kill ``worker`` (if it still runs), start another in its place; return how it exited."""
        await asyncio.to_thread(worker.process.join, 0.5 if reason == "died" else 0)
        exit_code = worker.process.exitcode
        _log.warning(
            "replacing a parser worker",
            extra={"reason": reason, "pid": worker.process.pid, "exit_code": exit_code},
        )
        self._on_replace(reason)
        worker.process.kill()
        worker.connection.close()
        await asyncio.to_thread(worker.process.join, 5)
        self._all.remove(worker)
        self._idle.put_nowait(self._spawn())
        return exit_code
