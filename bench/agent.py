"""Agent latency with a zero-latency scripted LLM: submit → first streamed event and → first
token, p50/p99, at 1 and 20 concurrent conversations; and confirm → tool_start.

Real processes (router, ops, agent) on PostgreSQL (DATABASE_URL or an embedded server); the
LLM is the scripted OpenAI-compatible server on a socket, answering at once, so the figures
are the agent's own: Gradio queue, routing, graph, checkpoint writes. The clients speak Gradio's
queue protocol with asyncio (as @gradio/client does in the browser), one conversation each.

At 20 the conversations are people: each reads the answer before the next message (0.5–1.5 s,
far quicker than a person reads, so the agent is well loaded) and they start spread over the
first second. ``conversations_20_back_to_back`` drops the pause: the agent is then saturated by
construction, its figure is throughput (``turns_per_second``) and its latencies are queueing.

Beside each figure: CPU milliseconds per turn of every part (``cpu_ms_per_turn``: the services,
PostgreSQL, this process's clients and LLM); the same phases against ``baseline_agent.py``, a
plain LangGraph agent with the same tools, saver and model client and none of our services
(``ours_over_baseline``); and, from a second start with the services' spans exported to a
collector here, where a turn's time goes (``breakdown_ms``: median per turn of each stage and
call). Goals (issue 38): first event p99 ≤ 100 ms, first token p50 ≤ 100 / p99 ≤ 250 ms and whole
turn p50 ≤ 250 ms at 20 conversations; 40 turns per second back to back.

    .venv/bin/python bench/agent.py [--turns 20]
"""

import argparse
import asyncio
import contextlib
import gc
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
from stats import percentiles

from sstools.agent.ui.app import CHAT_PATH
from sstools.convo.store import MIGRATIONS as CONVO_MIGRATIONS
from sstools.devstack.fake_llm import FakeLlm, Reply, ToolCall
from sstools.devstack.keys import PRIVATE_KEY, PUBLIC_KEYS, user_token
from sstools.devstack.paths import DATA_DIR
from sstools.devstack.postgres import database_url
from sstools.devstack.testing import (
    CollectedSpan,
    free_port,
    otlp_collector,
    scratch_database,
    service_process,
    serving,
)
from sstools.ops.store import MIGRATIONS

CONFIRMATION_SECRET = "bench-confirmations-" + "c" * 40
BATCH_EXPORT_SECONDS = 6.0  # the SDK's BatchSpanProcessor exports every 5 s
# A card in a streamed update: its call id, then (the card's last field) its digest.
_CARD = re.compile(r'"call_id":\s*"([^"]+)".*?"digest":\s*"([0-9a-f]{64})"')
AGENT_SECRET = "bench-agent-secret-0123"
# A turn's state event in a streamed update (its metadata: the type, then the state).
_STATE = re.compile(r'"type":\s*"state",\s*"state":\s*"([a-z_]+)"')
_ERROR = re.compile(r'"type":\s*"error",\s*"code":\s*"([A-Za-z_]+)"')


