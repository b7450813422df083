"""Every tool endpoint × every role × prod and non-prod: allowed exactly as DESIGN.md's policy
table (written out by hand in ``sstools.devstack.policy_table``) says, through a real ops. And
every way of calling an agent endpoint without both valid identities is refused.

The environments point at a closed port, so an allowed call goes on to fail at Superset (503)
or at its own validation (422 for an empty body) — never at the guard (403)."""

import base64
import hashlib
import hmac
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jwt
import pytest
from fastapi.routing import APIRoute
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.catalogue import ENDPOINTS as TOOL_ENDPOINTS
from sstools.common.db import create_engine
from sstools.common.tokens import SERVICE_AUDIENCE, USER_AUDIENCE, TokenType
from sstools.devstack.keys import ISSUER, PUBLIC_KEYS, forged_token, user_token
from sstools.devstack.policy_table import POLICY_TABLE, allowed
from sstools.devstack.testing import free_port
from sstools.ops.api.app import build_app
from sstools.ops.main import build_context

from .conftest import USERS, OpsApi, ops_settings, running_ops

CLOSED = f"http://127.0.0.1:{free_port()}"
ENVIRONMENTS = [
    {"id": "dev", "name": "Development", "url": CLOSED, "password_env": "RBAC_MATRIX_SUPERSET_PASSWORD"},
    {"id": "prod", "name": "Production", "url": CLOSED, "password_env": "RBAC_MATRIX_SUPERSET_PASSWORD"},
]


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    tool: str
    body: Any = None  # the model of its JSON body or its query string, if it takes one

    def url(self, env_id: str) -> str:
        return (
            self.path.replace("{env_id}", env_id)
            .replace("{dashboard_id}", "1")
            .replace("{task_id}", str(uuid.uuid4()))
        )

    @property
    def env_scoped(self) -> bool:
        return "{env_id}" in self.path


def _endpoints() -> list[Endpoint]:
    """The tool endpoints, read from the application itself: every route guarded by a tool."""
    settings = ops_settings(
        "postgresql://postgres@127.0.0.1:5432/sstools", environments=json.dumps(ENVIRONMENTS)
    )
    engine = create_engine(settings.database_url)
    app = build_app(build_context(settings, engine, TracerProvider()))
    found = []
    # FastAPI 0.16x mounts an included router lazily; its routes are on the original router.
    routes = [inner for route in app.routes for inner in getattr(route, "original_router", app.router).routes]
    for route in routes:
        if not isinstance(route, APIRoute):
            continue
        for dependency in route.dependant.dependencies:
            name = getattr(dependency.call, "__name__", "")
            if name.startswith("permit_"):
                models = route.dependant.body_params or route.dependant.query_params
                body = models[0].field_info.annotation if models else None
                found += [
                    Endpoint(method, route.path, name.removeprefix("permit_"), body)
                    for method in route.methods or ()
                ]
    return sorted(found, key=lambda endpoint: (endpoint.path, endpoint.method))


ENDPOINTS = _endpoints()


def test_every_tool_that_acts_through_ops_has_an_endpoint() -> None:
    guarded = {endpoint.tool for endpoint in ENDPOINTS}
    assert guarded == set(POLICY_TABLE) - {"show_capabilities"}  # the agent answers that one itself


def test_the_agent_calls_each_tool_where_ops_serves_it_with_the_same_models() -> None:
    """One declaration (``sstools.common.tool_args``) for both sides: the agent's method, path
    template and body or query model of every tool are those of the ops route guarded by that tool."""
    served = {(endpoint.tool, endpoint.method, endpoint.path): endpoint.body for endpoint in ENDPOINTS}
    for name, declared in TOOL_ENDPOINTS.items():
        key = (name, declared.method, declared.path)
        assert key in served, f"{name}: ops serves no {declared.method} {declared.path} for it"
        assert served[key] is declared.rest, (
            f"{name}: ops reads {served[key]}, the agent sends {declared.rest}"
        )


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ops-state")


