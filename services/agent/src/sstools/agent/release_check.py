"""``sstools-agent check``: does a release answer a person end to end? What ``helm test`` runs.

From inside the release, with the agent's own settings, it does what the page and the agent do
first: a person signs in at ops (the admin the Secret names, with a password; where password
sign-in is off, ops must send a browser on to its provider), ops lists that person's
environments (at least one), and the router service itself (never the agent's in-process
fallback) routes a question to the tool that answers it, with its embedding tier up. Each step
prints one line; the exit status is 0 only when none failed.
"""

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import grpc
import httpx
from opentelemetry.sdk.trace import TracerProvider

from sstools.agent.clients.ops import OpsCall, OpsClient, OpsError
from sstools.agent.clients.router import ToolRouter
from sstools.agent.settings import AgentSettings
from sstools.common.catalogue import ENDPOINTS
from sstools.common.grpc_auth import ServiceTokenUnavailable

# The variable the password comes from: never an argument, which `ps` would show.
PASSWORD_VARIABLE = "AGENT_CHECK_PASSWORD"
# Where ops starts a single sign-on (sstools.ops.api.routes.single_sign_on.START_PATH).
SSO_START_PATH = "/api/auth/oidc/start"
# A question each tier of the router sends to one tool, in both languages of the chat.
QUESTIONS = {"покажи дашборды продаж": "search_dashboards", "list the environments": "list_environments"}
CALL_TIMEOUT_SECONDS = 15.0


class CheckFailed(Exception):
    """A step's failure, in words a person installing the release can act on."""


class _Skipped(Exception):
    """A step that cannot be taken in this configuration, and why."""


@dataclass(frozen=True)
class Step:
    name: str
    outcome: str  # ok | failed | skipped
    detail: str

    def line(self) -> str:
        return f"{self.outcome.upper():7} {self.name}: {self.detail}"


@dataclass
class Session:
    """What one step leaves the next: the person's access token, once signed in."""

    user_token: str | None = None
    why_not: str = ""


async def _sign_in(http: httpx.AsyncClient, username: str, password: str | None, session: Session) -> str:
    methods = (await http.get("/api/auth/methods")).raise_for_status().json()
    if methods["password"]:
        if not password:
            session.why_not = f"no password: set {PASSWORD_VARIABLE}"
            raise CheckFailed(f"password sign-in is on, but {PASSWORD_VARIABLE} is empty")
        reply = await http.post("/api/auth/login", json={"username": username, "password": password})
        if reply.status_code != 200:
            session.why_not = f"{username} could not sign in"
            raise CheckFailed(f"{username} was refused ({reply.status_code}): {_code(reply)}")
        session.user_token = str(reply.json()["access_token"])
        me = await http.get("/api/auth/me", headers={"Authorization": f"Bearer {session.user_token}"})
        return f"{username}, role {me.raise_for_status().json()['role']}, with a password"
    session.why_not = "password sign-in is off: a person signs in through the provider, in a browser"
    sso = methods.get("sso")
    if not sso:
        raise CheckFailed("ops offers no way to sign in: password sign-in is off and no provider is set")
    reply = await http.get(SSO_START_PATH, params={"return_to": "/agent"}, follow_redirects=False)
    target = reply.headers.get("location", "")
    if reply.status_code not in (302, 303) or "#sso_error=" in target or not target.startswith("http"):
        raise CheckFailed(f"ops could not send a browser on to {sso['name']}: {reply.status_code} {target}")
    host = httpx.URL(target).host
    try:  # where ops sends the browser must answer too (ops may remember an older provider's document)
        door = await http.get(target, follow_redirects=False)
    except httpx.HTTPError as error:
        raise CheckFailed(f"{sso['name']} at {host} does not answer: {type(error).__name__}") from None
    if door.status_code >= 500:
        raise CheckFailed(f"{sso['name']} at {host} answered {door.status_code}")
    return f"ops sends a browser on to {sso['name']}, which answers ({host})"


async def _environments(ops: OpsClient, session: Session) -> str:
    if session.user_token is None:
        raise _Skipped(f"no person is signed in ({session.why_not})")
    endpoint = ENDPOINTS["list_environments"]
    listed = await ops.call(OpsCall(endpoint.method, endpoint.path), session.user_token)
    if not listed:
        raise CheckFailed("ops has no Superset: set ops.environments in your values")
    return ", ".join(f"{env['id']}{' (production)' if env.get('production') else ''}" for env in listed)


async def _route(router: ToolRouter) -> str:
    answers = []
    for question, tool in QUESTIONS.items():
        routing = await router.ask(question, None, None)
        if routing.degraded:
            raise CheckFailed("the router routes by keywords alone: its embedding model is not loaded")
        if tool not in routing.tools[:3]:
            raise CheckFailed(f"{question!r} went to {routing.tools[:3]}, not to {tool}")
        answers.append(f"{question!r} → {tool} ({routing.tier})")
    return "; ".join(answers)


async def _step(name: str, run: Callable[[], Awaitable[str]]) -> Step:
    try:
        return Step(name, "ok", await asyncio.wait_for(run(), CALL_TIMEOUT_SECONDS * 2))
    except _Skipped as skipped:
        return Step(name, "skipped", str(skipped))
    except CheckFailed as failed:
        return Step(name, "failed", str(failed))
    except OpsError as error:
        return Step(name, "failed", f"ops answered {error.status}: {error.code}")
    except grpc.aio.AioRpcError as error:
        return Step(name, "failed", f"the router answered {error.code().name}: {error.details()}")
    except ServiceTokenUnavailable as error:
        return Step(name, "failed", f"ops gave the agent no service token: {error}")
    except (httpx.HTTPError, TimeoutError, OSError) as error:
        return Step(name, "failed", f"{type(error).__name__}: {error}")


async def check(settings: AgentSettings, username: str, password: str | None) -> list[Step]:
    """Every step, in order, each with its outcome."""
    tracing = TracerProvider()  # spans go nowhere: the check's lines are its record
    session = Session()
    ops = OpsClient(
        settings.ops_url,
        settings.ops_client_id,
        settings.ops_client_secret.get_secret_value(),
        timeout=CALL_TIMEOUT_SECONDS,
        tracer_provider=tracing,
    )
    router = ToolRouter(settings.router_target, CALL_TIMEOUT_SECONDS, tracing, ops)
    try:
        async with httpx.AsyncClient(base_url=settings.ops_url, timeout=CALL_TIMEOUT_SECONDS) as http:
            return [
                await _step("sign in", lambda: _sign_in(http, username, password, session)),
                await _step("list environments", lambda: _environments(ops, session)),
                await _step("route a question", lambda: _route(router)),
            ]
    finally:
        await router.close()
        await ops.aclose()


def _code(reply: httpx.Response) -> str:
    try:
        detail = reply.json().get("detail", {})
    except ValueError:
        return reply.text[:200]
    return str(detail.get("code", detail)) if isinstance(detail, dict) else str(detail)[:200]


def main(settings: AgentSettings, username: str) -> int:
    steps = asyncio.run(check(settings, username, os.environ.get(PASSWORD_VARIABLE) or None))
    for step in steps:
        print(step.line(), flush=True)
    return 1 if any(step.outcome == "failed" for step in steps) else 0
