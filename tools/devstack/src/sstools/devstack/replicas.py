"""Two agent replicas behind a balancer without affinity, as the chart runs several when its
cookie affinity is lost (a pod restarted, a rolling update): conversations whose commands —
reads, deploys left waiting for their card, confirms, rejects, a read stopped while it runs —
alternate between the stack's agent and a process replica of it that is SIGKILLed with every
card waiting and started again; then the same commands on one replica, to compare with.

The replicas test asserts on what a run gives (:class:`RoundRobinRun`); ``bench/replicas.py``
prints it as figures.
"""

import asyncio
import contextlib
import dataclasses
import itertools
import re
import signal
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx

from sstools.devstack.agentstack import AgentStack, Reply, agent_process, dump, new_conversation
from sstools.devstack.testing import service_process
from sstools.ops import jobs
from sstools.ops.store import tables as ops_tables
from sstools.ops.superset import dashboards
from sstools.ops.superset.client import SupersetClient

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# A read that runs seconds in SQLite: long enough to be stopped while it runs.
SLOW_READ = (
    "run this SQL in the examples database on dev: WITH RECURSIVE c AS "
    "(SELECT 1 AS x UNION ALL SELECT x + 1 FROM c WHERE x < 10000000) SELECT count(*) AS n FROM c"
)
# Commands at once: 2 cores serve both replicas and the stack.
AT_ONCE = 4

History = list[tuple[str, str, bool]]  # (role, text, cut short), a run's own names replaced


class RoundRobin:
    """A balancer without affinity: each command goes to the next replica in turn, whichever
    replica its conversation's last command went to. (Within one command — one Gradio session —
    a balancer must keep its requests together: Gradio's queue is a process's own.) It counts
    what it sent where, what was sent again, and how long each kind of command took."""

    def __init__(self, replicas: list[AgentStack]) -> None:
        self._next = itertools.cycle(replicas)
        self.sent: Counter[str] = Counter()
        self.sent_again: Counter[str] = Counter()  # by why: "unreachable", "BUSY"
        self.seconds: defaultdict[str, list[float]] = defaultdict(list)  # by kind of command

    def replica(self) -> AgentStack:
        chosen = next(self._next)
        self.sent[chosen.chat_url] += 1
        return chosen

    async def command(self, kind: str, text: str, conversation: str, action: str = "send") -> Reply:
        """One command on the next replica; one whose replica is down, or refused BUSY while the
        turn before it lets go of the conversation, goes to the next after a pause, as the page
        sends it again. Timed from its first sending to its answer."""
        started = time.perf_counter()
        last: object = None
        for attempt in range(6):
            replica = self.replica()
            try:
                reply = await replica.say(text, conversation, action=action)
            except (httpx.HTTPError, OSError, ValueError) as problem:  # the replica was not there
                last = problem
                self.sent_again["unreachable"] += 1
                continue
            if [error["code"] for error in reply.of("error")] != ["BUSY"]:
                self.seconds[kind].append(time.perf_counter() - started)
                return reply
            last = dump(reply)
            self.sent_again["BUSY"] += 1
            await asyncio.sleep(0.5 * 2**attempt)
        raise AssertionError(f"no replica answered {text!r}: {last!r}")

    async def stopped(self, text: str, conversation: str) -> None:
        """A command stopped by the person (the page's Stop) once its statement has started: the
        stream is cancelled on the replica that runs it, whichever that is."""
        replica = self.replica()

        def start_and_stop() -> None:
            job = replica.client().submit(text, conversation, "send", "dev", "", "", api_name="/chat")
            for output in job:
                started = [
                    (message.get("metadata") or {}).get("tool")
                    for message in output
                    if (message.get("metadata") or {}).get("type") == "tool_start"
                ]
                if "superset_execute_sql" in started:
                    job.cancel()
                    return
            raise AssertionError(f"the answer ended before it could be stopped: {job.outputs()[-1:]}")

        started = time.perf_counter()
        await asyncio.to_thread(start_and_stop)
        self.seconds["stop"].append(time.perf_counter() - started)


@dataclass
class Deploys:
    """The dashboards each conversation deploys, made fresh in dev: index → (id, title)."""

    made: dict[int, tuple[int, str]] = field(default_factory=dict)

    @classmethod
    async def create(cls, dev: SupersetClient, run: str, conversations: int) -> "Deploys":
        deploys = cls()
        for index in range(conversations):
            title = f"{run} {index} {uuid.uuid4().hex[:6]}"
            deploys.made[index] = ((await dashboards.create(dev, title, None, True)).id, title)
        return deploys


async def _opened(balancer: RoundRobin, index: int, conversation: str, deploys: Deploys) -> None:
    """A read, then a deploy left waiting for its confirmation."""
    read = await balancer.command("read", f"покажи здоровье дашборда {1 + index % 3}", conversation)
    assert read.state in ("success", "issues_found"), dump(read)
    paused = await balancer.command(
        "deploy", f"задеплой дашборд {deploys.made[index][0]} из dev в prod", conversation
    )
    assert paused.state == "needs_confirmation", dump(paused)