@pytest.fixture
async def ops(
    fresh_database_url: str, tracer_provider: TracerProvider, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[OpsApi]:
    monkeypatch.setenv("RBAC_MATRIX_SUPERSET_PASSWORD", "unused: nothing listens there")
    async with running_ops(
        fresh_database_url, tracer_provider, ENVIRONMENTS, state_dir, superset_read_retries=0
    ) as api:
        yield api


async def _call(
    ops: OpsApi, endpoint: Endpoint, env_id: str, headers: dict[str, str], body: Any = None
) -> Any:
    if endpoint.method == "GET":
        return await ops.http.get(endpoint.url(env_id), headers=headers)
    return await ops.http.request(endpoint.method, endpoint.url(env_id), json=body or {}, headers=headers)


async def test_every_endpoint_allows_exactly_the_roles_the_policy_names(ops: OpsApi) -> None:
    checked = 0
    wrong = []
    for endpoint in ENDPOINTS:
        for env_id in ("dev", "prod") if endpoint.env_scoped else ("",):
            for username, role in USERS.items():
                reply = await _call(ops, endpoint, env_id, ops.headers(username))
                denied = reply.status_code == 403
                if denied == allowed(endpoint.tool, role, prod=env_id == "prod") or (
                    denied and reply.json()["detail"]["code"] != "permission_denied"
                ):
                    wrong.append((endpoint, env_id, role.value, reply.status_code, reply.text[:200]))
                if not denied:
                    assert reply.status_code in (200, 404, 409, 422, 503) or reply.status_code < 300, (
                        reply.text
                    )
                    assert "Traceback" not in reply.text
                checked += 1
    assert not wrong
    assert checked >= 4 * 40


def _hs256(payload: dict[str, Any], secret: str, kid: str) -> str:
    """HS256 by hand: PyJWT will not take a PEM public key as an HMAC secret; an attacker will."""
    claims = {
        key: int(value.timestamp()) if isinstance(value, datetime) else value
        for key, value in payload.items()
    }
    signed = ".".join(_segment(part) for part in ({"alg": "HS256", "kid": kid, "typ": "JWT"}, claims))
    signature = hmac.new(secret.encode(), signed.encode(), hashlib.sha256).digest()
    return f"{signed}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


def _segment(part: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()


def _unsigned(payload: dict[str, Any], kid: str) -> str:
    # what an attacker sends: no signature, under the kid of ops' real key
    return jwt.encode(payload, None, algorithm="none", headers={"kid": kid})  # type: ignore[arg-type]


async def test_calls_without_both_valid_identities_are_rejected_with_the_reason(ops: OpsApi) -> None:
    now = datetime.now(UTC)
    root = ops.user_tokens["root"]
    service = ops.service_token
    kid = jwt.get_unverified_header(root)["kid"]  # the key ops signs with, which it knows
    assert kid == jwt.get_unverified_header(service)["kid"]
    user_claims = {
        "sub": "root",
        "typ": TokenType.USER.value,
        "aud": USER_AUDIENCE,
        "iat": now,
        "exp": now + timedelta(minutes=5),
    }
    service_claims = {**user_claims, "sub": "agent", "typ": TokenType.SERVICE.value, "aud": SERVICE_AUDIENCE}
    hour_ago = now - timedelta(hours=1)
    expired_user = user_token("root", ttl=timedelta(seconds=1), now=hour_ago)  # ops' key, long over
    expired_service = ISSUER.issue(
        "agent",
        token_type=TokenType.SERVICE,
        audience=SERVICE_AUDIENCE,
        ttl=timedelta(seconds=1),
        now=hour_ago,
    )

    def forged(subject: str, **kind: Any) -> str:
        """Signed with a key of the forger's own, named by the kid of ops' key (copied from a token)."""
        return forged_token(subject, kid=kid, **kind)

    service_kind = {"token_type": TokenType.SERVICE, "audience": SERVICE_AUDIENCE}
    agent = {"Authorization": f"Bearer {service}"}  # the agent's valid identity
    other_secret = "some-other-secret-of-32-bytes-or-more!"
    attempts: dict[str, tuple[dict[str, str], str]] = {
        "user token only": ({"Authorization": f"Bearer {root}"}, "token_audience_invalid"),
        "service token only": ({"Authorization": f"Bearer {service}"}, "user_token_missing"),
        "user token as both": (
            {"Authorization": f"Bearer {root}", "X-User-Authorization": f"Bearer {root}"},
            "token_audience_invalid",
        ),
        "service token as both": (
            {**agent, "X-User-Authorization": f"Bearer {service}"},
            "token_audience_invalid",
        ),
        "user token of a key ops does not know": (
            {**agent, "X-User-Authorization": f"Bearer {forged_token('root')}"},
            "token_key_unknown",
        ),
        "user token of another key under ops' kid": (
            {**agent, "X-User-Authorization": f"Bearer {forged('root')}"},
            "token_signature_invalid",
        ),
        "service token of another key under ops' kid": (
            {
                "Authorization": f"Bearer {forged('agent', **service_kind)}",
                "X-User-Authorization": f"Bearer {root}",
            },
            "token_signature_invalid",
        ),
        "HS256 user token keyed with ops' public key": (
            {**agent, "X-User-Authorization": f"Bearer {_hs256(user_claims, PUBLIC_KEYS, kid)}"},
            "token_algorithm_rejected",
        ),
        "HS256 service token": (
            {
                "Authorization": f"Bearer {_hs256(service_claims, other_secret, kid)}",
                "X-User-Authorization": f"Bearer {root}",
            },
            "token_algorithm_rejected",
        ),
        "alg none user token": (
            {**agent, "X-User-Authorization": f"Bearer {_unsigned(user_claims, kid)}"},
            "token_algorithm_rejected",
        ),
        "alg none service token": (
            {
                "Authorization": f"Bearer {_unsigned(service_claims, kid)}",
                "X-User-Authorization": f"Bearer {root}",
            },
            "token_algorithm_rejected",
        ),
        "expired user token": ({**agent, "X-User-Authorization": f"Bearer {expired_user}"}, "token_expired"),
        "expired service token": (
            {"Authorization": f"Bearer {expired_service}", "X-User-Authorization": f"Bearer {root}"},
            "token_expired",
        ),
        "no tokens": ({}, "service_token_missing"),
        "not a bearer": (
            {"Authorization": f"Basic {service}", "X-User-Authorization": f"Bearer {root}"},
            "service_token_missing",
        ),
    }
    refused = {}
    for endpoint in ENDPOINTS:
        for name, (headers, _) in attempts.items():
            reply = await _call(ops, endpoint, "prod", headers)
            refused[endpoint.method, endpoint.path, name] = (
                reply.status_code,
                reply.json()["detail"]["code"],
            )
    assert refused == {
        (endpoint.method, endpoint.path, name): (401, code)
        for endpoint in ENDPOINTS
        for name, (_, code) in attempts.items()
    }
