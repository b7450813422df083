"""Chat turns per user, counted by convo for every agent pod as it gives a new message's lease
(over real gRPC and PostgreSQL)."""

from __future__ import annotations

import asyncio
import uuid

import grpc
import pytest
from opentelemetry.sdk.trace import TracerProvider

from sstools.convo.main import assemble
from sstools.convo.v1 import convo_pb2, convo_pb2_grpc
from sstools.devstack.agentstack import convo_settings_for
from sstools.devstack.keys import service_channel
from sstools.devstack.testing import started_service

from .conftest import person


async def send(
    agent: convo_pb2_grpc.ConversationServiceAsyncStub,
    user: str,
    limit: int = 2,
    window_seconds: int = 60,
    conversation_id: str | None = None,
) -> convo_pb2.Lease:
    """A new message's lease, as the agent takes it: its text, the user's budget."""
    request = convo_pb2.AcquireLeaseRequest(
        conversation_id=conversation_id or str(uuid.uuid4()),
        holder=f"pod:{uuid.uuid4().hex[:12]}",
        first_message="сколько заказов?",
        turn_budget=convo_pb2.TurnBudget(limit=limit, window_seconds=window_seconds),
    )
    return await agent.AcquireLease(request, metadata=person(user))


async def count(
    agent: convo_pb2_grpc.ConversationServiceAsyncStub, user: str, limit: int = 2, window_seconds: int = 60
) -> convo_pb2.TurnCount:
    lease = await send(agent, user, limit, window_seconds)
    assert lease.acquired == lease.turn.allowed  # a new conversation's lease is free: only the budget refuses
    return lease.turn


async def test_turns_past_the_limit_wait_for_the_window_to_end_and_users_count_apart(
    agent: convo_pb2_grpc.ConversationServiceAsyncStub,
) -> None:
    answers = [await count(agent, "anna") for _ in range(4)]
    assert [answer.allowed for answer in answers] == [True, True, False, False]
    assert all(1 <= answer.retry_after_seconds <= 60 for answer in answers[2:])
    assert (await count(agent, "oleg")).allowed

    short = [await count(agent, "vera", limit=1, window_seconds=1) for _ in range(2)]
    assert [answer.allowed for answer in short] == [True, False]
    assert short[1].retry_after_seconds == 1
    await asyncio.sleep(1.1)
    assert (await count(agent, "vera", limit=1, window_seconds=1)).allowed


async def test_parallel_turns_never_both_take_the_last_place(
    agent: convo_pb2_grpc.ConversationServiceAsyncStub,
) -> None:
    answers = await asyncio.gather(*(count(agent, "anna", limit=5) for _ in range(20)))
    assert sum(answer.allowed for answer in answers) == 5


async def test_every_convo_replica_counts_the_same_turns(
    agent: convo_pb2_grpc.ConversationServiceAsyncStub,
    fresh_database_url: str,
    tracer_provider: TracerProvider,
) -> None:
    settings = convo_settings_for(fresh_database_url)
    async with (
        started_service(settings, assemble, tracer_provider) as other,
        service_channel(f"127.0.0.1:{other.ports['grpc']}") as channel,
    ):
        replica = convo_pb2_grpc.ConversationServiceStub(channel)
        assert (await count(agent, "anna")).allowed
        assert (await count(replica, "anna")).allowed
        assert not (await count(agent, "anna")).allowed
        assert not (await count(replica, "anna")).allowed


@pytest.mark.parametrize("window_seconds", [0, 86_401])
async def test_a_count_without_a_sane_window_is_invalid(
    agent: convo_pb2_grpc.ConversationServiceAsyncStub, window_seconds: int
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await count(agent, "anna", window_seconds=window_seconds)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "window_seconds" in (refused.value.details() or "")


async def test_a_turn_over_the_budget_creates_nothing_and_one_refused_for_its_conversation_is_not_counted(
    agent: convo_pb2_grpc.ConversationServiceAsyncStub,
) -> None:
    assert (await count(agent, "anna", limit=1)).allowed
    refused = str(uuid.uuid4())
    over = await send(agent, "anna", limit=1, conversation_id=refused)
    assert (over.acquired, over.turn.allowed, over.holder) == (False, False, "")
    with pytest.raises(grpc.aio.AioRpcError) as missing:  # the message over the budget started nothing
        await agent.GetHistory(convo_pb2.GetHistoryRequest(conversation_id=refused), metadata=person("anna"))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND

    annas = (await send(agent, "anna", limit=5)).conversation_id
    with pytest.raises(grpc.aio.AioRpcError) as someone_elses:
        await send(agent, "oleg", limit=1, conversation_id=annas)
    assert someone_elses.value.code() == grpc.StatusCode.NOT_FOUND
    assert (await count(agent, "oleg", limit=1)).allowed  # his one turn: the refused one was not counted
