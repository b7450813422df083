"""Tokens through a real ops and convo on PostgreSQL. Rotating ops' key as the README tells an
operator to: a token of the old key works until the rotation completes, then fails everywhere;
a token of a key the services do not trust never works. Disabling a user: their access and
refresh tokens fail everywhere within the documented bound."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import jwt
import pytest
from opentelemetry.sdk.trace import TracerProvider
from pydantic import ValidationError
from sqlalchemy import text as sql

from sstools.common.catalogue import Role
from sstools.common.db import create_engine
from sstools.common.tokens import SigningKey
from sstools.convo.main import assemble as assemble_convo
from sstools.convo.store import MIGRATIONS as CONVO_MIGRATIONS
from sstools.devstack.agentstack import convo_settings_for
from sstools.devstack.keys import forged_token, user_token
from sstools.devstack.testing import free_port, started_service
from sstools.ops.main import assemble as assemble_ops
from sstools.ops.settings import OpsSettings
from sstools.ops.store import MIGRATIONS as OPS_MIGRATIONS
from sstools.ops.store.users import UserStore

ADMIN_PASSWORD = "rotation-admin-pass"
CONVERSATIONS = "/api/assistant/conversations"


@asynccontextmanager
async def deployed(
    database_url: str,
    tracer_provider: TracerProvider,
    signing: SigningKey,
    trusted: str,
    account_check_seconds: float = 5.0,
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """Ops signing with ``signing`` and convo, both trusting the PEM keys ``trusted``; convo asks
    ops whether a user is active, and trusts a yes ``account_check_seconds``."""
    ops_settings = OpsSettings(
        http_port=0,
        metrics_port=0,
        database_url=database_url,
        jwt_private_key=signing.private_pem(),
        jwt_public_keys=trusted,
        confirmation_secret="rotation-confirmations-" + "c" * 32,
        admin_username="root",
        admin_password=ADMIN_PASSWORD,
    )
    async with started_service(ops_settings, assemble_ops, tracer_provider) as ops:
        ops_url = f"http://127.0.0.1:{ops.ports['api']}"
        settings = convo_settings_for(
            database_url,
            jwt_public_keys=trusted,
            ops_url=ops_url,
            account_check_seconds=account_check_seconds,
        )
        async with (
            started_service(settings, assemble_convo, tracer_provider) as convo,
            httpx.AsyncClient(base_url=ops_url, timeout=30) as ops_http,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{convo.ports['rest']}", timeout=30) as convo_http,
        ):
            yield ops_http, convo_http


async def signed_in(ops: httpx.AsyncClient, username: str = "root", password: str = ADMIN_PASSWORD) -> Any:
    """Ops' answer to a right password: the access and the refresh token."""
    reply = await ops.post("/api/auth/login", json={"username": username, "password": password})
    assert reply.status_code == 200, reply.text
    return reply.json()


async def sign_in(ops: httpx.AsyncClient) -> str:
    return str((await signed_in(ops))["access_token"])


async def answers(ops: httpx.AsyncClient, convo: httpx.AsyncClient, token: str) -> list[tuple[int, str]]:
    """What ops (who am I) and convo (my conversations) answer to the token: status and code."""
    headers = {"Authorization": f"Bearer {token}"}
    replies = [
        await ops.get("/api/auth/me", headers=headers),
        await convo.get(CONVERSATIONS, headers=headers),
    ]
    return [
        (reply.status_code, reply.json()["detail"]["code"] if reply.status_code == 401 else "")
        for reply in replies
    ]


@pytest.fixture
async def database(fresh_database_url: str) -> str:
    await asyncio.to_thread(OPS_MIGRATIONS.upgrade, fresh_database_url)
    await asyncio.to_thread(CONVO_MIGRATIONS.upgrade, fresh_database_url)
    return fresh_database_url


