"""Agent latency with a zero-latency scripted LLM: submit → first streamed event and → first
token, p50/p99, at 1 and 20 concurrent conversations; and confirm → tool_start.

Real processes (router, ops, agent) on PostgreSQL (DATABASE_URL or an embedded server); the
LLM is the scripted OpenAI-compatible server on a socket, answering at once, so the figures
are the agent's own: Gradio queue, routing, graph, checkpoint writes. Clients are
``gradio_client`` instances, one per conversation. Goal: first event p99 ≤ 100 ms at 20.

    .venv/bin/python bench/agent.py [--turns 20]
"""

import argparse
import asyncio
import json
import statistics
import tempfile
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from gradio_client import Client

from sstools.common.tokens import USER_AUDIENCE, JwtCodec, TokenType
from sstools.convo.store import MIGRATIONS as CONVO_MIGRATIONS
from sstools.devstack.fake_llm import FakeLlm, Reply, ToolCall
from sstools.devstack.paths import DATA_DIR
from sstools.devstack.postgres import database_url
from sstools.devstack.testing import free_port, scratch_database, service_process, serving
from sstools.ops.store import MIGRATIONS

SECRET = "bench-secret-" + "b" * 40
AGENT_SECRET = "bench-agent-secret-0123"


def percentiles(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100) if len(samples) > 1 else samples * 99
    return {"n": len(samples), "p50_ms": round(statistics.median(samples), 1), "p99_ms": round(cuts[98], 1)}


def one_turn(client: Client, text: str, conversation: str, action: str = "send") -> dict[str, float]:
    """Milliseconds from submit to the first data event, the first token, a tool start, the end."""
    marks: dict[str, float] = {}
    started = time.perf_counter()
    job = client.submit({"text": text, "files": []}, conversation, action, "dev", "", api_name="/chat")
    for output in job:
        now = (time.perf_counter() - started) * 1000
        marks.setdefault("first_event", now)
        kinds = {(message.get("metadata") or {}).get("type") for message in output}
        if "token" in kinds:
            marks.setdefault("first_token", now)
        if "tool_start" in kinds:
            marks.setdefault("tool_start", now)
    marks["done"] = (time.perf_counter() - started) * 1000
    return marks


def concurrent_turns(url: str, token: str, conversations: int, turns: int) -> dict[str, Any]:
    clients = [
        Client(url, headers={"Authorization": f"Bearer {token}"}, verbose=False) for _ in range(conversations)
    ]
    results: list[dict[str, float]] = []
    lock = threading.Lock()

    def talk(client: Client) -> None:
        conversation = str(uuid.uuid4())
        for number in range(turns):
            marks = one_turn(client, f"покажи дашборды {number}", conversation)
            with lock:
                results.append(marks)

    threads = [threading.Thread(target=talk, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {
        "first_event": percentiles([marks["first_event"] for marks in results]),
        "first_token": percentiles([marks["first_token"] for marks in results if "first_token" in marks]),
        "whole_turn": percentiles([marks["done"] for marks in results]),
    }


def confirm_to_tool_start(url: str, token: str, llm: FakeLlm, rounds: int) -> dict[str, float]:
    client = Client(url, headers={"Authorization": f"Bearer {token}"}, verbose=False)
    samples = []
    for number in range(rounds):
        conversation = str(uuid.uuid4())
        llm.says(Reply(tool_calls=(ToolCall("create_branch", {"name": f"bench-{uuid.uuid4().hex[:8]}"}),)))
        paused = one_turn(client, f"создай ветку {number}", conversation)
        assert "tool_start" not in paused
        llm.says(Reply(content="Ветка создана."))
        samples.append(one_turn(client, "", conversation, action="confirm")["tool_start"])
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
        common = {"DATABASE_URL": url, "JWT_SECRET": SECRET, "LOG_LEVEL": "WARNING"}
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
                        "AGENT_ROUTER_TARGET": f"127.0.0.1:{ports['router']}",
                        "AGENT_CONVO_TARGET": f"127.0.0.1:{ports['convo']}",
                        "LLM_BASE_URL": f"{llm_url}/v1",
                        "LLM_MODEL": llm.model,
                    },
                    ports["agent_m"],
                ),
            ):
                await asyncio.sleep(1)  # ops creates its admin in the background
                token = JwtCodec(SECRET).issue(
                    "admin", token_type=TokenType.USER, audience=USER_AUDIENCE, ttl=timedelta(hours=1)
                )
                chat = f"http://127.0.0.1:{ports['agent']}/"
                return {
                    "conversations_1": await asyncio.to_thread(concurrent_turns, chat, token, 1, turns),
                    "conversations_20": await asyncio.to_thread(
                        concurrent_turns, chat, token, 20, max(2, turns // 4)
                    ),
                    "confirm_to_tool_start": await asyncio.to_thread(
                        confirm_to_tool_start, chat, token, llm, 10
                    ),
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
                "goal": "first_event p99 <= 100 ms at 20",
                **results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
