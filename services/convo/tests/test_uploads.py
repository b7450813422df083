"""Uploads: the browser sends a file under its JWT (REST), the agent reads it by id for that user
and conversation only (gRPC) and deletes it after the turn; limits, quota and expiry hold."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

import grpc
import httpx
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.common.runtime import Service
from sstools.convo.api.app import upload_name_problem
from sstools.convo.checkpoints import CheckpointJanitor
from sstools.convo.housekeeping import HousekeepingMetrics, housekeeping_pass
from sstools.convo.store.queries import ConversationStore
from sstools.convo.store.uploads import UploadLimits, UploadQuotaExceeded, UploadStore
from sstools.convo.v1 import convo_pb2, convo_pb2_grpc

from .conftest import new_conversation, person, user_token

MAX_BYTES = 10 * 1024 * 1024
MAX_FILES = 4
MAX_PENDING_BYTES = 12 * 1024 * 1024


@pytest.fixture
def convo_settings() -> dict[str, Any]:
    return {
        "upload_max_bytes": MAX_BYTES,
        "upload_max_pending_files": MAX_FILES,
        "upload_max_pending_bytes": MAX_PENDING_BYTES,
    }


def _auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user_token(user)}", "Content-Type": "application/octet-stream"}


def _path(conversation_id: str) -> str:
    return f"/api/assistant/conversations/{conversation_id}/uploads"


async def _count(database_url: str) -> int:
    from sstools.common.db import create_engine

    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            return int(await connection.scalar(text("SELECT count(*) FROM agent_uploads")) or 0)
    finally:
        await engine.dispose()


async def _raw(port: int, head: str, chunks: list[bytes] = [], *, wait: float = 10.0) -> tuple[int, bytes]:  # noqa: B006
    """A request written by hand, so a test controls what of the body is sent (if any) and can
    see the answer come before the rest of it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head.replace("\n", "\r\n").encode() + b"\r\n")
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
        response = await asyncio.wait_for(reader.read(65536), wait)
    finally:
        writer.close()
    status = int(response.split(b" ", 2)[1])
    return status, response.split(b"\r\n\r\n", 1)[-1]


async def _read(
    agent: convo_pb2_grpc.ConversationServiceAsyncStub, user: str, conversation_id: str, upload_id: str
) -> convo_pb2.Upload:
    request = convo_pb2.ReadUploadRequest(conversation_id=conversation_id, upload_id=upload_id)
    return await agent.ReadUpload(request, metadata=person(user))


