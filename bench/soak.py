"""Soak: 20 conversations for 5 minutes against `make run`'s whole stack (embedded PostgreSQL,
its own dev and prod Superset). Each conversation is a person of their own (an admin made for the
run, so deploys to prod are theirs to confirm) reading between messages (1–3 s):
mostly questions; every fifth turn a file (a PDF or a workbook, uploaded to convo first as the
page does) and a question about it; every fifth a deploy of its own dashboard to prod, confirmed
on its card.

Figures: turns, errors (a turn that failed or ended in another state than it should), first
event p50/p99, and the RSS of every service at the start (after each conversation's first turn)
and at the end. Goals: 0 errors; RSS growth under 10 %.

    .venv/bin/python bench/soak.py [--minutes 5] [--conversations 20]
"""

import argparse
import asyncio
import json
import random
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from agent import LightChat
from stats import percentiles
from wholestack import WholeStack, whole_stack

from sstools.devstack.documents import pdf, xlsx
from sstools.devstack.paths import DATA_DIR
from sstools.devstack.testing import sign_in
from sstools.ops.superset import dashboards

RSS_GOAL_PERCENT = 10.0
CYCLE = 5  # turns until a person has sent every kind: question, question, file, deploy, question


@dataclass
class Tally:
    turns: int = 0
    errors: list[str] = field(default_factory=list)
    first_event_ms: list[float] = field(default_factory=list)


@dataclass
class Person:
    """One conversation: what it sends, in order, and what each turn must end in."""

    http: httpx.AsyncClient
    stack: WholeStack
    token: str
    dashboard_id: int
    documents: list[tuple[str, bytes]]  # name, content
    tally: Tally
    pace: random.Random

    async def upload(self, conversation: str, document: tuple[str, bytes]) -> str:
        name, content = document
        uploaded = await self.http.post(
            f"{self.stack.convo_url}/api/assistant/conversations/{conversation}/uploads",
            params={"name": name},
            content=content,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/octet-stream"},
        )
        uploaded.raise_for_status()
        return str(uploaded.json()["upload_id"])

    async def turn(self, chat: LightChat, expected: str, *args: Any, **kwargs: Any) -> None:
        self.tally.turns += 1
        try:
            marks = await asyncio.wait_for(chat.turn(*args, **kwargs), 120)
        except (httpx.HTTPError, RuntimeError, TimeoutError, ValueError) as failure:
            self.tally.errors.append(f"{args[0][:40]!r}: {failure!r}"[:300])
            return
        self.tally.first_event_ms.append(marks["first_event"])
        if chat.state != expected:
            self.tally.errors.append(f"{args[0][:40]!r} ended {chat.state}, not {expected}")

    async def talk(self, number_of_turns: int | None, until: float) -> None:
        chat = LightChat(self.http, self.stack.chat_url, self.token)
        conversation = str(uuid.uuid4())
        number = 0
        while (number_of_turns is None or number < number_of_turns) and time.monotonic() < until:
            number += 1
            if number % 5 == 3:
                upload = await self.upload(conversation, self.documents[number % len(self.documents)])
                await self.turn(
                    chat, "success", "что в этом документе?", conversation, files=json.dumps([upload])
                )
            elif number % 5 == 4:
                ask = f"задеплой дашборд {self.dashboard_id} из dev в prod"
                await self.turn(chat, "needs_confirmation", ask, conversation)
                await self.turn(chat, "success", "", conversation, action="confirm")
            else:
                await self.turn(chat, "success", f"покажи дашборды {number}", conversation)
            await asyncio.sleep(self.pace.uniform(1, 3))


async def rss_series(stack: WholeStack, until: float) -> dict[str, list[float]]:
    """Each service's RSS once a minute while the soak runs: a plateau is warm-up, a slope a leak."""
    samples: dict[str, list[float]] = {}
    while time.monotonic() < until:
        await asyncio.sleep(min(60, max(until - time.monotonic(), 0)))
        for name, value in rss_mb(stack).items():
            samples.setdefault(name, []).append(value)
    return samples


