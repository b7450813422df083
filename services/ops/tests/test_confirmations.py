"""Ops runs a call that changes something only with the person's confirmation of exactly that
call: signed by the agent's gate for this user, this tool, this Idempotency-Key and this very
request. And an environment configured ``production: true`` is prod, whatever its id."""

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.confirmation import AUDIENCE, HEADER, Confirmation, ConfirmationCodec, request_fingerprint
from sstools.common.tokens import JwtCodec, TokenType
from sstools.devstack.demo import PASSWORD_ENV, environments, with_production_alias
from sstools.devstack.superset import Instance

from .conftest import CONFIRMATION_SECRET, OpsApi, running_ops

PATH = "/api/envs/dev/dashboards"


def _confirmed(
    ops: OpsApi,
    body: dict[str, Any],
    *,
    username: str = "oleg",
    key: str | None = None,
    tool: str = "superset_create_dashboard",
    signed_body: dict[str, Any] | None = None,
    signed_user: str | None = None,
    signed_key: str | None = None,
    codec: ConfirmationCodec | None = None,
) -> httpx.Request:
    """The create-dashboard request as the agent sends it, with a confirmation that says what
    the arguments say (by default: exactly this request)."""
    key = key or uuid.uuid4().hex
    request = ops.http.build_request(
        "POST", PATH, json=body, headers=ops.headers(username, **{"Idempotency-Key": key})
    )
    signed = ops.http.build_request("POST", PATH, json=signed_body or body)
    fingerprint = request_fingerprint("POST", signed.url.raw_path, signed.content)
    confirmation = Confirmation(signed_user or username, tool, signed_key or key, fingerprint)
    request.headers[HEADER] = (codec or ConfirmationCodec(CONFIRMATION_SECRET)).sign(confirmation)
    return request


async def _titled(ops: OpsApi, title: str) -> int:
    """How many dashboards so titled dev has: a new one is a draft, which Superset shows to its
    owners and admins (oleg, who creates them here, is both), not to every reader."""
    reply = await ops.http.get(
        "/api/envs/dev/dashboards", params={"query": title}, headers=ops.headers("oleg")
    )
    assert reply.status_code == 200, reply.text
    return len(reply.json()["dashboards"])


def _expired(username: str, key: str, fingerprint: str) -> str:
    claims = {"tool": "superset_create_dashboard", "call": key, "req": fingerprint}
    return JwtCodec(CONFIRMATION_SECRET).issue(
        username,
        token_type=TokenType.CONFIRMATION,
        audience=AUDIENCE,
        ttl=timedelta(seconds=120),
        claims=claims,
        now=datetime.now(UTC) - timedelta(minutes=5),
    )


async def test_a_change_without_a_confirmation_is_refused(ops: OpsApi) -> None:
    title = f"Unconfirmed {uuid.uuid4().hex[:8]}"
    headers = ops.headers("oleg", **{HEADER: "", "Idempotency-Key": uuid.uuid4().hex})
    reply = await ops.http.post(PATH, json={"title": title}, headers=headers)
    assert reply.status_code == 409, reply.text
    assert reply.json()["detail"]["code"] == "confirmation_required"
    assert await _titled(ops, title) == 0


async def test_a_confirmation_of_anything_else_is_refused(ops: OpsApi) -> None:
    title = f"Misdirected {uuid.uuid4().hex[:8]}"
    body = {"title": title}
    other_secret = ConfirmationCodec("another-secret-the-services-do-not-trust-" + "x" * 8)
    wrong = {
        "another body": _confirmed(ops, body, signed_body={"title": "what the person saw"}),
        "another user": _confirmed(ops, body, signed_user="anna"),
        "another tool": _confirmed(ops, body, tool="superset_copy_dashboard"),
        "another call": _confirmed(ops, body, signed_key="another-call-id"),
        "an untrusted key": _confirmed(ops, body, codec=other_secret),
    }
    for case, request in wrong.items():
        reply = await ops.http.send(request)
        assert reply.status_code == 403, f"{case}: {reply.text}"
        assert reply.json()["detail"]["code"] == "confirmation_invalid", case
    stale = _confirmed(ops, body)
    raw_path = stale.url.raw_path
    key = stale.headers["Idempotency-Key"]
    stale.headers[HEADER] = _expired("oleg", key, request_fingerprint("POST", raw_path, stale.content))
    not_a_confirmation = _confirmed(ops, body)
    not_a_confirmation.headers[HEADER] = ops.user_tokens["oleg"]  # a token of another kind
    for case, request in {"expired": stale, "a user token": not_a_confirmation}.items():
        reply = await ops.http.send(request)
        assert reply.status_code == 403, f"{case}: {reply.text}"
        assert reply.json()["detail"]["code"] == "confirmation_invalid", case
    assert await _titled(ops, title) == 0


async def test_the_confirmed_call_runs_once_however_often_it_is_sent(ops: OpsApi) -> None:
    title = f"Confirmed {uuid.uuid4().hex[:8]}"
    request = _confirmed(ops, {"title": title})
    first = await ops.http.send(request)
    assert first.status_code == 201, first.text
    again = await ops.http.send(_copy(request))
    assert (again.status_code, again.json()) == (201, first.json())
    assert await _titled(ops, title) == 1


def _copy(request: httpx.Request) -> httpx.Request:
    return httpx.Request(request.method, request.url, headers=request.headers, content=request.content)


@pytest.fixture
async def live_ops(
    supersets: dict[str, Instance], fresh_database_url: str, tracer_provider: TracerProvider, tmp_path: Path
) -> AsyncIterator[OpsApi]:
    """ops with a third environment, ``live``: dev's Superset, configured as production."""
    listed = with_production_alias(environments(supersets, PASSWORD_ENV))
    async with running_ops(fresh_database_url, tracer_provider, listed, tmp_path) as api:
        yield api


async def test_an_environment_configured_as_production_is_prod(live_ops: OpsApi) -> None:
    listed = await live_ops.http.get(
        "/api/auth/environments", headers={"Authorization": f"Bearer {live_ops.user_tokens['oleg']}"}
    )
    assert {env["id"]: env["production"] for env in listed.json()} == {
        "dev": False,
        "prod": True,
        "live": True,
    }
    authorized = await live_ops.http.post(
        "/api/tools/deploy_dashboard/authorize", json={"env_id": "live"}, headers=live_ops.headers("oleg")
    )
    assert authorized.status_code == 200, authorized.text
    assert {key: authorized.json()[key] for key in ("allowed", "env", "tier", "required_role")} == {
        "allowed": False,
        "env": "prod",
        "tier": "dangerous",
        "required_role": "admin",
    }
    deploy = {"dashboard_id": 1, "source_env": "dev"}
    refused = await live_ops.http.post(
        "/api/envs/live/deployments", json=deploy, headers=live_ops.headers("oleg")
    )
    assert refused.status_code == 403, refused.text
    assert (refused.json()["detail"]["env"], refused.json()["detail"]["required_role"]) == ("prod", "admin")
    # the same operator may deploy to dev, which is not production
    allowed = await live_ops.http.post(
        "/api/tools/deploy_dashboard/authorize", json={"env_id": "dev"}, headers=live_ops.headers("oleg")
    )
    assert allowed.json()["allowed"] is True