async def test_an_upload_is_read_by_id_for_its_owner_and_conversation_only_and_deleted_after(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub
) -> None:
    conversation = str(uuid.uuid4())  # not created yet: the page makes the id before the first message
    other_conversation = str(uuid.uuid4())
    content = bytes(range(256)) * (MAX_BYTES // 256)  # exactly the limit, far above gRPC's 4 MiB default
    sent = await rest.post(
        _path(conversation), params={"name": "отчёт.pdf"}, content=content, headers=_auth("alice")
    )
    assert sent.status_code == 201, sent.text
    body = sent.json()
    assert (body["name"], body["size_bytes"]) == ("отчёт.pdf", len(content))
    upload_id = body["upload_id"]
    assert uuid.UUID(upload_id).version == 4
    assert body["expires_at"]

    found = await _read(agent, "alice", conversation, upload_id)
    assert (found.name, found.size_bytes, found.content == content) == ("отчёт.pdf", len(content), True)
    for user, where, upload in (
        ("bob", conversation, upload_id),  # another user
        ("alice", other_conversation, upload_id),  # another conversation
        ("alice", conversation, str(uuid.uuid4())),  # never issued
        ("alice", conversation, "/etc/hostname"),  # not an id at all
    ):
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await _read(agent, user, where, upload)
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND

    # someone else cannot delete it either
    request = convo_pb2.DeleteUploadsRequest(conversation_id=conversation, upload_ids=[upload_id])
    assert (await agent.DeleteUploads(request, metadata=person("bob"))).deleted == 0
    assert (await agent.DeleteUploads(request, metadata=person("alice"))).deleted == 1
    with pytest.raises(grpc.aio.AioRpcError) as gone:
        await _read(agent, "alice", conversation, upload_id)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND


async def test_no_token_is_refused_before_the_body_is_read(convo: Service, fresh_database_url: str) -> None:
    port = convo.ports["rest"]
    head = f"POST {_path(str(uuid.uuid4()))}?name=a.csv HTTP/1.1\nHost: convo\nContent-Length: 5000000\n"
    status, body = await _raw(port, head)  # not a byte of the body sent: the answer comes anyway
    assert status == 401
    assert json.loads(body)["detail"]["code"] == "token_missing"
    bad = head + "Authorization: Bearer not-a-jwt\n"
    assert (await _raw(port, bad))[0] == 401
    assert await _count(fresh_database_url) == 0


async def test_an_upload_over_the_limit_gets_413_before_its_body_is_kept(
    convo: Service, rest: httpx.AsyncClient, fresh_database_url: str
) -> None:
    port = convo.ports["rest"]
    path = f"{_path(str(uuid.uuid4()))}?name=big.csv"
    auth = f"Authorization: Bearer {user_token('alice')}\n"
    # declared too big: answered at once, without reading (or waiting for) the body
    head = f"POST {path} HTTP/1.1\nHost: convo\n{auth}Content-Length: {MAX_BYTES + 1}\n"
    status, body = await _raw(port, head)
    assert status == 413
    detail = json.loads(body)["detail"]
    assert (detail["code"], detail["limit_bytes"]) == ("upload_too_large", MAX_BYTES)

    # no length declared (chunked): reading stops as the body passes the limit, nothing is kept
    chunk = b"x" * (1024 * 1024)
    chunked = [b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(11)]
    head = f"POST {path} HTTP/1.1\nHost: convo\n{auth}Transfer-Encoding: chunked\n"
    status, body = await _raw(port, head, chunked)
    assert status == 413
    assert json.loads(body)["detail"]["code"] == "upload_too_large"
    assert await _count(fresh_database_url) == 0

    # the ordinary client sees the same
    reply = await rest.post(
        _path(str(uuid.uuid4())),
        params={"name": "big.csv"},
        content=b"x" * (MAX_BYTES + 1),
        headers=_auth("alice"),
    )
    assert reply.status_code == 413
    assert await _count(fresh_database_url) == 0


async def test_names_that_are_paths_and_other_peoples_conversations_are_refused(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub
) -> None:
    conversation = str(uuid.uuid4())
    for name in ("", " ", "../etc/passwd", "a/b.csv", "a\\b.csv", "x\x00.csv", "a\nb.csv", "..", "n" * 256):
        reply = await rest.post(
            _path(conversation), params={"name": name}, content=b"1,2", headers=_auth("alice")
        )
        assert reply.status_code == 422, name
        assert reply.json()["detail"]["code"] == "invalid_upload_name"
    assert upload_name_problem("квартальный отчёт (2).pdf") is None

    bobs = await new_conversation(agent, "bob")
    reply = await rest.post(_path(bobs), params={"name": "a.csv"}, content=b"1,2", headers=_auth("alice"))
    assert reply.status_code == 404
    assert reply.json()["detail"]["code"] == "conversation_not_found"
    assert (
        await rest.post(_path("42"), params={"name": "a.csv"}, content=b"1", headers=_auth("alice"))
    ).status_code == 422


async def test_pending_uploads_are_bounded_per_user_in_count_and_bytes_even_in_parallel(
    rest: httpx.AsyncClient, agent: convo_pb2_grpc.ConversationServiceAsyncStub, fresh_database_url: str
) -> None:
    conversation = str(uuid.uuid4())

    async def send(user: str, size: int) -> httpx.Response:
        return await rest.post(
            _path(conversation), params={"name": "a.csv"}, content=b"1" * size, headers=_auth(user)
        )

    replies = await asyncio.gather(*(send("alice", 100) for _ in range(3 * MAX_FILES)))
    statuses = sorted(reply.status_code for reply in replies)
    assert statuses == [201] * MAX_FILES + [429] * (2 * MAX_FILES)
    refused = next(reply for reply in replies if reply.status_code == 429).json()["detail"]
    assert (refused["code"], refused["max_pending_files"]) == ("upload_quota_exceeded", MAX_FILES)
    assert (await send("bob", 100)).status_code == 201  # the bound is per user

    # bytes: 6 MiB + 6 MiB fit in 12 MiB, a third does not; a deleted upload frees its share
    carol = [await send("carol", 6 * 1024 * 1024) for _ in range(3)]
    assert [reply.status_code for reply in carol] == [201, 201, 429]
    first = carol[0].json()["upload_id"]
    await agent.DeleteUploads(
        convo_pb2.DeleteUploadsRequest(conversation_id=conversation, upload_ids=[first]),
        metadata=person("carol"),
    )
    assert (await send("carol", 6 * 1024 * 1024)).status_code == 201
    assert await _count(fresh_database_url) == MAX_FILES + 1 + 2


async def test_expired_uploads_are_not_found_and_the_housekeeping_pass_deletes_them(
    engine: AsyncEngine,
) -> None:
    uploads = UploadStore(engine, UploadLimits(max_files=2, max_bytes=1000, ttl=timedelta(minutes=15)))
    conversation = uuid.uuid4()
    kept = await uploads.add("alice", conversation, "kept.csv", b"1,2")
    stale = await uploads.add("alice", conversation, "stale.csv", b"3,4")
    with pytest.raises(UploadQuotaExceeded):  # two pending is alice's bound
        await uploads.add("alice", conversation, "third.csv", b"5")
    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE agent_uploads SET expires_at = now() - interval '1 second' WHERE id = :id"),
            {"id": stale.id},
        )
    assert await uploads.read("alice", conversation, stale.id) is None  # expired: gone at once
    assert (await uploads.read("alice", conversation, kept.id)) is not None
    await uploads.add("alice", conversation, "third.csv", b"5")  # an expired upload counts no more

    registry = CollectorRegistry()
    metrics = HousekeepingMetrics(registry)
    await housekeeping_pass(CheckpointJanitor(engine), uploads, timedelta(hours=1), metrics)
    async with engine.connect() as connection:
        names = sorted((await connection.execute(text("SELECT name FROM agent_uploads"))).scalars())
    assert names == ["kept.csv", "third.csv"]
    assert registry.get_sample_value("sstools_convo_uploads_expired_total") == 1
    # conversations need not exist for an upload, and creating one later changes nothing
    await ConversationStore(engine).create("alice", conversation_id=conversation)
    assert (await uploads.read("alice", conversation, kept.id)) is not None
