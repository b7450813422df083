"""User accounts through a real ops and PostgreSQL: admins find, add, promote, demote and disable
users and give them new passwords; disabling or a new password ends the user's sessions; the last
admin cannot be removed; each account shows how it last signed in."""

import asyncio
from datetime import UTC, datetime, timedelta
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
        assert [(account["username"], account["role"]) for account in listing.json()["items"]] == [
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


async def test_the_listing_finds_by_a_part_of_the_name_role_and_state_a_page_at_a_time(
    database: str, tracer_provider: TracerProvider
) -> None:
    async with ops_on(database, tracer_provider) as ops:
        root, anna = await sign_in(ops, "root"), await sign_in(ops, "anna")
        for name, role in (
            ("Maria_K", "operator"),
            ("mariam", "viewer"),
            ("marlow", "operator"),
            ("xmariax", "admin"),
            ("mar%ia", "viewer"),
        ):
            new = {"username": name, "password": f"{name}-long-pass", "role": role}
            assert (await ops.post(USERS, json=new, headers=bearer(root))).status_code == 201
        await ops.patch(f"{USERS}/marlow", json={"active": False}, headers=bearer(root))

        async def names(**params: Any) -> tuple[list[str], int]:
            """The names found (in Python's order: the database's depends on its collation)."""
            reply = await ops.get(USERS, params=params, headers=bearer(root))
            assert reply.status_code == 200, reply.text
            body = reply.json()
            return sorted(account["username"] for account in body["items"]), body["total"]

        assert await names(q="MARIA") == (["Maria_K", "mariam", "xmariax"], 3)  # any case, anywhere
        assert await names(q="a_k") == (["Maria_K"], 1)  # _ and % are the characters themselves
        assert await names(q="r%") == (["mar%ia"], 1)
        assert await names(role="operator") == (["Maria_K", "marlow"], 2)
        assert await names(active="false") == (["marlow"], 1)
        assert await names(q="mar", role="operator", active="true") == (["Maria_K"], 1)
        assert await names(q="nobody") == ([], 0)

        # a page at a time, in the database's order of names; the total counts every match
        whole = (await ops.get(USERS, params={"q": "a"}, headers=bearer(root))).json()["items"]
        seen, cursor = [], None
        while True:
            params = {"q": "a", "limit": "2", **({"cursor": cursor} if cursor else {})}
            page = (await ops.get(USERS, params=params, headers=bearer(root))).json()
            assert page["total"] == (6 if cursor is None else 7)  # "aa" is one more after the first
            assert len(page["items"]) <= 2
            seen += [account["username"] for account in page["items"]]
            if cursor is None:  # a name before the page's end moves nothing after it
                made = {"username": "aa", "password": "aaron-long-pass", "role": "viewer"}
                assert (await ops.post(USERS, json=made, headers=bearer(root))).status_code == 201
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == [account["username"] for account in whole]
        assert sorted(seen) == ["Maria_K", "anna", "mar%ia", "mariam", "marlow", "xmariax"]

        for bad in (
            {"role": "owner"},
            {"active": "maybe"},
            {"limit": "0"},
            {"limit": "1000"},
            {"q": "x" * 201},
        ):
            assert (await ops.get(USERS, params=bad, headers=bearer(root))).status_code == 422, bad
        assert code(await ops.get(USERS, params={"cursor": "not-ours"}, headers=bearer(root))) == (
            422,
            "bad_cursor",
        )
        for path in (USERS, f"{USERS}/anna"):
            assert code(await ops.get(path, headers=bearer(anna))) == (403, "permission_denied")
            assert (await ops.get(path)).status_code == 401


async def test_an_admin_s_new_password_ends_every_session_of_the_user(
    database: str, tracer_provider: TracerProvider
) -> None:
    async with ops_on(database, tracer_provider) as ops:
        root, anna = await sign_in(ops, "root"), await sign_in(ops, "anna")
        await asyncio.sleep(1)  # a token's iat is in whole seconds: anna's is now of an earlier one
        new_password = "anna-brand-new-pass"
        changed = await ops.post(
            f"{USERS}/anna/password", json={"password": new_password}, headers=bearer(root)
        )
        assert (changed.status_code, changed.json()) == (
            200,
            {"username": "anna", "role": "analyst", "active": True},
        )

        # her old session is over: its access token at once, its refresh token, the old password
        assert code(await ops.get("/api/auth/me", headers=bearer(anna))) == (401, "session_ended")
        refresh = {"refresh_token": anna["refresh_token"]}
        assert code(await ops.post("/api/auth/refresh", json=refresh)) == (401, "refresh_revoked")
        old = await ops.post("/api/auth/login", json={"username": "anna", "password": password("anna")})
        assert code(old) == (401, "bad_credentials")
        again = await sign_in(ops, "anna", new_password)  # the new one works, at once
        assert (await ops.get("/api/auth/me", headers=bearer(again))).json()["username"] == "anna"

        short = await ops.post(f"{USERS}/anna/password", json={"password": "short"}, headers=bearer(root))
        assert short.status_code == 422
        unknown = await ops.post(
            f"{USERS}/nobody/password", json={"password": new_password}, headers=bearer(root)
        )
        assert code(unknown) == (404, "user_not_found")
        by_anna = await ops.post(
            f"{USERS}/root/password", json={"password": new_password}, headers=bearer(again)
        )
        assert code(by_anna) == (403, "permission_denied")

        assert await audit(database) == [("root", "user.password", "anna")]
        assert new_password not in await audit_text(database)  # never the password itself


async def test_an_account_shows_how_when_and_from_where_it_last_signed_in(
    database: str, tracer_provider: TracerProvider
) -> None:
    forged = {"X-Forwarded-For": "203.0.113.9"}
    async with ops_on(database, tracer_provider) as ops:
        root = await sign_in(ops, "root")
        never = (await ops.get(f"{USERS}/anna", headers=bearer(root))).json()
        assert never == {
            "username": "anna",
            "role": "analyst",
            "active": True,
            "sso_only": False,
            "last_sign_in": None,
            "sso_subject": None,
        }
        # no trusted proxy is set: whatever the client writes in X-Forwarded-For is not its address
        reply = await ops.post(
            "/api/auth/login", json={"username": "anna", "password": password("anna")}, headers=forged
        )
        assert reply.status_code == 200
        shown = (await ops.get(f"{USERS}/anna", headers=bearer(root))).json()
        last = shown["last_sign_in"]
        assert {key: last[key] for key in ("method", "address", "group")} == {
            "method": "password",
            "address": "127.0.0.1",
            "group": None,
        }
        assert abs(datetime.now(UTC) - datetime.fromisoformat(last["at"])) < timedelta(minutes=1)
        listed = (await ops.get(USERS, params={"q": "anna"}, headers=bearer(root))).json()["items"]
        assert listed == [shown]  # the listing shows the same
        assert code(await ops.get(f"{USERS}/nobody", headers=bearer(root))) == (404, "user_not_found")

    # behind a trusted proxy (here: this loopback), the client it names is the address
    async with ops_on(database, tracer_provider, trusted_proxies="127.0.0.1/32") as ops:
        await ops.post(
            "/api/auth/login", json={"username": "anna", "password": password("anna")}, headers=forged
        )
        shown = (await ops.get(f"{USERS}/anna", headers=bearer(await sign_in(ops, "root")))).json()
        assert shown["last_sign_in"]["address"] == "203.0.113.9"


async def audit_text(database_url: str) -> str:
    """Every row of ops' audit trail, as text."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            return str(
                (await connection.execute(text("SELECT string_agg(t::text, ' ') FROM ops_audit t"))).scalar()
            )
    finally:
        await engine.dispose()
