"""Sign-in, service tokens and the dual identity of agent calls, against a real ops and PostgreSQL."""

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import text

from sstools.common.catalogue import Role
from sstools.common.db import create_engine
from sstools.common.tokens import SERVICE_AUDIENCE, TokenType
from sstools.devstack.keys import forged_token, user_token
from sstools.devstack.testing import started_service
from sstools.ops.main import assemble
from sstools.ops.store import MIGRATIONS
from sstools.ops.store.users import UserStore

from .conftest import ADMIN_PASSWORD, AGENT_SECRET, admin_bootstrapped, ops_settings

PASSWORDS = {"vera": "viewer-pass", "anna": "analyst-pass", "oleg": "operator-pass"}


@pytest.fixture
async def ops(fresh_database_url: str, tracer_provider: TracerProvider) -> AsyncIterator[httpx.AsyncClient]:
    await asyncio.to_thread(MIGRATIONS.upgrade, fresh_database_url)
    settings = ops_settings(
        fresh_database_url,
        environments=json.dumps(
            [
                {"id": "dev", "name": "Development", "url": "http://127.0.0.1:8088", "password_env": "X"},
                {
                    "id": "prod",
                    "name": "Production",
                    "url": "http://superset.internal:8088",
                    "browser_url": "https://BI.example.test:443/superset/welcome/",
                    "password_env": "Y",
                },
            ]
        ),
    )
    async with (
        started_service(settings, assemble, tracer_provider) as service,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{service.ports['api']}", timeout=10) as client,
    ):
        engine = create_engine(fresh_database_url)
        store = UserStore(engine)
        await admin_bootstrapped(store, "root")
        roles = (Role.VIEWER, Role.ANALYST, Role.OPERATOR)
        for (name, password), role in zip(PASSWORDS.items(), roles, strict=True):
            await store.create(name, password, role)
        await engine.dispose()
        yield client


async def _login(client: httpx.AsyncClient, username: str, password: str) -> httpx.Response:
    return await client.post("/api/auth/login", json={"username": username, "password": password})


async def _user_token(client: httpx.AsyncClient, username: str) -> str:
    password = PASSWORDS.get(username, ADMIN_PASSWORD)
    reply = await _login(client, username, password)
    assert reply.status_code == 200, reply.text
    return str(reply.json()["access_token"])


async def _disable(database_url: str, username: str) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                text("UPDATE ops_users SET is_active = false WHERE username = :name"), {"name": username}
            )
    finally:
        await engine.dispose()


async def _service_token(client: httpx.AsyncClient) -> str:
    reply = await client.post(
        "/api/auth/service-token", json={"client_id": "agent", "client_secret": AGENT_SECRET}
    )
    assert reply.status_code == 200, reply.text
    return str(reply.json()["access_token"])