async def test_a_token_of_the_old_key_works_until_the_rotation_completes_then_fails(
    database: str, tracer_provider: TracerProvider
) -> None:
    old, new = SigningKey.generate(), SigningKey.generate()
    both = old.public_pem() + new.public_pem()
    ok = [(200, ""), (200, "")]
    unknown_key = [(401, "token_key_unknown"), (401, "token_key_unknown")]

    async with deployed(database, tracer_provider, old, old.public_pem()) as (ops, convo):
        engine = create_engine(database)
        try:  # the admin is created in the background once ops is up
            for _ in range(200):
                if await UserStore(engine).active("root"):
                    break
                await asyncio.sleep(0.05)
        finally:
            await engine.dispose()
        old_token = await sign_in(ops)
        assert await answers(ops, convo, old_token) == ok

    # (1) every service trusts both keys, ops still signs with the old one; (2) ops signs with the new
    async with deployed(database, tracer_provider, old, both) as (ops, convo):
        assert await answers(ops, convo, old_token) == ok
    async with deployed(database, tracer_provider, new, both) as (ops, convo):
        new_token = await sign_in(ops)
        assert jwt.get_unverified_header(new_token)["kid"] == new.kid
        assert await answers(ops, convo, old_token) == ok  # nobody is signed out by the switch
        assert await answers(ops, convo, new_token) == ok
        published = (await ops.get("/.well-known/jwks.json")).json()
        assert {key["kid"] for key in published["keys"]} == {old.kid, new.kid}

    # (3) the old key is removed: its tokens are refused everywhere, the new key's still work
    async with deployed(database, tracer_provider, new, new.public_pem()) as (ops, convo):
        assert await answers(ops, convo, old_token) == unknown_key
        assert await answers(ops, convo, new_token) == ok
        assert await answers(ops, convo, forged_token("root")) == unknown_key
        forged_kid = forged_token("root", kid=new.kid)
        assert await answers(ops, convo, forged_kid) == [(401, "token_signature_invalid")] * 2


async def test_a_disabled_users_access_and_refresh_tokens_fail_everywhere_within_the_bound(
    database: str, tracer_provider: TracerProvider
) -> None:
    bound = 1.0
    signing = SigningKey.generate()
    engine = create_engine(database)
    try:
        await UserStore(engine).create("maria", "maria-pass-123", Role.OPERATOR)
        async with deployed(database, tracer_provider, signing, signing.public_pem(), bound) as (ops, convo):
            tokens = await signed_in(ops, "maria", "maria-pass-123")
            assert await answers(ops, convo, tokens["access_token"]) == [(200, ""), (200, "")]

            async with engine.begin() as connection:
                disable = "UPDATE ops_users SET is_active = false WHERE username = 'maria'"
                await connection.execute(sql(disable))
            await asyncio.sleep(bound + 0.5)
            inactive = [(401, "user_inactive"), (401, "user_inactive")]
            assert await answers(ops, convo, tokens["access_token"]) == inactive
            renewed = await ops.post("/api/auth/refresh", json={"refresh_token": tokens["refresh_token"]})
            assert (renewed.status_code, renewed.json()["detail"]["code"]) == (401, "user_inactive")
    finally:
        await engine.dispose()


async def test_convo_lets_no_one_in_when_it_cannot_ask_ops(
    database: str, tracer_provider: TracerProvider
) -> None:
    settings = convo_settings_for(database, ops_url=f"http://127.0.0.1:{free_port()}")  # nothing listens
    async with (
        started_service(settings, assemble_convo, tracer_provider) as convo,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{convo.ports['rest']}", timeout=30) as http,
    ):
        reply = await http.get(CONVERSATIONS, headers={"Authorization": f"Bearer {user_token('root')}"})
    assert (reply.status_code, reply.json()["detail"]["code"]) == (503, "account_check_unavailable")


def test_ops_will_not_sign_with_a_key_the_services_do_not_trust() -> None:
    old, new = SigningKey.generate(), SigningKey.generate()
    with pytest.raises(ValidationError, match="not among the trusted public keys"):
        OpsSettings(
            jwt_private_key=new.private_pem(),
            jwt_public_keys=old.public_pem(),
            confirmation_secret="rotation-confirmations-" + "c" * 32,
        )