class LightChat:
    """Gradio's queue protocol spoken directly (join, then the SSE data stream), with asyncio:
    twenty of these cost the machine far less than twenty gradio_client instances, so the figures
    are the agent's, not the load generator's. One session per instance, as a browser tab holds
    one (@gradio/client makes its session hash once per connection)."""

    def __init__(self, http: httpx.AsyncClient, url: str, token: str) -> None:
        self._http = http
        self._url = url
        self._headers = {"Authorization": f"Bearer {token}"}
        self._fn_index: int | None = None
        self._state_slots: list[int] = []
        self._session = uuid.uuid4().hex
        self._card: tuple[str, str] | None = None  # the last card shown: call id, digest
        self.state: str | None = None  # the last turn's final state (success, needs_confirmation, ...)
        self.errors: set[str] = set()  # the codes of the last turn's error events

    async def connect(self) -> int:
        """The /chat endpoint's index in the app's config (fetched once)."""
        if self._fn_index is None:
            config = (await self._http.get(f"{self._url}config", headers=self._headers)).json()
            types = {component["id"]: component["type"] for component in config["components"]}
            for index, dependency in enumerate(config["dependencies"]):
                if dependency.get("api_name") == "chat":
                    self._fn_index = dependency.get("id", index)
                    inputs = dependency["inputs"]
                    self._state_slots = [slot for slot, cid in enumerate(inputs) if types.get(cid) == "state"]
            assert self._fn_index is not None, "no /chat endpoint"
        return self._fn_index

    async def turn(
        self, text: str, conversation: str, action: str = "send", files: str = ""
    ) -> dict[str, float]:
        """One turn's marks; a confirm answers the last card this chat was shown; ``files`` names
        uploads (a JSON list of the ids convo gave)."""
        fn_index = await self.connect()
        if action == "confirm" and self._card is not None:
            text = json.dumps({"call_id": self._card[0], "digest": self._card[1]})
        data: list[Any] = [text, conversation, action, "dev", "", files]
        for slot in self._state_slots:
            data.insert(slot, None)
        session = self._session
        marks: dict[str, float] = {"submitted_ns": time.time_ns()}  # the host's clock, as spans'
        self.state = None
        self.errors = set()
        started = time.perf_counter()
        join = {
            "data": data,
            "fn_index": fn_index,
            "session_hash": session,
            "event_data": None,
            "trigger_id": None,
        }
        (
            await self._http.post(f"{self._url}gradio_api/queue/join", json=join, headers=self._headers)
        ).raise_for_status()
        params = {"session_hash": session}
        async with self._http.stream(
            "GET", f"{self._url}gradio_api/queue/data", params=params, headers=self._headers
        ) as events:
            async for line in events.aiter_lines():
                if not line.startswith("data:"):
                    continue
                now = (time.perf_counter() - started) * 1000
                message = json.loads(line[5:])
                if message.get("msg") == "process_generating":
                    marks.setdefault("first_event", now)
                    if '"token"' in line:
                        marks.setdefault("first_token", now)
                    if '"tool_start"' in line:
                        marks.setdefault("tool_start", now)
                    if '"confirm_required"' in line:
                        card = _CARD.search(line)
                        self._card = (card.group(1), card.group(2)) if card else None
                    if states := _STATE.findall(line):
                        self.state = states[-1]
                    self.errors.update(_ERROR.findall(line))
                elif message.get("msg") == "process_completed":
                    if not message.get("success", True):
                        raise RuntimeError(f"turn failed: {line[:300]}")
                    marks["done"] = now
                    return marks
        raise RuntimeError("the stream ended without process_completed")


