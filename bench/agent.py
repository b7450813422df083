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
Goal: first event p99 ≤ 100 ms at 20 conversations.

    .venv/bin/python bench/agent.py [--turns 20]
"""

import argparse
import asyncio
import gc
import json
import random
import re
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from stats import percentiles

from sstools.agent.ui.app import CHAT_PATH
from sstools.convo.store import MIGRATIONS as CONVO_MIGRATIONS
from sstools.devstack.fake_llm import FakeLlm, Reply, ToolCall
from sstools.devstack.keys import PRIVATE_KEY, PUBLIC_KEYS, user_token
from sstools.devstack.paths import DATA_DIR
from sstools.devstack.postgres import database_url
from sstools.devstack.testing import free_port, scratch_database, service_process, serving
from sstools.ops.store import MIGRATIONS

CONFIRMATION_SECRET = "bench-confirmations-" + "c" * 40
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
        marks: dict[str, float] = {}
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


async def concurrent_turns(
    url: str, token: str, conversations: int, turns: int, think_seconds: float = 0.0
) -> dict[str, Any]:
    """Each conversation sends its turns one after another. With ``think_seconds`` it is a
    person: the next message comes 0.5–1.5 × that after the answer, and the conversations start
    spread over that time; without, every answer is followed at once by the next message (the
    agent saturated: a throughput figure more than a latency one)."""
    results: list[dict[str, float]] = []
    pacing = random.Random(7)
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=4 * conversations)) as http:
        chats = [LightChat(http, url, token) for _ in range(conversations)]
        for chat in chats:  # a page loads the app's config long before its first message
            await chat.connect()

        async def talk(chat: LightChat) -> None:
            conversation = str(uuid.uuid4())
            await asyncio.sleep(pacing.uniform(0, think_seconds))
            for number in range(turns):
                results.append(await chat.turn(f"покажи дашборды {number}", conversation))
                await asyncio.sleep(think_seconds * pacing.uniform(0.5, 1.5))

        started = time.perf_counter()
        await asyncio.gather(*(talk(chat) for chat in chats))
        elapsed = time.perf_counter() - started
    return {
        "think_seconds": think_seconds,
        "turns_per_second": round(len(results) / elapsed, 1),
        "first_event": percentiles([marks["first_event"] for marks in results]),
        "first_token": percentiles([marks["first_token"] for marks in results if "first_token" in marks]),
        "whole_turn": percentiles([marks["done"] for marks in results]),
    }


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


async def run(turns: int) -> dict[str, Any]:
    llm = FakeLlm(model="zero-latency")
    with (
        tempfile.TemporaryDirectory(prefix="bench-agent-") as folder,
        database_url(DATA_DIR / "pg-bench") as server_url,
        scratch_database(server_url) as url,
    ):
        await asyncio.to_thread(MIGRATIONS.upgrade, url)
        await asyncio.to_thread(CONVO_MIGRATIONS.upgrade, url)
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
        }
        async with serving(llm.app()) as llm_url:
            with (
                service_process(
                    "router",
                    {
                        **common,
                        "ROUTER_GRPC_PORT": str(ports["router"]),
                        "ROUTER_METRICS_PORT": str(ports["router_m"]),
                    },
                    ports["router_m"],
                ),
                service_process(
                    "convo",
                    {
                        **common,
                        "CONVO_GRPC_PORT": str(ports["convo"]),
                        "CONVO_HTTP_PORT": str(ports["convo_http"]),
                        "CONVO_METRICS_PORT": str(ports["convo_m"]),
                    },
                    ports["convo_m"],
                ),
                service_process(
                    "ops",
                    {
                        **common,
                        "OPS_HTTP_PORT": str(ports["ops"]),
                        "OPS_METRICS_PORT": str(ports["ops_m"]),
                        "OPS_SERVICE_CLIENTS": f"agent:{AGENT_SECRET}",
                        "OPS_ADMIN_PASSWORD": "bench-admin-pass",
                        "OPS_GIT_REPO": str(Path(folder) / "exports"),
                    },
                    ports["ops_m"],
                ),
                service_process(
                    "agent",
                    {
                        **common,
                        "AGENT_HTTP_PORT": str(ports["agent"]),
                        "AGENT_METRICS_PORT": str(ports["agent_m"]),
                        "AGENT_OPS_URL": f"http://127.0.0.1:{ports['ops']}",
                        "AGENT_OPS_CLIENT_SECRET": AGENT_SECRET,
                        # one user sends every turn: the bench measures latency, not the limit
                        "AGENT_TURNS_PER_USER": "1000000",
                        "AGENT_ROUTER_TARGET": f"127.0.0.1:{ports['router']}",
                        "AGENT_CONVO_TARGET": f"127.0.0.1:{ports['convo']}",
                        "LLM_BASE_URL": f"{llm_url}/v1",
                        "LLM_MODEL": llm.model,
                    },
                    ports["agent_m"],
                ),
            ):
                await asyncio.sleep(1)  # ops creates its admin in the background
                gc.collect()
                gc.freeze()  # as the services do: no full-heap collection pausing the clients mid-turn
                token = user_token("admin")
                chat = f"http://127.0.0.1:{ports['agent']}{CHAT_PATH}/"
                return {
                    "conversations_1": await concurrent_turns(chat, token, 1, turns),
                    "conversations_20": await concurrent_turns(chat, token, 20, max(2, turns // 2), 1.0),
                    "conversations_20_back_to_back": await concurrent_turns(
                        chat, token, 20, max(2, turns // 4)
                    ),
                    "confirm_to_tool_start": await confirm_to_tool_start(chat, token, llm, 10),
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
                "goal": "first_event p99 <= 100 ms at 20 conversations (conversations_20)",
                **results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
