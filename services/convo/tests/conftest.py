from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.common.db import create_engine
from sstools.common.grpc_auth import as_user
from sstools.common.grpc_client import FILE_MESSAGE_MAX_BYTES
from sstools.common.runtime import Service
from sstools.convo.main import assemble
from sstools.convo.store import MIGRATIONS
from sstools.convo.store.queries import ConversationStore
from sstools.convo.v1 import convo_pb2, convo_pb2_grpc
from sstools.devstack.agentstack import convo_settings_for
from sstools.devstack.keys import service_channel
from sstools.devstack.keys import user_token as issue_user_token
from sstools.devstack.testing import started_service


def user_token(user: str, now: datetime | None = None) -> str:
    return issue_user_token(user, ttl=timedelta(minutes=5), now=now)


def person(user: str) -> tuple[tuple[str, str]]:
    """The metadata of a gRPC call the agent makes for ``user``: their user token."""
    return as_user(user_token(user))


async def new_conversation(
    agent: convo_pb2_grpc.ConversationServiceAsyncStub, user: str, first_message: str = "hi"
) -> str:
    """A conversation of ``user``'s, made as the agent makes one: its first message's lease, taken
    and given back at the turn's end."""
    conversation_id, holder = str(uuid.uuid4()), "test-pod"
    request = convo_pb2.AcquireLeaseRequest(
        conversation_id=conversation_id, holder=holder, first_message=first_message
    )
    lease = await agent.AcquireLease(request, metadata=person(user))
    assert lease.acquired
    assert (await agent.EndTurn(turn_end(conversation_id, holder), metadata=person(user))).released
    return conversation_id


def turn_end(conversation_id: str, holder: str) -> convo_pb2.EndTurnRequest:
    """A turn's end as the agent sends it: the lease given back, the record of a send answered."""
    record = convo_pb2.AuditRecord(
        conversation_id=conversation_id,
        service_identity="agent",
        action="send",
        decision="allowed",
        outcome="success",
        thread_id=conversation_id,
    )
    return convo_pb2.EndTurnRequest(conversation_id=conversation_id, holder=holder, audit=record)


@pytest.fixture
async def engine(fresh_database_url: str) -> AsyncIterator[AsyncEngine]:
    await asyncio.to_thread(MIGRATIONS.upgrade, fresh_database_url)
    engine = create_engine(fresh_database_url, pool_size=10)
    yield engine
    await engine.dispose()


@pytest.fixture
def store(engine: AsyncEngine) -> ConversationStore:
    return ConversationStore(engine)


@pytest.fixture
def convo_settings() -> dict[str, Any]:
    """Settings a module's convo runs with besides ports, database and secret (override it)."""
    return {}


@pytest.fixture
async def convo(
    fresh_database_url: str, tracer_provider: TracerProvider, convo_settings: dict[str, Any]
) -> AsyncIterator[Service]:
    """The whole convo service, in-process on free ports."""
    await asyncio.to_thread(MIGRATIONS.upgrade, fresh_database_url)
    settings = convo_settings_for(fresh_database_url, **convo_settings)
    async with started_service(settings, assemble, tracer_provider) as service:
        yield service


@pytest.fixture
async def rest(convo: Service) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{convo.ports['rest']}", timeout=30) as client:
        yield client


@pytest.fixture
async def agent(convo: Service) -> AsyncIterator[convo_pb2_grpc.ConversationServiceAsyncStub]:
    """convo's gRPC API as the agent reaches it: with a service token, answers as large as an
    upload (each call names its person: ``metadata=person(...)``)."""
    target = f"127.0.0.1:{convo.ports['grpc']}"
    async with service_channel(target, max_receive_bytes=FILE_MESSAGE_MAX_BYTES) as channel:
        yield convo_pb2_grpc.ConversationServiceStub(channel)