class PlainChat:
    """The baseline's client: one POST per turn, its server-sent events read as they come."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self._http = http
        self._url = url

    async def connect(self) -> None:
        pass

    async def turn(self, text: str, conversation: str) -> dict[str, float]:
        marks: dict[str, float] = {"submitted_ns": time.time_ns()}
        started = time.perf_counter()
        body = {"conversation": conversation, "text": text}
        async with self._http.stream("POST", f"{self._url}turn", json=body) as events:
            events.raise_for_status()
            async for line in events.aiter_lines():
                if not line.startswith("data:"):
                    continue
                now = (time.perf_counter() - started) * 1000
                marks.setdefault("first_event", now)
                if '"token"' in line:
                    marks.setdefault("first_token", now)
                if '"done"' in line:
                    marks["done"] = now
                    return marks
        raise RuntimeError("the stream ended without its last event")


Chat = LightChat | PlainChat


class CpuMeter:
    """CPU seconds each part of the stack spends: the services, PostgreSQL (its server and
    every backend) and this process (the clients and the scripted LLM)."""

    def __init__(self, services: dict[str, int]) -> None:
        self._services = services

    def _parts(self) -> dict[str, dict[int, float]]:
        parts: dict[str, dict[int, float]] = {name: {} for name in [*self._services, "postgres", "bench"]}
        owners = {pid: name for name, pid in self._services.items()} | {psutil.Process().pid: "bench"}
        for process in psutil.process_iter(["name"]):
            owner = owners.get(process.pid) or ("postgres" if process.info["name"] == "postgres" else None)
            if owner is not None:
                with contextlib.suppress(psutil.NoSuchProcess):
                    times = process.cpu_times()
                    parts[owner][process.pid] = times.user + times.system
        return parts

    @contextlib.contextmanager
    def per_turn(self, into: dict[str, Any]) -> Iterator[None]:
        """Fills ``into["cpu_ms_per_turn"]`` (by part, and in all) from ``into["turns"]``."""
        before = self._parts()
        yield
        after = self._parts()
        spent = {
            name: sum(seconds - before[name].get(pid, 0.0) for pid, seconds in pids.items())
            for name, pids in after.items()
        }
        turns = into["turns"]
        into["cpu_ms_per_turn"] = {name: round(1000 * seconds / turns, 1) for name, seconds in spent.items()}
        into["cpu_ms_per_turn"]["all"] = round(1000 * sum(spent.values()) / turns, 1)


async def concurrent_turns(
    chat_of: Callable[[httpx.AsyncClient], Chat], conversations: int, turns: int, think_seconds: float = 0.0
) -> dict[str, Any]:
    """Each conversation sends its turns one after another. With ``think_seconds`` it is a
    person: the next message comes 0.5–1.5 × that after the answer, and the conversations start
    spread over that time; without, every answer is followed at once by the next message (the
    agent saturated: a throughput figure more than a latency one)."""
    results: list[dict[str, float]] = []
    sent: list[tuple[str, dict[str, float]]] = []  # each turn's conversation, in the order sent
    pacing = random.Random(7)
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=4 * conversations)) as http:
        chats = [chat_of(http) for _ in range(conversations)]
        for chat in chats:  # a page loads the app's config long before its first message
            await chat.connect()

        async def talk(chat: Chat) -> None:
            conversation = str(uuid.uuid4())
            await asyncio.sleep(pacing.uniform(0, think_seconds))
            for number in range(turns):
                marks = await chat.turn(f"покажи дашборды {number}", conversation)
                sent.append((conversation, marks))
                results.append(marks)
                await asyncio.sleep(think_seconds * pacing.uniform(0.5, 1.5))

        started = time.perf_counter()
        await asyncio.gather(*(talk(chat) for chat in chats))
        elapsed = time.perf_counter() - started
    return {
        "think_seconds": think_seconds,
        "turns": len(results),
        "turns_per_second": round(len(results) / elapsed, 1),
        "first_event": percentiles([marks["first_event"] for marks in results]),
        "first_token": percentiles([marks["first_token"] for marks in results if "first_token" in marks]),
        "whole_turn": percentiles([marks["done"] for marks in results]),
        "sent": sent,
    }


def breakdown(spans: list[CollectedSpan], sent: list[tuple[str, dict[str, float]]]) -> dict[str, float]:
    """Where a turn's time goes, median ms over the turns ``sent``, from the services' own spans.

    ``before the turn``: from the client's submit until the agent's turn began (Gradio's queue,
    HTTP, the event loop); ``first event inside``: from then until the first event reached the
    client. Then the turn's stages (``turn admit``, ``turn gather``, ``turn graph``) and, inside
    them, each call the agent made (per gRPC method, HTTP route, model call), summed per turn;
    ``after the answer``: from the graph's end to the turn's (the audit record)."""
    turns = sorted(
        (span for span in spans if span.service == "agent" and span.name == "chat turn"),
        key=lambda span: span.start_ns,
    )
    by_conversation: dict[str, list[CollectedSpan]] = {}
    for span in turns:
        by_conversation.setdefault(str(span.attributes.get("sstools.conversation_id")), []).append(span)
    children: dict[str, list[CollectedSpan]] = {}
    for span in spans:
        if span.service == "agent":
            children.setdefault(span.trace_id, []).append(span)
    samples: dict[str, list[float]] = {}
    taken: dict[str, int] = {}
    for conversation, marks in sent:
        number = taken.get(conversation, 0)
        taken[conversation] = number + 1
        if number >= len(by_conversation.get(conversation, [])):
            continue  # its spans were not exported (yet)
        turn = by_conversation[conversation][number]
        measured = {
            "before the turn": (turn.start_ns - marks["submitted_ns"]) / 1e6,
            "first event inside": marks["first_event"] - (turn.start_ns - marks["submitted_ns"]) / 1e6,
        }
        graph_end = turn.end_ns
        for span in children.get(turn.trace_id, []):
            if span is turn:
                continue
            label = _call_label(span)
            measured[label] = measured.get(label, 0.0) + span.ms
            if span.name == "turn graph":
                graph_end = span.end_ns
        measured["after the answer"] = (turn.end_ns - graph_end) / 1e6
        for label, ms in measured.items():
            samples.setdefault(label, []).append(ms)
    every = len(sent)
    # A call not made in every turn counts as 0 ms in the others: the median is per turn.
    return {
        label: round(statistics.median(values + [0.0] * (every - len(values))), 2)
        for label, values in sorted(samples.items(), key=lambda item: -statistics.median(item[1]))
    }


def _call_label(span: CollectedSpan) -> str:
    if span.name.startswith("/"):  # a gRPC method: /package.Service/Method
        service, _, method = span.name[1:].partition("/")
        return f"grpc {service.rsplit('.', 1)[-1]}.{method}"
    if url := span.attributes.get("url.full") or span.attributes.get("http.url"):
        return f"http {span.name} {httpx.URL(str(url)).path}"
    return span.name


async def confirm_to_tool_start(url: str, token: str, llm: FakeLlm, rounds: int) -> dict[str, float]:
    samples = []
    async with httpx.AsyncClient(timeout=60) as http:
        chat = LightChat(http, url, token)
        for number in range(rounds):
            conversation = str(uuid.uuid4())
            llm.says(
                Reply(tool_calls=(ToolCall("create_branch", {"name": f"bench-{uuid.uuid4().hex[:8]}"}),))
            )
            paused = await chat.turn(f"создай ветку {number}", conversation)
            assert "tool_start" not in paused
            llm.says(Reply(content="Ветка создана."))
            samples.append((await chat.turn("", conversation, action="confirm"))["tool_start"])
    return percentiles(samples)


def phases(turns: int) -> tuple[tuple[str, int, int, float], ...]:
    """Each phase: its name, conversations, turns each, a person's pause between turns."""
    return (
        ("conversations_1", 1, turns, 0.0),
        ("conversations_20", 20, max(2, turns // 2), 1.0),
        ("conversations_20_back_to_back", 20, max(2, turns // 4), 0.0),
    )


@contextlib.asynccontextmanager
async def agent_stack(
    url: str, folder: str, llm_url: str, model: str, otlp_endpoint: str | None = None
) -> AsyncIterator[tuple[str, CpuMeter]]:
    """Router, convo, ops and the agent as processes; yields the chat's URL and their meter."""
    ports = {
        name: free_port()
        for name in (
            "router",
            "router_m",
            "convo",
            "convo_http",
            "convo_m",
            "ops",
            "ops_m",
            "agent",
            "agent_m",
        )
    }
    common = {
        "DATABASE_URL": url,
        "JWT_PRIVATE_KEY": PRIVATE_KEY,
        "JWT_PUBLIC_KEYS": PUBLIC_KEYS,
        "CONFIRMATION_SECRET": CONFIRMATION_SECRET,
        "LOG_LEVEL": "WARNING",
        **({"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_endpoint} if otlp_endpoint else {}),
    }
    services = {  # in the order they start: the agent last, once its peers answer
        "router": {"ROUTER_GRPC_PORT": str(ports["router"])},
        "convo": {"CONVO_GRPC_PORT": str(ports["convo"]), "CONVO_HTTP_PORT": str(ports["convo_http"])},
        "ops": {
            "OPS_HTTP_PORT": str(ports["ops"]),
            "OPS_SERVICE_CLIENTS": f"agent:{AGENT_SECRET}",
            "OPS_ADMIN_PASSWORD": "bench-admin-pass",
            "OPS_GIT_REPO": str(Path(folder) / "exports"),
        },
        "agent": {
            "AGENT_HTTP_PORT": str(ports["agent"]),
            "AGENT_OPS_URL": f"http://127.0.0.1:{ports['ops']}",
            "AGENT_OPS_CLIENT_SECRET": AGENT_SECRET,
            # one user sends every turn: the bench measures latency, not the limit
            "AGENT_TURNS_PER_USER": "1000000",
            "AGENT_ROUTER_TARGET": f"127.0.0.1:{ports['router']}",
            "AGENT_CONVO_TARGET": f"127.0.0.1:{ports['convo']}",
            "LLM_BASE_URL": llm_url,
            "LLM_MODEL": model,
        },
    }
    with contextlib.ExitStack() as running:
        pids = {}
        for name, environment in services.items():
            metrics = ports[f"{name}_m"]
            environment[f"{name.upper()}_METRICS_PORT"] = str(metrics)
            pids[name] = running.enter_context(service_process(name, {**common, **environment}, metrics)).pid
        await asyncio.sleep(1)  # ops creates its admin in the background
        yield f"http://127.0.0.1:{ports['agent']}{CHAT_PATH}/", CpuMeter(pids)


@contextlib.contextmanager
def baseline_agent(url: str, llm_url: str, model: str) -> Iterator[tuple[str, CpuMeter]]:
    """bench/baseline_agent.py as a process; yields its URL and its meter."""
    port = free_port()
    script = str(Path(__file__).parent / "baseline_agent.py")
    arguments = ["--port", str(port), "--database-url", url, "--llm-url", llm_url, "--model", model]
    process = subprocess.Popen([sys.executable, script, *arguments], stdout=2)
    base = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}healthz").status_code == 200:
                    break
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("the baseline agent did not start")
            time.sleep(0.2)
        yield base, CpuMeter({"baseline": process.pid})
    finally:
        process.terminate()
        process.wait(30)


async def measured(
    meter: CpuMeter, chat_of: Callable[[httpx.AsyncClient], Chat], turns: int
) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for label, conversations, each, think in phases(turns):
        report[label] = {}
        with meter.per_turn(report[label]):
            report[label].update(await concurrent_turns(chat_of, conversations, each, think))
        del report[label]["sent"]
    return report


def overhead(ours: dict[str, Any], baseline: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Ours over the baseline, per phase: above 1 a latency is ours longer, a rate ours higher."""
    ratios: dict[str, dict[str, float]] = {}
    for label, figures in ours.items():
        base = baseline[label]
        ratios[label] = {
            f"{figure}_{cut}": round(figures[figure][f"{cut}_ms"] / base[figure][f"{cut}_ms"], 2)
            for figure in ("first_event", "first_token", "whole_turn")
            for cut in ("p50", "p99")
        }
        ratios[label]["turns_per_second"] = round(figures["turns_per_second"] / base["turns_per_second"], 2)
    return ratios


async def run(turns: int) -> dict[str, Any]:
    llm = FakeLlm(model="zero-latency")
    token = user_token("admin")
    with (
        tempfile.TemporaryDirectory(prefix="bench-agent-") as folder,
        database_url(DATA_DIR / "pg-bench") as server_url,
        scratch_database(server_url) as url,
    ):
        await asyncio.to_thread(MIGRATIONS.upgrade, url)
        await asyncio.to_thread(CONVO_MIGRATIONS.upgrade, url)
        async with serving(llm.app()) as llm_served:
            llm_url = f"{llm_served}/v1"
            gc.collect()
            gc.freeze()  # as the services do: no full-heap collection pausing the clients mid-turn
            async with agent_stack(url, folder, llm_url, llm.model) as (chat, meter):
                ours = await measured(meter, lambda http: LightChat(http, chat, token), turns)
                confirms = await confirm_to_tool_start(chat, token, llm, 10)
            with baseline_agent(url, llm_url, llm.model) as (base, meter):
                baseline = await measured(meter, lambda http: PlainChat(http, base), turns)
            # The breakdown comes from a second start with the spans exported: exporting costs
            # the services CPU, which the figures above do not carry.
            spans: dict[str, dict[str, float]] = {}
            async with (
                otlp_collector() as (collector, endpoint),
                agent_stack(url, folder, llm_url, llm.model, endpoint) as (chat, _),
            ):
                for label, conversations, each, think in phases(turns)[:2]:
                    sent = await concurrent_turns(
                        lambda http: LightChat(http, chat, token), conversations, each, think
                    )
                    await asyncio.sleep(BATCH_EXPORT_SECONDS)  # the services' span batches arrive
                    spans[label] = breakdown(collector.spans, sent["sent"])
                    collector.spans.clear()
    return {
        "ours": ours,
        "baseline": baseline,
        "ours_over_baseline": overhead(ours, baseline),
        "breakdown_ms": spans,
        "confirm_to_tool_start": confirms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--turns", type=int, default=20, help="turns per conversation alone (a quarter at 20)"
    )
    args = parser.parse_args()
    results = asyncio.run(run(args.turns))
    print(
        json.dumps(
            {
                "benchmark": "agent",
                "llm": "scripted, zero latency",
                "goal": "at 20 conversations: first_event p99 <= 100 ms, first_token p50 <= 100 / "
                "p99 <= 250 ms, whole_turn p50 <= 250 ms; back to back: >= 40 turns per second",
                **results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
