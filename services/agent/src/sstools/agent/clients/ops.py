"""Calls to ops on a user's behalf: the agent's service token authenticates the agent, the
user's own token authorises the operation, the gate's key for the call is the Idempotency-Key."""

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import httpx
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.confirmation import HEADER as CONFIRMATION_HEADER
from sstools.common.confirmation import request_fingerprint
from sstools.common.grpc_auth import ServiceTokenUnavailable
from sstools.common.outline import OUTLINE, EnvOutline
from sstools.common.tool_args import (
    DASHBOARD_TITLES,
    SQL_SHAPE,
    TITLES_AT_ONCE,
    DashboardTitlesArgs,
    EnvArgs,
    SqlArgs,
    SqlStatementArgs,
)
from sstools.common.tracing import instrument_httpx

# Environments are ops' configuration: they change with a restart of ops, not within a turn.
ENVIRONMENTS_CACHE_SECONDS = 30.0


class OpsError(Exception):
    """Ops refused or failed; ``detail`` is its typed body (``code``, ``message``, ...)."""

    def __init__(self, status: int, detail: dict[str, Any]) -> None:
        super().__init__(f"{status} {detail.get('code', '')}: {detail.get('message', '')}")
        self.status = status
        self.detail = detail

    @property
    def code(self) -> str:
        return str(self.detail.get("code", "ops_error"))


@dataclass(frozen=True)
class OpsCall:
    method: str
    path: str
    params: dict[str, Any] | None = None
    body: Any = None


class OpsClient:
    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
        *,
        timeout: float,
        tracer_provider: TracerProvider,
    ) -> None:
        self._http = httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeout)
        instrument_httpx(self._http, tracer_provider)
        self._client_id = client_id
        self._client_secret = client_secret
        self._token: str | None = None
        self._token_expires = 0.0
        self._lock = asyncio.Lock()
        self._environments: tuple[dict[str, bool], float] | None = None

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _service_token(self) -> str:
        async with self._lock:
            if self._token is None or time.monotonic() > self._token_expires:
                try:
                    reply = await self._http.post(
                        "/api/auth/service-token",
                        json={"client_id": self._client_id, "client_secret": self._client_secret},
                    )
                except httpx.HTTPError as error:
                    raise _unreachable(error) from None
                if reply.status_code != 200:
                    raise OpsError(reply.status_code, _detail(reply))
                body = reply.json()
                self._token = str(body["access_token"])
                self._token_expires = time.monotonic() + max(int(body["expires_in"]) - 30, 10)
            return self._token

    async def service_token(self) -> str:
        """The agent's service token, for its gRPC peers too (a ``ServiceTokenSource``: the one
        place the agent holds it, renewed before it expires)."""
        try:
            return await self._service_token()
        except OpsError as problem:
            raise ServiceTokenUnavailable(str(problem)) from None

    def forget_service_token(self, token: str) -> None:
        """A peer refused ``token``: the next call asks ops for a fresh one (unless another
        call has already replaced it)."""
        if self._token == token:
            self._token = None

    async def _as_user(self, method: str, path: str, user_token: str) -> Any:
        """A call of the user's own (no service identity): who they are, what they may pick."""
        try:
            reply = await self._http.request(method, path, headers={"Authorization": f"Bearer {user_token}"})
        except httpx.HTTPError as error:
            raise _unreachable(error) from None
        if reply.status_code != 200:
            raise OpsError(reply.status_code, _detail(reply))
        return reply.json()

    async def environments(self, user_token: str) -> dict[str, bool]:
        """The environments ops has configured: each id, and whether it is production."""
        now = time.monotonic()
        if self._environments is None or self._environments[1] < now:
            choices = await self._as_user("GET", "/api/auth/environments", user_token)
            self._environments = (
                {str(item["id"]): item["production"] is True for item in choices},
                now + ENVIRONMENTS_CACHE_SECONDS,
            )
        return self._environments[0]

    def fingerprint(self, call: OpsCall) -> str:
        """The fingerprint of the request :meth:`call` sends for this call, which a confirmation
        of it is signed for."""
        request = self._http.build_request(call.method, call.path, params=call.params, json=call.body)
        return request_fingerprint(request.method, request.url.raw_path, request.content)

    async def sql_read_only(self, user_token: str, args: SqlArgs) -> bool:
        """Whether ops, parsing it in the target database's own dialect, reads the statement as
        one query that changes nothing."""
        statement = SqlStatementArgs(
            env_id=args.env_id, database_id=args.database_id, sql=args.sql, schema_name=args.schema_name
        )
        path, _, body = SQL_SHAPE.request(statement)
        shape = await self.call(OpsCall(SQL_SHAPE.method, path, body=body), user_token)
        return shape.get("read_only") is True

    async def dashboard_titles(
        self, user_token: str, env_id: str, dashboard_ids: list[int]
    ) -> dict[int, str]:
        """The titles ops finds for these dashboards of ``env_id``; one it does not find, or any
        failure to ask, leaves it unnamed (the card then shows its id alone)."""
        named = DashboardTitlesArgs(env_id=env_id, dashboard_ids=dashboard_ids[:TITLES_AT_ONCE])
        path, params, _ = DASHBOARD_TITLES.request(named)
        try:
            found = await self.call(OpsCall(DASHBOARD_TITLES.method, path, params=params), user_token)
        except OpsError:
            return {}
        return {int(key): str(title) for key, title in found.get("titles", {}).items()}

    async def outline(self, user_token: str, env_id: str) -> EnvOutline:
        """The environment's databases, tables, columns and few values as the person sees them
        (one of their heavy reads)."""
        path, _, _ = OUTLINE.request(EnvArgs(env_id=env_id))
        return EnvOutline.model_validate(await self.call(OpsCall(OUTLINE.method, path), user_token))

    async def call(
        self,
        call: OpsCall,
        user_token: str,
        idempotency_key: str | None = None,
        confirmation: str | None = None,
    ) -> Any:
        for attempt in (1, 2):
            service_token = await self._service_token()
            headers = {
                "Authorization": f"Bearer {service_token}",
                "X-User-Authorization": f"Bearer {user_token}",
            }
            if idempotency_key and call.method != "GET":
                headers["Idempotency-Key"] = idempotency_key
            if confirmation:
                headers[CONFIRMATION_HEADER] = confirmation
            try:
                reply = await self._http.request(
                    call.method, call.path, params=call.params, json=call.body, headers=headers
                )
            except httpx.HTTPError as error:
                raise _unreachable(error) from None
            detail = _detail(reply) if reply.status_code >= 400 else {}
            if reply.status_code == 401 and attempt == 1:
                self.forget_service_token(service_token)  # maybe it lapsed: a fresh one, once
                continue
            if reply.status_code >= 400:
                raise OpsError(reply.status_code, detail)
            return reply.json()
        raise AssertionError("unreachable")


def _unreachable(error: httpx.HTTPError) -> OpsError:
    return OpsError(503, {"code": "ops_unavailable", "message": repr(error)[:300]})


def _detail(reply: httpx.Response) -> dict[str, Any]:
    try:
        body = reply.json()
    except ValueError:
        return {"code": "ops_error", "message": reply.text[:300]}
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, dict):
        return detail
    return {
        "code": "invalid_request" if reply.status_code == 422 else "ops_error",
        "message": str(detail)[:500],
    }