async def _answered(balancer: RoundRobin, index: int, conversation: str) -> None:
    """The card confirmed (even conversations) or rejected (odd) and a slow read stopped while it
    runs, then one more read."""
    action = "confirm" if index % 2 == 0 else "reject"
    answer = await balancer.command(action, "", conversation, action=action)
    assert answer.state == ("success" if action == "confirm" else "cancelled"), dump(answer)
    if action == "reject":
        await balancer.stopped(SLOW_READ, conversation)
    read = await balancer.command("read", f"покажи здоровье дашборда {1 + (index + 1) % 3}", conversation)
    assert read.state in ("success", "issues_found"), dump(read)


@dataclass
class RoundRobinRun:
    """What one run gave: the two replicas' balancer and the one replica's, each conversation's
    history under both, the deploy tasks ops started for each conversation's dashboard, the
    deploys found in prod, and how long the killed replica took to serve again."""

    two: RoundRobin
    one: RoundRobin
    histories_two: list[History]
    histories_one: list[History]
    deploys_run_two: list[int]
    deploys_run_one: list[int]
    deployed_in_prod: list[int]
    restart_seconds: float


async def round_robin(
    stack: AgentStack, dev: SupersetClient, prod: SupersetClient, conversations: int
) -> RoundRobinRun:
    environment, url, metrics_port = agent_process(stack.agent_settings)
    process_replica = dataclasses.replace(stack, chat_url=url)
    limit = asyncio.Semaphore(AT_ONCE)

    async def each(step: Any, balancer: RoundRobin, ids: list[str], *extra: Any) -> None:
        async def one(index: int) -> None:
            async with limit:
                await step(balancer, index, ids[index], *extra)

        await asyncio.gather(*(one(index) for index in range(conversations)))

    # two replicas, the second killed midway
    deploys = await Deploys.create(dev, "Round robin", conversations)
    by_two = [new_conversation() for _ in range(conversations)]
    two = RoundRobin([stack, process_replica])
    with contextlib.ExitStack() as processes:
        second = await asyncio.to_thread(
            processes.enter_context, service_process("agent", environment, metrics_port)
        )
        await each(_opened, two, by_two, deploys)
        second.send_signal(signal.SIGKILL)  # every card waiting, half of them shown by this replica
        await asyncio.to_thread(second.wait, 10)
    with contextlib.ExitStack() as processes:
        killed = time.perf_counter()
        await asyncio.to_thread(processes.enter_context, service_process("agent", environment, metrics_port))
        restart_seconds = time.perf_counter() - killed
        await each(_answered, two, by_two)

    # one replica, the same commands
    alone = await Deploys.create(dev, "One replica", conversations)
    by_one = [new_conversation() for _ in range(conversations)]
    one = RoundRobin([stack])
    await each(_opened, one, by_one, alone)
    await each(_answered, one, by_one)

    return RoundRobinRun(
        two=two,
        one=one,
        histories_two=await _histories(stack, by_two, deploys),
        histories_one=await _histories(stack, by_one, alone),
        deploys_run_two=await _deploys_run(stack, deploys),
        deploys_run_one=await _deploys_run(stack, alone),
        deployed_in_prod=[
            (await dashboards.search(prod, text=title)).count for _, title in deploys.made.values()
        ],
        restart_seconds=restart_seconds,
    )


async def _deploys_run(stack: AgentStack, deploys: Deploys) -> list[int]:
    """How many deploy tasks ops started for each conversation's dashboard."""
    rows = await stack.rows(
        f"SELECT params->>'dashboard_id' AS dashboard FROM {ops_tables.tasks.name} WHERE kind = :kind",
        kind=jobs.DEPLOY,
    )
    started = Counter(row["dashboard"] for row in rows)
    return [started[str(dashboard_id)] for dashboard_id, _ in deploys.made.values()]


async def _histories(stack: AgentStack, conversations: list[str], deploys: Deploys) -> list[History]:
    """Each conversation's history in convo (role, text, cut short), its run's own names (the
    deployed dashboard's id and title, ids) replaced, so that two runs of the same commands
    compare equal."""
    histories = []
    async with httpx.AsyncClient(base_url=stack.convo_url, timeout=30) as http:
        for index, conversation in enumerate(conversations):
            reply = await http.get(
                f"/api/assistant/conversations/{conversation}/history",
                params={"limit": 100},
                headers={"Authorization": f"Bearer {stack.token('root')}"},
            )
            assert reply.status_code == 200, reply.text
            dashboard_id, title = deploys.made[index]
            histories.append(
                [
                    (item["role"], _own_names_out(item["content"], dashboard_id, title), item["partial"])
                    for item in reply.json()["items"]
                ]
            )
    return histories


def _own_names_out(text: str, dashboard_id: int, title: str) -> str:
    """``text`` without what differs between two runs of the same commands: the dashboard made for
    the conversation (its title, its id) and the ids of what ran (a backup's, a task's)."""
    plain = text.replace("\\", "").replace(title, "<title>")  # Markdown escapes a title's or id's marks
    plain = plain.replace(f"#{dashboard_id}", "#<deployed>").replace(
        f"дашборд {dashboard_id} ", "дашборд <deployed> "
    )
    return UUID.sub("<id>", plain)
