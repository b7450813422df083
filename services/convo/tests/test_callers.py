"""Who may call convo's gRPC API, and for whom: only a caller with a service token ops signed,
and only for the person whose user token the call carries — never for a user a field names."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import grpc
import httpx
import pytest
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy import text

from sstools.common.db import create_engine
from sstools.common.grpc_auth import AUTH_CREDENTIAL_KEY, AUTH_ERROR_KEY, as_user, bearer
from sstools.common.runtime import Service
from sstools.convo.v1 import convo_pb2, convo_pb2_grpc
from sstools.devstack.callers import answer, not_refused
from sstools.devstack.keys import forged_token, service_token

from .conftest import new_conversation, person, user_token

SERVICE = convo_pb2.DESCRIPTOR.services_by_name["ConversationService"]
TABLES = (
    "agent_conversations",
    "agent_messages",
    "assistant_audit",
    "agent_conversation_leases",
    "agent_uploads",
    "agent_turn_counts",
)

ROWS = "string_agg(t::text, ',' ORDER BY t::text)"


async def _state(database_url: str) -> dict[str, str]:
    """A digest of every row of convo's tables."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            return {
                table: str(
                    (
                        await connection.execute(text(f"SELECT md5(coalesce({ROWS}, '')) FROM {table} t"))
                    ).scalar()
                )
                for table in TABLES
            }
    finally:
        await engine.dispose()


async def _upload(rest: httpx.AsyncClient, user: str, conversation_id: str) -> str:
    reply = await rest.post(
        f"/api/assistant/conversations/{conversation_id}/uploads",
        params={"name": "a.csv"},
        content=b"1,2",
        headers={"Authorization": f"Bearer {user_token(user)}", "Content-Type": "application/octet-stream"},
    )
    assert reply.status_code == 201, reply.text
    return str(reply.json()["upload_id"])


async def _conversation(agent: convo_pb2_grpc.ConversationServiceAsyncStub, user: str) -> str:
    created = await new_conversation(agent, user, "секрет")
    await agent.AppendMessages(
        convo_pb2.AppendMessagesRequest(
            conversation_id=created,
            messages=[convo_pb2.Message(client_message_id="u1", role="user", content="секрет")],
        ),
        metadata=person(user),
    )
    return created


def _valid_calls(conversation_id: str, upload_id: str) -> dict[str, Message]:
    """A request for every RPC that convo takes from the agent for its owner."""
    return {
        "AppendMessages": convo_pb2.AppendMessagesRequest(
            conversation_id=conversation_id,
            messages=[convo_pb2.Message(client_message_id="forged", role="assistant", content="forged")],
        ),
        "GetHistory": convo_pb2.GetHistoryRequest(conversation_id=conversation_id),
        "AcquireLease": convo_pb2.AcquireLeaseRequest(
            conversation_id=conversation_id, holder="intruder", ttl_seconds=30
        ),
        "RenewLease": convo_pb2.RenewLeaseRequest(conversation_id=conversation_id, holder="pod-1"),
        "EndTurn": convo_pb2.EndTurnRequest(
            conversation_id=conversation_id,
            holder="pod-1",
            answer=convo_pb2.Message(client_message_id="end", role="assistant", content="done"),
            audit=convo_pb2.AuditRecord(
                conversation_id=conversation_id, decision="confirmed", outcome="success"
            ),
        ),
        "ReadUpload": convo_pb2.ReadUploadRequest(conversation_id=conversation_id, upload_id=upload_id),
        "DeleteUploads": convo_pb2.DeleteUploadsRequest(
            conversation_id=conversation_id, upload_ids=[upload_id]
        ),
        "ArchiveConversation": convo_pb2.ArchiveConversationRequest(conversation_id=conversation_id),
    }


