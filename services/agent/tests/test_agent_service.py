import psycopg
from opentelemetry.sdk.trace import TracerProvider

from sstools.agent.main import assemble
from sstools.agent.settings import AgentSettings
from sstools.agent.ui.app import CHAT_PATH
from sstools.devstack.agentstack import CONFIRMATION_SECRET
from sstools.devstack.keys import PUBLIC_KEYS
from sstools.devstack.testing import free_port, http_get, probe, started_service, wait_until


def _settings(database_url: str) -> AgentSettings:
    return AgentSettings(
        http_port=0,
        metrics_port=0,
        database_url=database_url,
        jwt_public_keys=PUBLIC_KEYS,
        confirmation_secret=CONFIRMATION_SECRET,
    )


async def test_agent_is_ready_once_its_checkpoint_tables_exist(
    fresh_database_url: str, tracer_provider: TracerProvider
) -> None:
    async with started_service(_settings(fresh_database_url), assemble, tracer_provider) as service:
        assert set(service.ports) == {"metrics", "chat"}
        await wait_ready_async(service.ports["metrics"])
    with psycopg.connect(fresh_database_url) as connection:
        tables = {row[0] for row in connection.execute("SELECT tablename FROM pg_tables")}
    assert {"checkpoints", "checkpoint_writes", "checkpoint_blobs"} <= tables


async def test_chat_port_answers_probes_for_the_ingress(
    fresh_database_url: str, tracer_provider: TracerProvider
) -> None:
    async with started_service(_settings(fresh_database_url), assemble, tracer_provider) as service:
        await wait_ready_async(service.ports["metrics"])
        chat = f"http://127.0.0.1:{service.ports['chat']}"
        assert (await http_get(f"{chat}/healthz")).json() == {"status": "ok"}
        assert (await http_get(f"{chat}/readyz")).status_code == 200
        assert (await http_get(f"{chat}/metrics")).status_code == 404  # metrics stay on their own port
        assert (await http_get(f"{chat}{CHAT_PATH}/config")).status_code == 200  # Gradio's, for its clients


async def test_no_database_means_not_ready(tracer_provider: TracerProvider) -> None:
    unreachable = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    report = await probe(_settings(unreachable), assemble, tracer_provider)
    assert report.readyz_status == 503


async def wait_ready_async(metrics_port: int) -> None:
    async def ready() -> bool:
        return (await http_get(f"http://127.0.0.1:{metrics_port}/readyz")).status_code == 200

    await wait_until(ready, 30, "the agent to be ready")