def rss_mb(stack: WholeStack) -> dict[str, float]:
    return {
        name: round(process.memory_info().rss / 2**20, 1)
        for name, process in sorted(stack.services().items())
    }


def people_signed_in(stack: WholeStack, count: int) -> list[str]:
    """``count`` admins of their own (each person has their own upload quota and turn limit;
    deploying to prod takes an admin), made by `make run`'s admin, each signed in."""
    ops = f"http://127.0.0.1:{stack.environment['OPS_HTTP_PORT']}"
    admin = {"Authorization": f"Bearer {stack.sign_in()}"}
    tokens = []
    for number in range(count):
        name, password = f"soak-{number:02d}-{uuid.uuid4().hex[:4]}", uuid.uuid4().hex
        made = httpx.post(
            f"{ops}/api/admin/users",
            json={"username": name, "password": password, "role": "admin"},
            headers=admin,
        )
        made.raise_for_status()
        tokens.append(sign_in(ops, password, username=name))
    return tokens


async def soak(
    stack: WholeStack, documents: list[tuple[str, bytes]], conversations: int, minutes: float
) -> dict[str, Any]:
    tokens = await asyncio.to_thread(people_signed_in, stack, conversations)
    dev = stack.superset("dev")
    own = [
        (await dashboards.create(dev, f"Soak {uuid.uuid4().hex[:6]}", None, True)).id
        for _ in range(conversations)
    ]
    await dev.aclose()
    tally = Tally()
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=4 * conversations)) as http:
        people = [
            Person(http, stack, token, dashboard, documents, tally, random.Random(index))
            for index, (token, dashboard) in enumerate(zip(tokens, own, strict=True))
        ]
        # Warm-up: each person once through every kind of turn (question, file, deploy and confirm),
        # so the start figure holds every code path's first-use memory, not just the first question.
        warm_until = time.monotonic() + 300
        await asyncio.gather(*(person.talk(CYCLE, warm_until) for person in people))
        at_start = rss_mb(stack)
        started = time.monotonic()
        series = asyncio.create_task(rss_series(stack, started + minutes * 60))
        await asyncio.gather(*(person.talk(None, started + minutes * 60) for person in people))
        elapsed = time.monotonic() - started
        samples = await series
    at_end = rss_mb(stack)
    growth = {name: round(100 * (at_end[name] - at_start[name]) / at_start[name], 1) for name in at_start}
    return {
        "minutes": round(elapsed / 60, 1),
        "turns": tally.turns,
        "errors": len(tally.errors),
        "first_errors": tally.errors[:10],
        "first_event": percentiles(tally.first_event_ms),
        "rss_mb_at_start": at_start,
        "rss_mb_at_end": at_end,
        "rss_growth_percent": growth,
        "rss_mb_every_minute": samples,
        "rss_growth_under_goal": all(value < RSS_GOAL_PERCENT for value in growth.values()),
    }


def run(conversations: int, minutes: float) -> dict[str, Any]:
    DATA_DIR.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="soak-", dir=DATA_DIR) as scratch:
        folder = Path(scratch)
        made = [
            pdf(folder, "отчёт.pdf", ["Выручка за квартал выросла на 12 %.", "Отток клиентов снизился."]),
            xlsx(folder, "план.xlsx", [["месяц", "план"], ["январь", "100"], ["февраль", "120"]]),
        ]
        documents = [(path.name, path.read_bytes()) for path in made]
        with whole_stack(folder) as stack:
            return asyncio.run(soak(stack, documents, conversations, minutes))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--conversations", type=int, default=20)
    args = parser.parse_args()
    results = run(args.conversations, args.minutes)
    print(json.dumps({"benchmark": "soak", "conversations": args.conversations, **results}, indent=2))


if __name__ == "__main__":
    main()
