"""The convo service as the browser and the agent reach it: REST under a user JWT, gRPC."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import struct_pb2
from sqlalchemy import text

from sstools.common.db import create_engine
from sstools.common.grpc_errors import error_code
from sstools.common.tokens import USER_AUDIENCE, TokenType
from sstools.convo.v1 import convo_pb2, convo_pb2_grpc
from sstools.devstack.keys import ISSUER, forged_token

from .conftest import new_conversation, person, turn_end, user_token

LIMIT = 1000


@pytest.fixture
def convo_settings() -> dict[str, Any]:
    return {"max_message_chars": LIMIT}


def _auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user_token(user)}"}


async def test_browser_lists_reads_archives_and_restores_its_conversations(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub
) -> None:
    created = (
        await rest.post(
            "/api/assistant/conversations", json={"first_message": "покажи дашборды"}, headers=_auth("alice")
        )
    ).json()
    cid = created["id"]
    assert created["title"] == "покажи дашборды"
    await agent.AppendMessages(
        convo_pb2.AppendMessagesRequest(
            conversation_id=cid,
            messages=[
                convo_pb2.Message(client_message_id="u1", role="user", content="покажи дашборды"),
                convo_pb2.Message(client_message_id="a1", role="assistant", content="Вот они", partial=True),
            ],
        ),
        metadata=person("alice"),
    )
    listing = (await rest.get("/api/assistant/conversations", headers=_auth("alice"))).json()
    assert [item["id"] for item in listing["items"]] == [cid]
    assert listing["items"][0]["message_count"] == 2
    history = (await rest.get(f"/api/assistant/conversations/{cid}/history", headers=_auth("alice"))).json()
    assert [(m["role"], m["content"], m["partial"]) for m in history["items"]] == [
        ("user", "покажи дашборды", False),
        ("assistant", "Вот они", True),
    ]

    assert (await rest.delete(f"/api/assistant/conversations/{cid}", headers=_auth("alice"))).json()[
        "is_archived"
    ]
    assert (await rest.get("/api/assistant/conversations", headers=_auth("alice"))).json()["items"] == []
    archived = (await rest.get("/api/assistant/conversations?archived=true", headers=_auth("alice"))).json()
    assert [item["id"] for item in archived["items"]] == [cid]
    restored = await rest.post(f"/api/assistant/conversations/{cid}/restore", headers=_auth("alice"))
    assert restored.json()["is_archived"] is False


async def test_an_archived_conversation_is_refused_typed_on_both_edges_and_reopens_on_restore(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub
) -> None:
    cid = (await rest.post("/api/assistant/conversations", json={}, headers=_auth("alice"))).json()["id"]
    lease = convo_pb2.AcquireLeaseRequest(conversation_id=cid, holder="turn-1", ttl_seconds=30)
    assert (await agent.AcquireLease(lease, metadata=person("alice"))).acquired
    busy = await rest.delete(f"/api/assistant/conversations/{cid}", headers=_auth("alice"))
    assert (busy.status_code, busy.json()["detail"]["code"]) == (409, "conversation_busy")
    assert (await agent.EndTurn(turn_end(cid, "turn-1"), metadata=person("alice"))).released
    archived = await rest.delete(f"/api/assistant/conversations/{cid}", headers=_auth("alice"))
    assert archived.status_code == 200

    message = convo_pb2.Message(client_message_id="u1", role="user", content="after the archive")
    for closed in (
        agent.AcquireLease(lease, metadata=person("alice")),
        agent.AppendMessages(
            convo_pb2.AppendMessagesRequest(conversation_id=cid, messages=[message]), metadata=person("alice")
        ),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await closed
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert error_code(refused.value) == "CONVERSATION_ARCHIVED"
    upload = await rest.post(
        f"/api/assistant/conversations/{cid}/uploads?name=a.txt", content=b"text", headers=_auth("alice")
    )
    assert (upload.status_code, upload.json()["detail"]["code"]) == (409, "conversation_archived")

    restored = await rest.post(f"/api/assistant/conversations/{cid}/restore", headers=_auth("alice"))
    assert restored.status_code == 200
    assert (await agent.AcquireLease(lease, metadata=person("alice"))).acquired


async def _trail(database_url: str) -> list[dict[str, Any]]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            query = text(
                "SELECT user_id, service_identity, action, decision, code, tool_args, outcome"
                " FROM assistant_audit ORDER BY created_at"
            )
            return [dict(row) for row in (await connection.execute(query)).mappings()]
    finally:
        await engine.dispose()


async def test_convo_audits_its_own_archive_restore_and_upload_taken_or_refused(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub, fresh_database_url: str
) -> None:
    cid = (await rest.post("/api/assistant/conversations", json={}, headers=_auth("alice"))).json()["id"]
    uploaded = await rest.post(
        f"/api/assistant/conversations/{cid}/uploads?name=notes.txt", content=b"text", headers=_auth("alice")
    )
    lease = convo_pb2.AcquireLeaseRequest(conversation_id=cid, holder="turn-1", ttl_seconds=30)
    assert (await agent.AcquireLease(lease, metadata=person("alice"))).acquired
    assert (
        await rest.delete(f"/api/assistant/conversations/{cid}", headers=_auth("alice"))
    ).status_code == 409
    await agent.EndTurn(turn_end(cid, "turn-1"), metadata=person("alice"))  # the turn's own record
    assert (
        await rest.delete(f"/api/assistant/conversations/{cid}", headers=_auth("alice"))
    ).status_code == 200
    assert (
        await rest.post(f"/api/assistant/conversations/{cid}/restore", headers=_auth("bob"))
    ).status_code == 404
    assert (
        await rest.post(f"/api/assistant/conversations/{cid}/restore", headers=_auth("alice"))
    ).status_code == 200

    trail = await _trail(fresh_database_url)
    assert [
        (row["user_id"], row["service_identity"], row["action"], row["decision"], row["code"], row["outcome"])
        for row in trail
    ] == [
        ("alice", "convo", "upload", "allowed", "", "success"),
        ("alice", "convo", "archive", "refused", "conversation_busy", "failed"),  # a turn was running
        ("alice", "agent", "send", "allowed", "", "success"),
        ("alice", "convo", "archive", "allowed", "", "success"),
        ("bob", "convo", "restore", "refused", "conversation_not_found", "failed"),  # someone else's
        ("alice", "convo", "restore", "allowed", "", "success"),
    ]
    upload_id = uploaded.json()["upload_id"]
    assert trail[0]["tool_args"] == {"name": "notes.txt", "declared_bytes": "4", "upload_id": upload_id} | {
        "size_bytes": "4"
    }


async def test_a_refusal_for_the_persons_token_alone_is_recorded_for_no_one(
    agent: convo_pb2_grpc.ConversationServiceAsyncStub, fresh_database_url: str
) -> None:
    typed = struct_pb2.Struct()
    typed.update({"sql": "SELECT '\x00'"})  # a NUL, which JSONB takes in no string
    refusal = convo_pb2.AuditRecord(
        decision="refused", code="UNAUTHORIZED", outcome="failed", tool_args=typed
    )
    await agent.EndTurn(convo_pb2.EndTurnRequest(audit=refusal))  # the agent's service token, and no person's
    answer = convo_pb2.Message(client_message_id="a", role="assistant", content="forged")
    for anything_else in (
        convo_pb2.EndTurnRequest(audit=convo_pb2.AuditRecord(decision="allowed", outcome="success")),
        convo_pb2.EndTurnRequest(
            audit=convo_pb2.AuditRecord(decision="refused", code="RATE_LIMITED", outcome="failed")
        ),
        convo_pb2.EndTurnRequest(conversation_id=str(uuid.uuid4()), answer=answer, audit=refusal),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await agent.EndTurn(anything_else)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    (kept,) = await _trail(fresh_database_url)
    assert (kept["user_id"], kept["decision"], kept["code"]) == ("", "refused", "UNAUTHORIZED")
    assert kept["tool_args"] == {"sql": "SELECT '\ufffd'"}


async def test_bad_input_gets_typed_errors(rest: httpx.AsyncClient) -> None:
    cid = (await rest.post("/api/assistant/conversations", json={}, headers=_auth("alice"))).json()["id"]

    too_big = await rest.post(
        "/api/assistant/conversations", json={"first_message": "x" * (LIMIT + 1)}, headers=_auth("alice")
    )
    assert too_big.status_code == 413
    assert too_big.json()["detail"] == {"code": "payload_too_large", "limit_chars": LIMIT}

    assert (
        await rest.get("/api/assistant/conversations/not-a-uuid/history", headers=_auth("alice"))
    ).status_code == 422
    assert (
        await rest.get("/api/assistant/conversations?cursor=garbage", headers=_auth("alice"))
    ).status_code == 422
    for path in (f"/api/assistant/conversations/{cid}/history", f"/api/agent/conversations/{cid}/active"):
        other = await rest.get(path, headers=_auth("bob"))
        assert other.status_code == 404
        assert other.json()["detail"]["code"] == "conversation_not_found"
    assert (await rest.delete(f"/api/assistant/conversations/{cid}", headers=_auth("bob"))).status_code == 404

    expired = user_token("alice", now=datetime.now(UTC) - timedelta(hours=1))
    forged = forged_token("alice")
    service_token = ISSUER.issue(
        "agent", token_type=TokenType.SERVICE, audience=USER_AUDIENCE, ttl=timedelta(minutes=5)
    )
    for token, code in (
        (expired, "token_expired"),
        (forged, "token_key_unknown"),
        (service_token, "token_type_invalid"),
        ("nonsense", "token_malformed"),
    ):
        reply = await rest.get("/api/assistant/conversations", headers={"Authorization": f"Bearer {token}"})
        assert reply.status_code == 401
        assert reply.json()["detail"]["code"] == code
    assert (await rest.get("/api/assistant/conversations")).status_code == 401


async def test_second_tab_learns_the_conversation_is_busy_and_nothing_more(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub
) -> None:
    cid = await new_conversation(agent, "alice")
    first = await agent.AcquireLease(
        convo_pb2.AcquireLeaseRequest(conversation_id=cid, holder="pod-1/stream-a", ttl_seconds=30),
        metadata=person("alice"),
    )
    second = await agent.AcquireLease(
        convo_pb2.AcquireLeaseRequest(conversation_id=cid, holder="pod-2/stream-b", ttl_seconds=30),
        metadata=person("alice"),
    )
    assert first.acquired
    assert not second.acquired
    assert second.holder == "pod-1/stream-a"
    active = (await rest.get(f"/api/agent/conversations/{cid}/active", headers=_auth("alice"))).json()
    assert active == {"active": True}  # busy, and nothing of who holds it
    renewed = await agent.RenewLease(
        convo_pb2.RenewLeaseRequest(conversation_id=cid, holder="pod-1/stream-a")
    )
    assert renewed.acquired
    with pytest.raises(grpc.aio.AioRpcError) as lost:
        await agent.RenewLease(convo_pb2.RenewLeaseRequest(conversation_id=cid, holder="pod-2/stream-b"))
    assert lost.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert (await agent.EndTurn(turn_end(cid, "pod-1/stream-a"), metadata=person("alice"))).released
    assert (await rest.get(f"/api/agent/conversations/{cid}/active", headers=_auth("alice"))).json() == {
        "active": False
    }


async def test_a_turns_end_keeps_its_answer_and_record_and_gives_its_lease_back_in_one_call(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub, fresh_database_url: str
) -> None:
    cid = await new_conversation(agent, "alice", "покажи дашборды")
    lease = convo_pb2.AcquireLeaseRequest(conversation_id=cid, holder="pod-1/turn-2", ttl_seconds=30)
    assert (await agent.AcquireLease(lease, metadata=person("alice"))).acquired
    events = struct_pb2.Struct()
    events.update({"events": [{"type": "state", "state": "success"}]})
    end = turn_end(cid, "pod-1/turn-2")
    end.answer.CopyFrom(
        convo_pb2.Message(client_message_id="answer-2", role="assistant", content="Вот они", metadata=events)
    )
    ended = await agent.EndTurn(end, metadata=person("alice"))
    assert (ended.released, ended.answer_refused) == (True, "")
    again = await agent.EndTurn(end, metadata=person("alice"))  # a retry: nothing kept twice
    assert (again.released, again.answer_refused) == (False, "")
    assert (await agent.AcquireLease(lease, metadata=person("alice"))).acquired
    end.answer.CopyFrom(
        convo_pb2.Message(client_message_id="a3", role="assistant", content="x" * (LIMIT + 1))
    )
    too_long = await agent.EndTurn(end, metadata=person("alice"))  # not kept; the rest of the end is
    assert too_long.released
    assert too_long.answer_refused.startswith("invalid_answer: content is 1001 characters")
    assert (await rest.get(f"/api/agent/conversations/{cid}/active", headers=_auth("alice"))).json() == {
        "active": False
    }
    history = (await rest.get(f"/api/assistant/conversations/{cid}/history", headers=_auth("alice"))).json()
    assert [(m["role"], m["content"], m["metadata"]) for m in history["items"]] == [
        ("assistant", "Вот они", {"events": [{"type": "state", "state": "success"}]})
    ]
    trail = [row for row in await _trail(fresh_database_url) if row["service_identity"] == "agent"]
    assert [(row["user_id"], row["action"], row["decision"]) for row in trail] == [
        ("alice", "send", "allowed")  # the first turn's, this one's, its retry's, the too long one's
    ] * 4


async def test_an_answer_its_conversation_refuses_at_the_end_is_said_and_the_record_is_still_kept(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub, fresh_database_url: str
) -> None:
    """A turn whose lease lapsed while it ran (its pod stalled) may find its conversation archived
    at its end; a forged id finds none. The answer is not kept there, and the record is."""
    cid = await new_conversation(agent, "alice")
    lease = convo_pb2.AcquireLeaseRequest(conversation_id=cid, holder="stalled", ttl_seconds=1)
    assert (await agent.AcquireLease(lease, metadata=person("alice"))).acquired
    await asyncio.sleep(1.2)
    assert (
        await rest.delete(f"/api/assistant/conversations/{cid}", headers=_auth("alice"))
    ).status_code == 200
    bobs = await new_conversation(agent, "bob")
    answer = convo_pb2.Message(client_message_id="late", role="assistant", content="too late")
    for conversation, refused in ((cid, "conversation_archived"), (bobs, "conversation_not_found")):
        end = turn_end(conversation, "stalled")
        end.answer.CopyFrom(answer)
        ended = await agent.EndTurn(end, metadata=person("alice"))
        assert (ended.released, ended.answer_refused) == (False, refused)
        assert uuid.UUID(ended.audit_id)
    bobs_history = await rest.get(f"/api/assistant/conversations/{bobs}/history", headers=_auth("bob"))
    assert bobs_history.json()["items"] == []
    restored = await rest.post(f"/api/assistant/conversations/{cid}/restore", headers=_auth("alice"))
    assert restored.status_code == 200
    history = await rest.get(f"/api/assistant/conversations/{cid}/history", headers=_auth("alice"))
    assert history.json()["items"] == []
    kept = [row for row in await _trail(fresh_database_url) if row["service_identity"] == "agent"]
    assert [row["user_id"] for row in kept] == ["alice", "bob", "alice", "alice"]


async def test_agent_calls_map_errors_to_status_codes_and_record_audit(
    agent: convo_pb2_grpc.ConversationServiceAsyncStub,
) -> None:
    cid = await new_conversation(agent, "alice")
    cases: list[tuple[Awaitable[object], grpc.StatusCode]] = [
        (
            agent.GetHistory(convo_pb2.GetHistoryRequest(conversation_id=cid), metadata=person("bob")),
            grpc.StatusCode.NOT_FOUND,
        ),
        (
            agent.GetHistory(convo_pb2.GetHistoryRequest(conversation_id="42"), metadata=person("alice")),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            agent.AppendMessages(
                convo_pb2.AppendMessagesRequest(
                    conversation_id=cid,
                    messages=[
                        convo_pb2.Message(client_message_id="big", role="user", content="x" * (LIMIT + 1))
                    ],
                ),
                metadata=person("alice"),
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            agent.AppendMessages(
                convo_pb2.AppendMessagesRequest(
                    conversation_id=cid,
                    messages=[convo_pb2.Message(client_message_id="r", role="robot", content="?")],
                ),
                metadata=person("alice"),
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (  # no user token: no one to act for
            agent.AcquireLease(
                convo_pb2.AcquireLeaseRequest(conversation_id=str(uuid.uuid4()), holder="h", first_message="")
            ),
            grpc.StatusCode.UNAUTHENTICATED,
        ),
    ]
    for call, code in cases:
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await call
        assert error.value.code() == code
    record = convo_pb2.AuditRecord(
        conversation_id=cid,
        service_identity="agent",
        decision="needs_confirmation",
        tool_name="deploy_dashboard",
        outcome="needs_confirmation",
        thread_id=cid,
        latency_seconds=0.2,
    )
    audit = await agent.EndTurn(convo_pb2.EndTurnRequest(audit=record), metadata=person("alice"))
    assert uuid.UUID(audit.audit_id)
    archived = await agent.ArchiveConversation(
        convo_pb2.ArchiveConversationRequest(conversation_id=cid), metadata=person("alice")
    )
    assert archived.is_archived
    assert archived.title == "hi"