async def test_login_issues_user_tokens_and_refuses_wrong_passwords(ops: httpx.AsyncClient) -> None:
    token = await _user_token(ops, "anna")
    me = await ops.get("/api/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert {key: me.json()[key] for key in ("username", "role")} == {"username": "anna", "role": "analyst"}
    # a wrong password and an unknown name get the same answer: which names exist is not told
    for username, password in (("anna", "wrong"), ("nobody", "analyst-pass")):
        reply = await _login(ops, username, password)
        assert (reply.status_code, reply.json()["detail"]["code"]) == (401, "bad_credentials"), username
    # an empty password is no attempt at all: the request model (min_length=1) refuses it
    empty = await _login(ops, "anna", "")
    assert empty.status_code == 422
    assert [(error["loc"], error["type"]) for error in empty.json()["detail"]] == [
        (["body", "password"], "string_too_short")
    ]


@pytest.mark.parametrize(
    ("username", "offered"),
    [
        ("vera", ["get_health_summary", "search_dashboards", "show_capabilities"]),
        ("anna", ["get_health_summary", "search_dashboards", "superset_execute_sql", "show_capabilities"]),
    ],
)
async def test_an_empty_chat_offers_what_the_persons_role_may_ask(
    ops: httpx.AsyncClient, username: str, offered: list[str]
) -> None:
    token = await _user_token(ops, username)
    me = (await ops.get("/api/auth/me", headers={"Authorization": f"Bearer {token}"})).json()
    assert [example["tool"] for example in me["examples"]] == offered
    assert me["examples"][0] == {
        "tool": "get_health_summary",
        "ru": "Что сломано в дашбордах?",
        "en": "What is broken in the dashboards?",
    }


async def test_a_signed_in_person_sees_the_environment_choices_without_urls(ops: httpx.AsyncClient) -> None:
    token = await _user_token(ops, "vera")  # the lowest role: choosing where to look is for everyone
    reply = await ops.get("/api/auth/environments", headers={"Authorization": f"Bearer {token}"})
    # ops' own address of a Superset never shows; the origin people open it at (the drawer's) does
    assert reply.json() == [
        {"id": "dev", "name": "Development", "production": False, "origin": None},
        {"id": "prod", "name": "Production", "production": True, "origin": "https://bi.example.test"},
    ]
    anonymous = await ops.get("/api/auth/environments")
    assert (anonymous.status_code, anonymous.json()["detail"]["code"]) == (401, "user_token_missing")


async def test_admin_is_bootstrapped_once_from_settings(
    ops: httpx.AsyncClient, fresh_database_url: str
) -> None:
    token = await _user_token(ops, "root")
    me = await ops.get("/api/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json()["role"] == "admin"
    engine = create_engine(fresh_database_url)
    try:
        assert not await UserStore(engine).bootstrap_admin(
            "root2", "another-pass"
        )  # users exist: no second admin
        async with engine.connect() as connection:
            assert await connection.scalar(text("SELECT count(*) FROM ops_users WHERE role = 'admin'")) == 1
    finally:
        await engine.dispose()


async def test_service_tokens_go_only_to_known_clients(ops: httpx.AsyncClient) -> None:
    assert await _service_token(ops)
    for client_id, secret in (("agent", "wrong-secret-000000"), ("stranger", AGENT_SECRET)):
        reply = await ops.post(
            "/api/auth/service-token", json={"client_id": client_id, "client_secret": secret}
        )
        assert (reply.status_code, reply.json()["detail"]["code"]) == (401, "bad_client_credentials")


@pytest.mark.parametrize(
    ("username", "tool", "env_id", "allowed", "required"),
    [
        ("vera", "search_dashboards", "prod", True, "viewer"),
        ("vera", "superset_execute_sql", "dev", False, "analyst"),
        ("anna", "superset_execute_sql", "dev", True, "analyst"),
        ("anna", "superset_create_dashboard", "dev", True, "analyst"),
        ("anna", "superset_create_dashboard", "prod", False, "operator"),
        ("oleg", "deploy_dashboard", "staging", True, "operator"),
        ("oleg", "deploy_dashboard", "production", False, "admin"),
        ("root", "deploy_dashboard", "prod", True, "admin"),
    ],
)
async def test_agent_calls_are_authorised_for_the_user_not_the_agent(
    ops: httpx.AsyncClient, username: str, tool: str, env_id: str, allowed: bool, required: str
) -> None:
    headers = {
        "Authorization": f"Bearer {await _service_token(ops)}",
        "X-User-Authorization": f"Bearer {await _user_token(ops, username)}",
    }
    reply = await ops.post(f"/api/tools/{tool}/authorize", json={"env_id": env_id}, headers=headers)
    assert reply.status_code == 200, reply.text
    assert (reply.json()["allowed"], reply.json()["required_role"]) == (allowed, required)


async def test_agent_only_endpoint_refuses_anything_but_both_valid_tokens(
    ops: httpx.AsyncClient, fresh_database_url: str
) -> None:
    service, user = await _service_token(ops), await _user_token(ops, "oleg")
    expired_user = user_token("oleg", ttl=timedelta(minutes=1), now=datetime.now(UTC) - timedelta(hours=1))
    forged_service = forged_token("agent", token_type=TokenType.SERVICE, audience=SERVICE_AUDIENCE)
    unsigned = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJvbGVnIn0."
    attempts = [
        ({"Authorization": f"Bearer {user}"}, "token_audience_invalid"),  # a user token is no service token
        ({"X-User-Authorization": f"Bearer {user}"}, "service_token_missing"),
        ({"Authorization": f"Bearer {service}"}, "user_token_missing"),  # service token only
        (
            {"Authorization": f"Bearer {user}", "X-User-Authorization": f"Bearer {user}"},
            "token_audience_invalid",
        ),
        (
            {"Authorization": f"Bearer {service}", "X-User-Authorization": f"Bearer {service}"},
            "token_audience_invalid",
        ),
        (
            {"Authorization": f"Bearer {forged_service}", "X-User-Authorization": f"Bearer {user}"},
            "token_key_unknown",
        ),
        (
            {"Authorization": f"Bearer {service}", "X-User-Authorization": f"Bearer {expired_user}"},
            "token_expired",
        ),
        (
            {"Authorization": f"Bearer {unsigned}", "X-User-Authorization": f"Bearer {user}"},
            "token_algorithm_rejected",
        ),
    ]
    for headers, code in attempts:
        reply = await ops.post(
            "/api/tools/deploy_dashboard/authorize", json={"env_id": "dev"}, headers=headers
        )
        assert reply.status_code == 401, (headers, reply.text)
        assert reply.json()["detail"]["code"] == code
    unknown = await ops.post(
        "/api/tools/drop_database/authorize",
        json={},
        headers={"Authorization": f"Bearer {service}", "X-User-Authorization": f"Bearer {user}"},
    )
    assert unknown.status_code == 404

    engine = create_engine(fresh_database_url)
    try:
        async with engine.connect() as connection:
            rows = (await connection.execute(text("SELECT service, username, outcome FROM ops_audit"))).all()
    finally:
        await engine.dispose()
    assert rows == []  # refused callers leave no decision behind


async def test_an_agents_call_takes_a_turns_token_a_while_after_it_expired_the_browser_does_not(
    ops: httpx.AsyncClient, fresh_database_url: str
) -> None:
    """A turn of a slow model may outlive the token it began with: its tool calls still act for
    the person a while (OPS_LATE_USER_TOKEN_SECONDS, 15 minutes here), beside the agent's service
    token only; the person's own calls never take an expired token, and a disabled user is
    refused whatever the token's age."""
    now = datetime.now(UTC)
    lately = user_token("oleg", ttl=timedelta(minutes=5), now=now - timedelta(minutes=15))  # 10 min over
    too_late = user_token("oleg", ttl=timedelta(minutes=5), now=now - timedelta(minutes=21))  # 16 min over
    service = {"Authorization": f"Bearer {await _service_token(ops)}"}

    async def authorize(token: str) -> httpx.Response:
        return await ops.post(
            "/api/tools/deploy_dashboard/authorize",
            json={"env_id": "dev"},
            headers={**service, "X-User-Authorization": f"Bearer {token}"},
        )

    allowed = await authorize(lately)
    assert allowed.status_code == 200, allowed.text
    assert allowed.json()["allowed"] is True
    for refused, code in [
        (await authorize(too_late), "token_expired"),
        (await ops.get("/api/auth/me", headers={"Authorization": f"Bearer {lately}"}), "token_expired"),
    ]:
        assert refused.status_code == 401, refused.text
        assert refused.json()["detail"]["code"] == code
    await _disable(fresh_database_url, "oleg")
    disabled = await authorize(lately)
    assert disabled.status_code == 401
    assert disabled.json()["detail"]["code"] == "user_inactive"


async def test_a_disabled_user_loses_access_at_once(ops: httpx.AsyncClient, fresh_database_url: str) -> None:
    token = await _user_token(ops, "oleg")
    await _disable(fresh_database_url, "oleg")
    reply = await ops.get("/api/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert reply.status_code == 401
    assert reply.json()["detail"]["code"] == "user_inactive"


async def test_sql_is_formatted_for_any_signed_in_user_without_running_it(ops: httpx.AsyncClient) -> None:
    headers = {
        "Authorization": f"Bearer {await _service_token(ops)}",
        "X-User-Authorization": f"Bearer {await _user_token(ops, 'vera')}",
    }
    reply = await ops.post("/api/sql/format", json={"sql": "select a,b from t where x=1"}, headers=headers)
    assert reply.status_code == 200
    assert reply.json() == {
        "sql": "SELECT\n  a,\n  b\nFROM t\nWHERE\n  x = 1",
        "statements": 1,
        "read_only": True,
    }
    broken = await ops.post("/api/sql/format", json={"sql": "select (("}, headers=headers)
    assert broken.status_code == 422
    assert broken.json()["detail"]["code"] == "sql_not_parsed"


async def test_environments_are_listed_without_credentials(ops: httpx.AsyncClient) -> None:
    listed = {}
    for username in ("vera", "oleg"):
        headers = {
            "Authorization": f"Bearer {await _service_token(ops)}",
            "X-User-Authorization": f"Bearer {await _user_token(ops, username)}",
        }
        reply = await ops.get("/api/environments", headers=headers)
        assert reply.status_code == 200
        listed[username] = reply.json()
    assert listed["oleg"] == [
        {"id": "dev", "name": "Development", "url": "http://127.0.0.1:8088/", "production": False},
        {"id": "prod", "name": "Production", "url": "http://superset.internal:8088/", "production": True},
    ]
    # a viewer learns where to look, not where the instances are
    assert listed["vera"] == [{**env, "url": None} for env in listed["oleg"]]
    agent_alone = await ops.get("/api/environments", headers={"Authorization": headers["Authorization"]})
    assert (agent_alone.status_code, agent_alone.json()["detail"]["code"]) == (401, "user_token_missing")
