"""Refresh tokens against a real ops and PostgreSQL: renewal that uses a token up, a copy used
again revoking the session, sign-out, a disabled user, expiry."""

import asyncio
import hashlib
from typing import Any

import httpx
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import select, text

from sstools.common.db import create_engine
from sstools.ops.store.tables import refresh_tokens

from .conftest import ops_on, password


async def sign_in(ops: httpx.AsyncClient, username: str = "anna") -> dict[str, Any]:
    reply = await ops.post("/api/auth/login", json={"username": username, "password": password(username)})
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


async def renew(ops: httpx.AsyncClient, refresh_token: str) -> httpx.Response:
    return await ops.post("/api/auth/refresh", json={"refresh_token": refresh_token})


async def me(ops: httpx.AsyncClient, access_token: str) -> int:
    return (await ops.get("/api/auth/me", headers={"Authorization": f"Bearer {access_token}"})).status_code


def refused(reply: httpx.Response) -> str:
    assert reply.status_code == 401, reply.text
    return str(reply.json()["detail"]["code"])


async def test_a_refresh_token_is_used_up_by_its_renewal_and_a_copy_used_again_revokes_the_session(
    database: str, tracer_provider: TracerProvider
) -> None:
    async with ops_on(database, tracer_provider) as ops:
        first = await sign_in(ops)
        assert first["refresh_expires_in"] == 43_200
        renewed = await renew(ops, first["refresh_token"])
        assert renewed.status_code == 200, renewed.text
        second = renewed.json()
        assert second["refresh_token"] != first["refresh_token"]
        assert await me(ops, second["access_token"]) == 200

        # the first token again: someone kept a copy — the whole session goes, the thief's and the person's
        assert refused(await renew(ops, first["refresh_token"])) == "refresh_reused"
        assert refused(await renew(ops, second["refresh_token"])) == "refresh_revoked"

        other = await sign_in(ops)  # another session of the same person is not touched
        assert (await renew(ops, other["refresh_token"])).status_code == 200


async def test_renewing_the_same_token_twice_at_once_gives_one_session(
    database: str, tracer_provider: TracerProvider
) -> None:
    async with ops_on(database, tracer_provider) as ops:
        token = (await sign_in(ops))["refresh_token"]
        replies = await asyncio.gather(*(renew(ops, token) for _ in range(5)))
        assert sorted(reply.status_code for reply in replies) == [200, 401, 401, 401, 401]


async def test_sign_out_revokes_the_session(database: str, tracer_provider: TracerProvider) -> None:
    async with ops_on(database, tracer_provider) as ops:
        session = await sign_in(ops)
        renewed = (await renew(ops, session["refresh_token"])).json()
        for _ in range(2):  # signing out twice is no error
            reply = await ops.post("/api/auth/logout", json={"refresh_token": session["refresh_token"]})
            assert reply.status_code == 204
        assert refused(await renew(ops, renewed["refresh_token"])) == "refresh_revoked"
        assert (await ops.post("/api/auth/logout", json={"refresh_token": "never-issued"})).status_code == 204


async def test_a_disabled_user_gets_no_new_tokens_and_the_old_ones_stop_at_ops(
    database: str, tracer_provider: TracerProvider
) -> None:
    async with ops_on(database, tracer_provider) as ops:
        session = await sign_in(ops)
        engine = create_engine(database)
        try:
            async with engine.begin() as connection:
                await connection.execute(
                    text("UPDATE ops_users SET is_active = false WHERE username = 'anna'")
                )
        finally:
            await engine.dispose()
        assert refused(await renew(ops, session["refresh_token"])) == "user_inactive"
        assert await me(ops, session["access_token"]) == 401


async def test_an_expired_or_unknown_refresh_token_is_refused_and_none_is_kept_in_clear(
    database: str, tracer_provider: TracerProvider
) -> None:
    async with ops_on(database, tracer_provider, refresh_token_ttl_seconds=1) as ops:
        session = await sign_in(ops)
        engine = create_engine(database)
        try:
            async with engine.connect() as connection:
                kept = (await connection.scalars(select(refresh_tokens.c.token_hash))).all()
        finally:
            await engine.dispose()
        assert kept == [hashlib.sha256(session["refresh_token"].encode()).hexdigest()]
        await asyncio.sleep(1.2)
        assert refused(await renew(ops, session["refresh_token"])) == "refresh_expired"
        assert refused(await renew(ops, "not-a-token")) == "refresh_invalid"
        assert (await ops.post("/api/auth/refresh", json={})).status_code == 422