async def test_every_rpc_without_a_valid_service_token_is_refused_before_it_runs(
    convo: Service,
    rest: httpx.AsyncClient,
    agent: convo_pb2_grpc.ConversationServiceAsyncStub,
    fresh_database_url: str,
) -> None:
    target = f"127.0.0.1:{convo.ports['grpc']}"
    cid = await _conversation(agent, "alice")
    upload = await _upload(rest, "alice", cid)
    await agent.AcquireLease(
        convo_pb2.AcquireLeaseRequest(conversation_id=cid, holder="pod-1", ttl_seconds=60),
        metadata=person("alice"),
    )
    calls = _valid_calls(cid, upload)
    assert set(calls) == set(SERVICE.methods_by_name)  # a new RPC must be added here
    before = await _state(fresh_database_url)

    # the person's own valid token: only the service credential is wrong
    wrong = {
        method: refusals
        for method, request in calls.items()
        if (refusals := await not_refused(target, SERVICE.full_name, method, request, person("alice")))
    }
    assert wrong == {}
    assert await _state(fresh_database_url) == before  # nothing read, written, counted or leased

    # The same requests with a service token are taken: the credential alone was missing.
    for method, request in calls.items():
        status = await answer(
            target, SERVICE.full_name, method, request, [bearer(service_token()), *person("alice")]
        )
        assert status == (grpc.StatusCode.OK, ""), method

    # Probes hold no token: health and reflection stay open.
    async with grpc.aio.insecure_channel(target) as channel:
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert health.status == health_pb2.HealthCheckResponse.SERVING


MessageT = TypeVar("MessageT", bound=Message)


def _with_user_field(request: MessageT, user: str) -> MessageT:
    """``request`` as a client of the old contract sends it: a ``user_id`` (field 1) naming ``user``."""
    encoded = user.encode()
    legacy = b"\x0a" + bytes([len(encoded)]) + encoded + request.SerializeToString()
    return type(request).FromString(legacy)


async def test_a_call_acts_for_its_user_token_whatever_the_request_names(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub, fresh_database_url: str
) -> None:
    bobs = await _conversation(agent, "bob")
    bobs_upload = await _upload(rest, "bob", bobs)
    as_alice = person("alice")
    not_found: dict[str, Awaitable[object]] = {
        "GetHistory": agent.GetHistory(
            _with_user_field(convo_pb2.GetHistoryRequest(conversation_id=bobs), "bob"), metadata=as_alice
        ),
        "AppendMessages": agent.AppendMessages(
            _with_user_field(
                convo_pb2.AppendMessagesRequest(
                    conversation_id=bobs,
                    messages=[convo_pb2.Message(client_message_id="x", role="assistant", content="forged")],
                ),
                "bob",
            ),
            metadata=as_alice,
        ),
        "ReadUpload": agent.ReadUpload(
            _with_user_field(convo_pb2.ReadUploadRequest(conversation_id=bobs, upload_id=bobs_upload), "bob"),
            metadata=as_alice,
        ),
        "AcquireLease": agent.AcquireLease(
            _with_user_field(convo_pb2.AcquireLeaseRequest(conversation_id=bobs, holder="x"), "bob"),
            metadata=as_alice,
        ),
        "ArchiveConversation": agent.ArchiveConversation(
            _with_user_field(convo_pb2.ArchiveConversationRequest(conversation_id=bobs), "bob"),
            metadata=as_alice,
        ),
    }
    for method, call in not_found.items():
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await call
        assert error.value.code() == grpc.StatusCode.NOT_FOUND, method
    deleted = await agent.DeleteUploads(
        _with_user_field(
            convo_pb2.DeleteUploadsRequest(conversation_id=bobs, upload_ids=[bobs_upload]), "bob"
        ),
        metadata=as_alice,
    )
    assert deleted.deleted == 0

    # An audit record and a counted turn are the token's user's, never the named one's.
    forged = convo_pb2.AuditRecord(conversation_id=bobs, decision="confirmed")
    legacy = convo_pb2.AuditRecord.FromString(b"\x12\x03bob" + forged.SerializeToString())  # user_id: field 2
    await agent.EndTurn(convo_pb2.EndTurnRequest(audit=legacy), metadata=as_alice)

    def counted() -> convo_pb2.AcquireLeaseRequest:  # a new message, in a conversation of its own
        request = convo_pb2.AcquireLeaseRequest(
            conversation_id=str(uuid.uuid4()),
            holder="x",
            first_message="hi",
            turn_budget=convo_pb2.TurnBudget(limit=1, window_seconds=60),
        )
        return _with_user_field(request, "bob")

    assert (await agent.AcquireLease(counted(), metadata=as_alice)).turn.allowed
    assert not (await agent.AcquireLease(counted(), metadata=as_alice)).turn.allowed  # alice's one turn, used
    assert (await agent.AcquireLease(counted(), metadata=person("bob"))).turn.allowed  # bob's untouched
    engine = create_engine(fresh_database_url)
    try:
        async with engine.connect() as connection:
            confirmed = text("SELECT user_id FROM assistant_audit WHERE decision = 'confirmed'")
            audited = (await connection.execute(confirmed)).scalars().all()
            history = (
                (
                    await connection.execute(
                        text("SELECT content FROM agent_messages WHERE conversation_id = :id"), {"id": bobs}
                    )
                )
                .scalars()
                .all()
            )
    finally:
        await engine.dispose()
    assert audited == ["alice"]
    assert history == ["секрет"]
    uploaded = await agent.ReadUpload(
        convo_pb2.ReadUploadRequest(conversation_id=bobs, upload_id=bobs_upload), metadata=person("bob")
    )
    assert uploaded.content == b"1,2"  # still bob's, and still there


