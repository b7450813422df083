"""One user turn is one trace: agent → router, convo and ops → Superset's HTTP API, with the
model call as a GenAI client span. Every service runs as its own process and exports over
OTLP to a real collector; the LLM is the scripted OpenAI-compatible server."""

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from sstools.agent.ui.app import CHAT_PATH
from sstools.agent.ui.client import chat_client
from sstools.convo.store import MIGRATIONS as CONVO_MIGRATIONS
from sstools.devstack.demo import PASSWORD_ENV, environments
from sstools.devstack.fake_llm import FakeLlm, Reply, ToolCall
from sstools.devstack.keys import PRIVATE_KEY, PUBLIC_KEYS, user_token
from sstools.devstack.superset import Instance
from sstools.devstack.testing import free_port, otlp_collector, serving, wait_ready
from sstools.ops.store import MIGRATIONS as OPS_MIGRATIONS

CONFIRMATION_SECRET = "trace-test-confirmations-" + "c" * 32
AGENT_SECRET = "trace-agent-secret-0123"


def _start(name: str, environment: dict[str, str], metrics_port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / f"sstools-{name}")], env={**os.environ, **environment}
    )
    wait_ready(metrics_port)
    return process


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM, which makes each flush its batch of spans; run off the event loop, which the
    collector needs meanwhile."""
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise


async def test_one_turn_is_one_trace_across_the_services_with_a_genai_span(
    supersets: dict[str, Instance], fresh_database_url: str, tmp_path: Path
) -> None:
    await asyncio.to_thread(OPS_MIGRATIONS.upgrade, fresh_database_url)
    await asyncio.to_thread(CONVO_MIGRATIONS.upgrade, fresh_database_url)
    llm = FakeLlm(model="traced-model")
    llm.says(
        Reply(tool_calls=(ToolCall("get_health_summary", {"env_id": "dev"}),)),
        Reply(content="One chart is broken."),
    )
    ports = {name: free_port() for name in ("router", "convo", "convo_http", "ops", "agent")}
    metrics = {name: free_port() for name in ("router", "convo", "ops", "agent")}
    async with otlp_collector() as (collector, endpoint), serving(llm.app()) as llm_url:
        common = {
            "DATABASE_URL": fresh_database_url,
            "JWT_PRIVATE_KEY": PRIVATE_KEY,
            "JWT_PUBLIC_KEYS": PUBLIC_KEYS,
            "CONFIRMATION_SECRET": CONFIRMATION_SECRET,
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        }
        running: list[subprocess.Popen[bytes]] = []
        try:
            for name, environment in (
                ("router", {"ROUTER_GRPC_PORT": str(ports["router"])}),
                (
                    "convo",
                    {"CONVO_GRPC_PORT": str(ports["convo"]), "CONVO_HTTP_PORT": str(ports["convo_http"])},
                ),
                (
                    "ops",
                    {
                        "OPS_HTTP_PORT": str(ports["ops"]),
                        "OPS_ADMIN_PASSWORD": "trace-admin-pass",
                        "OPS_SERVICE_CLIENTS": f"agent:{AGENT_SECRET}",
                        "ENVIRONMENTS": environments(supersets, PASSWORD_ENV),
                        "OPS_BACKUP_DIR": str(tmp_path / "backups"),
                        "OPS_GIT_REPO": str(tmp_path / "exports"),
                    },
                ),
                (
                    "agent",
                    {
                        "AGENT_HTTP_PORT": str(ports["agent"]),
                        "AGENT_OPS_URL": f"http://127.0.0.1:{ports['ops']}",
                        "AGENT_OPS_CLIENT_SECRET": AGENT_SECRET,
                        "AGENT_ROUTER_TARGET": f"127.0.0.1:{ports['router']}",
                        "AGENT_CONVO_TARGET": f"127.0.0.1:{ports['convo']}",
                        "LLM_BASE_URL": f"{llm_url}/v1",
                        "LLM_MODEL": llm.model,
                    },
                ),
            ):
                metrics_variable = f"{name.upper()}_METRICS_PORT"
                settings = {**common, **environment, metrics_variable: str(metrics[name])}
                running.append(await asyncio.to_thread(_start, name, settings, metrics[name]))
            await asyncio.sleep(1)  # ops creates its admin in the background
            token = user_token("admin")

            def turn() -> list[dict[str, object]]:
                chat = chat_client(
                    f"http://127.0.0.1:{ports['agent']}{CHAT_PATH}/", {"Authorization": f"Bearer {token}"}
                )
                job = chat.submit("что сломано в dev?", "", "send", "dev", "", "", api_name="/chat")
                return list(job.result(timeout=120))

            messages = await asyncio.to_thread(turn)
            assert "One chart is broken." in "".join(str(message["content"]) for message in messages)
        finally:
            await asyncio.to_thread(_stop, running)  # each flushes its spans as it stops

    turns = [span for span in collector.spans if span.service == "agent" and span.name == "chat turn"]
    assert len(turns) == 1
    trace = [span for span in collector.spans if span.trace_id == turns[0].trace_id]
    assert {span.service for span in trace} == {"agent", "router", "convo", "ops"}
    stages = {span.name: span for span in trace if span.name.startswith("turn ")}
    assert set(stages) == {"turn admit", "turn gather", "turn graph"}  # where a slow turn's time went
    assert {span.parent_span_id for span in stages.values()} == {turns[0].span_id}
    assert stages["turn admit"].end_ns <= stages["turn gather"].start_ns <= stages["turn graph"].start_ns
    assert any(span.service == "router" and span.name.endswith("/Route") for span in trace)
    assert any(span.service == "convo" and span.name.endswith("/AppendMessages") for span in trace)
    superset_calls = [
        span
        for span in trace
        if span.service == "ops"
        and str(span.attributes.get("url.full", span.attributes.get("http.url", ""))).startswith(
            supersets["dev"].url
        )
    ]
    assert superset_calls, sorted({(span.service, span.name) for span in trace})
    model_calls = [span for span in trace if span.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(model_calls) == 2  # the tool call, then the answer
    assert {span.attributes["gen_ai.request.model"] for span in model_calls} == {"traced-model"}
    assert all(span.name == "chat traced-model" for span in model_calls)
    assert {tuple(span.attributes["gen_ai.response.finish_reasons"]) for span in model_calls} == {
        ("tool_calls",),
        ("stop",),
    }
