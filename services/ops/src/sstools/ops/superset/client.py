"""An async client for one Superset environment's REST API.

Superset wants a JWT from ``/api/v1/security/login`` on every call, and on writes also a CSRF
token bound to the session cookie. Reads are retried on transport failures and gateway errors;
writes only when the request provably never left (a refused connection). Everything that goes
wrong becomes a :class:`SupersetError` naming the environment: Superset answers many failures
with an HTML 500 page, which must not reach the caller as such.
"""

import asyncio
import json
import logging
import re
from typing import Any

import httpx
import prison
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.tracing import instrument_httpx
from sstools.ops.environments import Environment, EnvironmentConfigError
from sstools.ops.errors import OperationError

_log = logging.getLogger(__name__)
_TITLE = re.compile(r"<title>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_GATEWAY = {502, 503, 504}


class SupersetError(OperationError):
    """A Superset call failed; ``status`` is what ops answers with, ``code`` says why."""

    status = 502
    code = "superset_error"

    def __init__(self, env_id: str, message: str, upstream_status: int | None = None) -> None:
        super().__init__(message, env_id=env_id)
        self.env_id = env_id
        self.upstream_status = upstream_status


class SupersetUnavailable(SupersetError):
    """Superset cannot be reached, timed out, or its gateway says it is down."""

    status = 503
    code = "superset_unavailable"


class SupersetNotFound(SupersetError):
    status = 404
    code = "superset_not_found"


class SupersetRejected(SupersetError):
    """Superset refused the request as given (its 4xx other than 404)."""

    status = 422
    code = "superset_rejected"


class SupersetAuthFailed(SupersetError):
    """Ops' own credentials for this environment were refused: an operator must fix them."""

    status = 502
    code = "superset_auth_failed"


class _Transient(Exception):
    """A failure worth another attempt; ``unsent`` when the request never reached Superset."""

    def __init__(self, error: SupersetError, unsent: bool) -> None:
        self.error = error
        self.unsent = unsent


def rison(value: Any) -> str:
    """Superset's ``q=`` parameter: the value encoded as Rison."""
    return str(prison.dumps(value))


def _message(response: httpx.Response) -> str:
    if "json" in response.headers.get("content-type", ""):
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if isinstance(payload, dict):
            if "message" in payload:
                message = payload["message"]
                return message if isinstance(message, str) else json.dumps(message, ensure_ascii=False)
            errors = payload.get("errors")
            if isinstance(errors, list) and errors:
                return "; ".join(str(error.get("message", error)) for error in errors if error)
    title = _TITLE.search(response.text)
    if title:
        return " ".join(title.group(1).split())
    return f"HTTP {response.status_code}"


class SupersetClient:
    def __init__(
        self,
        environment: Environment,
        *,
        timeout: float = 30.0,
        read_retries: int = 2,
        backoff: float = 0.25,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.environment = environment
        self._read_retries = read_retries
        self._backoff = backoff
        self._http = httpx.AsyncClient(
            base_url=str(environment.url).rstrip("/"),
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            follow_redirects=False,
        )
        if tracer_provider is not None:  # each Superset call a client span of the operation's trace
            instrument_httpx(self._http, tracer_provider)
        self._token: str | None = None
        self._csrf: str | None = None
        self._login_lock = asyncio.Lock()

    @property
    def env_id(self) -> str:
        return self.environment.id

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- the calls operations make -------------------------------------------------------------

    async def get(self, path: str, *, q: Any = None, params: dict[str, Any] | None = None) -> Any:
        response = await self.request("GET", path, q=q, params=params)
        return self._json(response)

    async def get_bytes(self, path: str, *, q: Any = None) -> bytes:
        return (await self.request("GET", path, q=q)).content

    async def post(self, path: str, json_body: Any = None, **kwargs: Any) -> Any:
        return self._json(await self.request("POST", path, json_body=json_body, **kwargs))

    async def put(self, path: str, json_body: Any) -> Any:
        return self._json(await self.request("PUT", path, json_body=json_body))

    async def delete(self, path: str) -> Any:
        return self._json(await self.request("DELETE", path))

    async def health(self) -> bool:
        """Superset's own liveness page, without signing in."""
        try:
            response = await self._http.get("/health", timeout=3.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    # -- the machinery -------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        q: Any = None,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        files: dict[str, Any] | None = None,
        data: dict[str, Any] | None = None,
        timeout_seconds: float | None = None,
    ) -> httpx.Response:
        query = dict(params or {})
        if q is not None:
            query["q"] = rison(q)
        reading = method == "GET"
        call: dict[str, Any] = {"params": query, "json": json_body, "files": files, "data": data}
        if timeout_seconds is not None:
            call["timeout"] = httpx.Timeout(timeout_seconds, connect=min(timeout_seconds, 5.0))
        attempt = 1
        while True:
            try:
                return await self._once(method, path, call, writing=not reading)
            except _Transient as transient:
                if attempt > self._read_retries or not (reading or transient.unsent):
                    raise transient.error from None
            await asyncio.sleep(self._backoff * 2 ** (attempt - 1))
            attempt += 1

    async def _once(self, method: str, path: str, call: dict[str, Any], *, writing: bool) -> httpx.Response:
        """One call, signing in again once if the token expired or the CSRF session rotated."""
        for renewal in (False, True):
            headers = await self._headers(writing=writing)
            try:
                response = await self._http.request(method, path, headers=headers, **call)
            except httpx.ConnectError as error:
                raise _Transient(SupersetUnavailable(self.env_id, f"cannot connect: {error}"), True) from None
            except httpx.TimeoutException:
                raise _Transient(
                    SupersetUnavailable(self.env_id, f"{method} {path} timed out"), False
                ) from None
            except httpx.TransportError as error:
                unavailable = SupersetUnavailable(self.env_id, f"connection failed: {error!r}")
                raise _Transient(unavailable, False) from None
            if response.status_code == 401 and not renewal:
                self._token = None
                continue
            if response.status_code == 400 and writing and not renewal and "CSRF" in response.text:
                self._csrf = None
                continue
            if response.status_code < 400:
                return response
            failure = self._failure(method, path, response)
            if response.status_code in _GATEWAY:
                raise _Transient(failure, False)
            raise failure
        raise AssertionError("unreachable: the renewal loop returns or raises")

    def _failure(self, method: str, path: str, response: httpx.Response) -> SupersetError:
        message = _message(response)
        status = response.status_code
        if status in _GATEWAY:
            return SupersetUnavailable(self.env_id, f"{method} {path}: {message}", status)
        if status == 404:
            return SupersetNotFound(self.env_id, message, status)
        if 400 <= status < 500:
            return SupersetRejected(self.env_id, message, status)
        # Superset's 500s are HTML pages; the caller gets their title, the log keeps the start.
        _log.warning(
            "superset error",
            extra={"env_id": self.env_id, "path": path, "status": status, "body": response.text[:2000]},
        )
        return SupersetError(self.env_id, f"{method} {path} failed in Superset: {message}", status)

    def _json(self, response: httpx.Response) -> Any:
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise SupersetError(
                self.env_id, f"expected JSON, got {response.headers.get('content-type', 'nothing')}"
            ) from None

    async def _headers(self, *, writing: bool) -> dict[str, str]:
        async with self._login_lock:
            if self._token is None:
                self._token = await self._login()
                self._csrf = None
            if writing and self._csrf is None:
                self._csrf = await self._csrf_token(self._token)
        headers = {"Authorization": f"Bearer {self._token}"}
        if writing:
            assert self._csrf is not None
            headers["X-CSRFToken"] = self._csrf
            headers["Referer"] = str(self._http.base_url)
        return headers

    async def _login(self) -> str:
        try:
            password = self.environment.password()
        except (EnvironmentConfigError, OSError) as error:
            raise SupersetAuthFailed(self.env_id, f"no password for Superset: {error}") from None
        body = {"username": self.environment.username, "password": password, "provider": "db"}
        response = await self._send("POST", "/api/v1/security/login", json=body)
        if response.status_code in (400, 401):
            raise SupersetAuthFailed(self.env_id, f"Superset refused the sign-in: {_message(response)}")
        if response.status_code >= 400:
            raise self._failure("POST", "/api/v1/security/login", response)
        return str(self._json(response)["access_token"])

    async def _csrf_token(self, token: str) -> str:
        headers = {"Authorization": f"Bearer {token}"}
        response = await self._send("GET", "/api/v1/security/csrf_token/", headers=headers)
        if response.status_code >= 400:
            raise self._failure("GET", "/api/v1/security/csrf_token/", response)
        return str(self._json(response)["result"])

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            raise SupersetUnavailable(self.env_id, f"cannot reach Superset: {error!r}") from None
