"""User accounts through a real ops and PostgreSQL: admins add, promote, demote and disable
users; disabling ends the user's sessions; the last admin cannot be removed."""

import asyncio
from typing import Any

import httpx
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import text

from sstools.common.db import create_engine

from .conftest import ops_on, password

USERS = "/api/admin/users"


async def sign_in(ops: httpx.AsyncClient, username: str, secret: str | None = None) -> dict[str, Any]:
    reply = await ops.post(
        "/api/auth/login", json={"username": username, "password": secret or password(username)}
    )
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def bearer(session: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {session['access_token']}"}


def code(reply: httpx.Response) -> tuple[int, str]:
    return reply.status_code, str(reply.json()["detail"]["code"])


async def test_an_admin_adds_a_user_who_can_then_sign_in_and_others_may_not_touch_accounts(
    database: str, tracer_provider: TracerProvider
) -> None:
    async with ops_on(database, tracer_provider) as ops:
        root, anna = await sign_in(ops, "root"), await sign_in(ops, "anna")
        new = {"username": "nina", "password": "nina-long-pass-1", "role": "operator"}
        added = await ops.post(USERS, json=new, headers=bearer(root))
        assert (added.status_code, added.json()) == (
            201,
            {"username": "nina", "role": "operator", "active": True},
        )
        nina = await sign_in(ops, "nina", "nina-long-pass-1")
        me = await ops.get("/api/auth/me", headers=bearer(nina))
        assert {key: me.json()[key] for key in ("username", "role")} == {
            "username": "nina",
            "role": "operator",
        }

        assert code(await ops.post(USERS, json=new, headers=bearer(root))) == (409, "user_exists")
        short = await ops.post(
            USERS, json={**new, "username": "short", "password": "short"}, headers=bearer(root)
        )
        assert short.status_code == 422
        spaced = await ops.post(USERS, json={**new, "username": "two words"}, headers=bearer(root))
        assert spaced.status_code == 422
        unknown_role = await ops.post(
            USERS, json={**new, "username": "sam", "role": "owner"}, headers=bearer(root)
        )
        assert unknown_role.status_code == 422

        for caller in (anna, nina):  # an analyst, an operator: no account is theirs to manage
            assert code(await ops.get(USERS, headers=bearer(caller))) == (403, "permission_denied")
            denied = await ops.post(
                USERS, json={**new, "username": "eve", "role": "admin"}, headers=bearer(caller)
            )
            assert code(denied) == (403, "permission_denied")
            promoted = await ops.patch(f"{USERS}/anna", json={"role": "admin"}, headers=bearer(caller))
            assert code(promoted) == (403, "permission_denied")
        assert (await ops.get(USERS)).status_code == 401

        listing = await ops.get(USERS, headers=bearer(root))
        assert [(account["username"], account["role"]) for account in listing.json()] == [
            ("anna", "analyst"),
            ("nina", "operator"),
            ("root", "admin"),
        ]
        assert await audit(database) == [("root", "user.add", "nina")]


async def test_a_role_change_holds_at_once_for_the_tokens_the_user_already_has(
    database: str, tracer_provider: TracerProvider
) -> None:
    async with ops_on(database, tracer_provider) as ops:
        root, anna = await sign_in(ops, "root"), await sign_in(ops, "anna")
        changed = await ops.patch(f"{USERS}/anna", json={"role": "operator"}, headers=bearer(root))
        assert changed.json() == {"username": "anna", "role": "operator", "active": True}
        assert (await ops.get("/api/auth/me", headers=bearer(anna))).json()["role"] == "operator"
        assert code(await ops.patch(f"{USERS}/nobody", json={"active": False}, headers=bearer(root))) == (
            404,
            "user_not_found",
        )


async def test_disabling_a_user_ends_their_sessions_and_enabling_them_brings_none_back(
    database: str, tracer_provider: TracerProvider
) -> None:
    async with ops_on(database, tracer_provider) as ops:
        root, anna = await sign_in(ops, "root"), await sign_in(ops, "anna")
        disabled = await ops.patch(f"{USERS}/anna", json={"active": False}, headers=bearer(root))
        assert disabled.json() == {"username": "anna", "role": "analyst", "active": False}
        assert code(await ops.get("/api/auth/me", headers=bearer(anna))) == (401, "user_inactive")
        refresh = {"refresh_token": anna["refresh_token"]}
        assert code(await ops.post("/api/auth/refresh", json=refresh)) == (401, "refresh_revoked")
        refused = await ops.post("/api/auth/login", json={"username": "anna", "password": password("anna")})
        assert refused.status_code == 401

        await ops.patch(f"{USERS}/anna", json={"active": True}, headers=bearer(root))
        assert code(await ops.post("/api/auth/refresh", json=refresh)) == (401, "refresh_revoked")
        again = await sign_in(ops, "anna")  # a new sign-in is the way back
        assert (await ops.get("/api/auth/me", headers=bearer(again))).status_code == 200
        assert await audit(database) == [("root", "user.change", "anna")] * 2


async def test_the_last_active_admin_cannot_be_demoted_or_disabled_even_by_two_admins_at_once(
    database: str, tracer_provider: TracerProvider
) -> None:
    async with ops_on(database, tracer_provider) as ops:
        root = await sign_in(ops, "root")
        for change in ({"active": False}, {"role": "operator"}):
            assert code(await ops.patch(f"{USERS}/root", json=change, headers=bearer(root))) == (
                409,
                "last_admin",
            )

        new = {"username": "nina", "password": "nina-long-pass-1", "role": "admin"}
        assert (await ops.post(USERS, json=new, headers=bearer(root))).status_code == 201
        await ops.patch(f"{USERS}/anna", json={"role": "admin"}, headers=bearer(root))
        admins = {
            "root": root,
            "anna": await sign_in(ops, "anna"),
            "nina": await sign_in(ops, "nina", new["password"]),
        }
        # each demotes the next at the same moment: one of them must stay an admin
        replies = await asyncio.gather(
            *(
                ops.patch(f"{USERS}/{target}", json={"role": "viewer"}, headers=bearer(admins[caller]))
                for caller, target in (("root", "anna"), ("anna", "nina"), ("nina", "root"))
            )
        )
        left = await admins_left(database)
        assert len(left) == 1, ([reply.status_code for reply in replies], left)
        # two demotions hold; the third is refused: no admin would be left, or its caller is no longer one
        first, second, third = sorted(reply.status_code for reply in replies)
        assert (first, second, third in (403, 409)) == (200, 200, True), [reply.text for reply in replies]


async def admins_left(database_url: str) -> list[str]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                text("SELECT username FROM ops_users WHERE role = 'admin' AND is_active")
            )
            return [row[0] for row in rows]
    finally:
        await engine.dispose()


async def audit(database_url: str) -> list[tuple[str, str, str]]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                text(
                    "SELECT username, action, detail->>'username' FROM ops_audit"
                    " WHERE action LIKE 'user.%' ORDER BY at"
                )
            )
            return [(row[0], row[1], row[2]) for row in rows]
    finally:
        await engine.dispose()
