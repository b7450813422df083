"""The agent's router client asking a real router service to relate phrases to a schema's names:
the scores when the model is there, None when it is not or the router cannot be reached."""

import logging

import pytest
from opentelemetry.sdk.trace import TracerProvider

from sstools.agent.clients.router import ToolRouter
from sstools.common.grpc_auth import FixedServiceToken
from sstools.devstack.keys import PUBLIC_KEYS, service_token
from sstools.devstack.testing import started_service
from sstools.router.main import assemble
from sstools.router.settings import RouterSettings

LABELS = ["books", "readers", "issued at"]


def _client(port: int) -> ToolRouter:
    return ToolRouter(f"127.0.0.1:{port}", 10, TracerProvider(), FixedServiceToken(service_token()))


def _settings(embedding_model: str = "onnx-e5") -> RouterSettings:
    return RouterSettings(
        grpc_port=0, metrics_port=0, embedding_model=embedding_model, jwt_public_keys=PUBLIC_KEYS
    )


async def test_relate_gives_each_phrase_a_score_for_each_name(
    tracer_provider: TracerProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="sstools.agent.clients.router")
    async with started_service(_settings(), assemble, tracer_provider) as service:
        client = _client(service.ports["grpc"])
        relations = await client.relate(["читателей", "книги"], LABELS)
        over = await client.relate(["книги"] * 65, LABELS)
        await client.close()
    assert relations is not None
    assert relations.model.startswith("onnx-e5:")
    assert [len(row) for row in relations.rows] == [3, 3]
    assert max(range(3), key=lambda label: relations.score(0, label)) == 1
    assert max(range(3), key=lambda label: relations.score(1, label)) == 0
    assert over is None  # beyond the router's bounds: spelling alone, and a warning says why
    (warning,) = [record for record in caplog.records if record.getMessage().startswith("router cannot")]
    assert (warning.code, warning.details) == ("INVALID_ARGUMENT", "65 queries, at most 64")  # type: ignore[attr-defined]


async def test_relate_is_none_without_a_model_or_a_router(tracer_provider: TracerProvider) -> None:
    async with started_service(_settings("st:/nowhere/no-such-model"), assemble, tracer_provider) as service:
        client = _client(service.ports["grpc"])
        degraded = await client.relate(["книги"], LABELS)
        await client.close()
    unreachable = ToolRouter("127.0.0.1:9", 0.5, TracerProvider(), FixedServiceToken(service_token()))
    assert degraded is None
    assert await unreachable.relate(["книги"], LABELS) is None
    await unreachable.close()
