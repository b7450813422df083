"""What people said survives a restart of the service and of PostgreSQL itself."""

import asyncio
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import make_url

from sstools.convo.main import assemble
from sstools.convo.settings import ConvoSettings
from sstools.convo.store import MIGRATIONS
from sstools.convo.v1 import convo_pb2, convo_pb2_grpc
from sstools.devstack.agentstack import convo_settings_for
from sstools.devstack.keys import service_channel
from sstools.devstack.postgres import embedded_server, ensure_database
from sstools.devstack.testing import started_service

from .conftest import new_conversation, person


async def _history(settings: ConvoSettings, provider: TracerProvider, cid: str) -> tuple[str, list[str]]:
    async with (
        started_service(settings, assemble, provider) as service,
        service_channel(f"127.0.0.1:{service.ports['grpc']}") as channel,
    ):
        stub = convo_pb2_grpc.ConversationServiceStub(channel)
        history = await stub.GetHistory(
            convo_pb2.GetHistoryRequest(conversation_id=cid), metadata=person("alice")
        )
        await new_conversation(stub, "alice", "после рестарта")  # a second conversation: writes work too
    return history.messages[0].content if history.messages else "", [
        m.client_message_id for m in history.messages
    ]


async def test_history_and_titles_survive_service_and_database_restarts(
    tmp_path: Path, tracer_provider: TracerProvider
) -> None:
    data_dir = tmp_path / "pg"
    with embedded_server(data_dir) as admin_url:
        ensure_database(admin_url, "convo")
        url = make_url(admin_url).set(database="convo").render_as_string(hide_password=False)
        await asyncio.to_thread(MIGRATIONS.upgrade, url)
        settings = convo_settings_for(url)
        async with (
            started_service(settings, assemble, tracer_provider) as service,
            service_channel(f"127.0.0.1:{service.ports['grpc']}") as channel,
        ):
            stub = convo_pb2_grpc.ConversationServiceStub(channel)
            created = await new_conversation(stub, "alice", "дашборд 42: что с ним?")
            await stub.AppendMessages(
                convo_pb2.AppendMessagesRequest(
                    conversation_id=created,
                    messages=[
                        convo_pb2.Message(
                            client_message_id="u1", role="user", content="дашборд 42: что с ним?"
                        ),
                        convo_pb2.Message(client_message_id="a1", role="assistant", content="Всё в порядке"),
                    ],
                ),
                metadata=person("alice"),
            )
        assert await _history(settings, tracer_provider, created) == (
            "дашборд 42: что с ним?",
            ["u1", "a1"],
        )

    with embedded_server(data_dir) as admin_url:  # PostgreSQL was stopped and starts again
        assert await _history(settings, tracer_provider, created) == (
            "дашборд 42: что с ним?",
            ["u1", "a1"],
        )
        async with (
            started_service(settings, assemble, tracer_provider) as service,
            service_channel(f"127.0.0.1:{service.ports['grpc']}") as channel,
        ):
            stub = convo_pb2_grpc.ConversationServiceStub(channel)
            titles = await stub.GetHistory(
                convo_pb2.GetHistoryRequest(conversation_id=created, page_size=1), metadata=person("alice")
            )
    assert titles.next_page_token