def _allowed() -> convo_pb2.EndTurnRequest:
    return convo_pb2.EndTurnRequest(audit=convo_pb2.AuditRecord(decision="allowed"))


async def _refusal(call: Awaitable[object]) -> tuple[grpc.StatusCode, object, object]:
    """How a call was refused: its status, and the reason and credential it names."""
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await call
    trailing = dict(error.value.trailing_metadata() or ())
    return error.value.code(), trailing.get(AUTH_ERROR_KEY), trailing.get(AUTH_CREDENTIAL_KEY)


@pytest.mark.parametrize(
    ("user_metadata", "reason"),
    [
        ((), "user_token_missing"),
        (as_user(service_token()), "token_audience_invalid"),
        (as_user(forged_token("bob")), "token_key_unknown"),
        (as_user("nonsense"), "token_malformed"),
    ],
)
async def test_a_call_for_a_person_without_their_valid_token_is_unauthenticated(
    agent: convo_pb2_grpc.ConversationServiceAsyncStub,
    user_metadata: tuple[tuple[str, str], ...],
    reason: str,
) -> None:
    for call in (
        agent.AcquireLease(
            convo_pb2.AcquireLeaseRequest(
                conversation_id=str(uuid.uuid4()),
                holder="x",
                first_message="hi",
                turn_budget=convo_pb2.TurnBudget(limit=1, window_seconds=60),
            ),
            metadata=user_metadata,
        ),
        agent.EndTurn(_allowed(), metadata=user_metadata),
    ):
        assert await _refusal(call) == (grpc.StatusCode.UNAUTHENTICATED, reason, "user")


async def test_a_turn_that_outlives_its_user_token_still_records_its_end_and_nothing_else(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub
) -> None:
    cid = await _conversation(agent, "alice")
    upload = await _upload(rest, "alice", cid)
    now = datetime.now(UTC)
    lapsed = as_user(user_token("alice", now=now - timedelta(minutes=8)))  # expired 3 minutes ago
    answer_message = convo_pb2.AppendMessagesRequest(
        conversation_id=cid,
        messages=[convo_pb2.Message(client_message_id="a1", role="assistant", content="ok")],
    )
    await agent.AppendMessages(answer_message, metadata=lapsed)
    ended = convo_pb2.EndTurnRequest(
        conversation_id=cid,
        answer=convo_pb2.Message(client_message_id="a2", role="assistant", content="done"),
        audit=convo_pb2.AuditRecord(conversation_id=cid, decision="allowed", outcome="success"),
    )
    assert not (await agent.EndTurn(ended, metadata=lapsed)).answer_refused
    request = convo_pb2.DeleteUploadsRequest(conversation_id=cid, upload_ids=[upload])
    assert (await agent.DeleteUploads(request, metadata=lapsed)).deleted == 1

    long_gone = as_user(user_token("alice", now=now - timedelta(minutes=25)))  # past CONVO's 900 s
    for call in (
        agent.GetHistory(convo_pb2.GetHistoryRequest(conversation_id=cid), metadata=lapsed),
        agent.AcquireLease(convo_pb2.AcquireLeaseRequest(conversation_id=cid, holder="h"), metadata=lapsed),
        agent.ReadUpload(
            convo_pb2.ReadUploadRequest(conversation_id=cid, upload_id=str(uuid.uuid4())), metadata=lapsed
        ),
        agent.AppendMessages(answer_message, metadata=long_gone),
        agent.EndTurn(_allowed(), metadata=long_gone),
    ):
        assert await _refusal(call) == (grpc.StatusCode.UNAUTHENTICATED, "token_expired", "user")
