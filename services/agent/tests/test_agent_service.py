from opentelemetry.sdk.trace import TracerProvider

from sstools.agent.main import assemble
from sstools.agent.settings import AgentSettings
from sstools.devstack.testing import http_get, probe, started_service


async def test_agent_is_ready_without_grpc(tracer_provider: TracerProvider) -> None:
    report = await probe(AgentSettings(http_port=0, metrics_port=0), assemble, tracer_provider)
    assert report.listeners == {"metrics", "chat"}
    assert (report.readyz_status, report.grpc_status) == (200, None)


async def test_chat_port_answers_probes_for_the_ingress(tracer_provider: TracerProvider) -> None:
    settings = AgentSettings(http_port=0, metrics_port=0)
    async with started_service(settings, assemble, tracer_provider) as service:
        chat = f"http://127.0.0.1:{service.ports['chat']}"
        assert (await http_get(f"{chat}/healthz")).json() == {"status": "ok"}
        assert (await http_get(f"{chat}/readyz")).status_code == 200
        assert (await http_get(f"{chat}/metrics")).status_code == 404  # metrics stay on their own port
