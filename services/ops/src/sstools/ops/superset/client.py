"""An async client for one Superset environment's REST API, acting as a person or as ops' service
account.

A person's call carries a token ops signs for them and this environment alone, for a minute,
which the hook ops gives Superset (``services/ops/superset/sstools_person_config.py``) accepts
as that user, so Superset's own roles, dataset access and row-level security decide what they
see and change, and Superset's log names them. The service account, kept for what must not
depend on one person's view (whole-environment backups), signs in with its password at
``/api/v1/security/login``. Writes also need a CSRF token bound to a session cookie: each
identity keeps its own (the connection pool, shared, keeps no cookies), so one person's Superset
session never travels with another's calls. Reads are retried on transport failures and gateway errors;
writes only when the request provably never left (a refused connection). Everything that goes
wrong becomes a :class:`SupersetError` naming the environment: Superset answers many failures
with an HTML 500 page, which must not reach the caller as such.
"""

import asyncio
import copy
import json
import logging
import re
import time
from collections.abc import Callable
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpx
import prison
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from sstools.common.tracing import instrument_httpx
from sstools.ops.environments import Environment, EnvironmentConfigError
from sstools.ops.errors import OperationError
from sstools.ops.telemetry import Outcome, SupersetMetrics

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


class SupersetForbidden(SupersetError):
    """Superset does not let the person do this: its own permissions decide."""

    status = 403
    code = "superset_forbidden"


class SupersetAuthFailed(SupersetError):
    """Ops' own credentials for this environment were refused: an operator must fix them."""

    status = 502
    code = "superset_auth_failed"


class SupersetPersonRefused(SupersetError):
    """Superset would not take ops' token for the person: it has no active user by that name, or
    its hook does not trust ops' keys."""

    status = 403
    code = "superset_person_refused"


# What Superset's hook recognises a person's token by: FAB reads a Bearer token with a prefix it
# is configured with (FAB_API_KEY_PREFIXES) as an API key, before its own JWT check.
PERSON_TOKEN_PREFIX = "sstools-person."


class _NoCookies(DefaultCookiePolicy):
    """The connection pool every identity of an environment shares keeps no cookie."""

    def set_ok(self, cookie: Any, request: Any) -> bool:
        return False


class Credentials:
    """Who a client's calls run as: the bearer token each carries, and the CSRF token writes need
    with the session cookie it is bound to (this identity's own)."""

    person: str | None = None

    def __init__(self) -> None:
        self.csrf: str | None = None
        self.cookies = httpx.Cookies()
        self.lock = asyncio.Lock()

    def cookie_header(self) -> dict[str, str]:
        pairs = "; ".join(f"{cookie.name}={cookie.value}" for cookie in self.cookies.jar)
        return {"Cookie": pairs} if pairs else {}

    async def bearer(self, client: "SupersetClient") -> str:
        raise NotImplementedError

    def refused(self) -> bool:
        """Superset answered 401: forget what a renewal can replace; False if none can."""
        raise NotImplementedError


class ServiceAccount(Credentials):
    """The environment's configured account, signed in with its password; its JWT is kept until
    Superset refuses it."""

    def __init__(self) -> None:
        super().__init__()
        self.token: str | None = None

    async def bearer(self, client: "SupersetClient") -> str:
        if self.token is None:
            self.token = await client.sign_in()
            self.csrf = None
        return self.token

    def refused(self) -> bool:
        self.token = None
        return True


class Person(Credentials):
    """A person: each call carries a fresh token ``mint`` signs for them and this environment."""

    def __init__(self, username: str, mint: Callable[[], str]) -> None:
        super().__init__()
        self.person = username
        self._mint = mint

    async def bearer(self, client: "SupersetClient") -> str:
        return PERSON_TOKEN_PREFIX + self._mint()

    def refused(self) -> bool:
        return False  # a new token for the same person would be refused alike


class _Transient(Exception):
    """A failure worth another attempt; ``unsent`` when the request never reached Superset."""

    def __init__(self, error: SupersetError, unsent: bool) -> None:
        self.error = error
        self.unsent = unsent


def rison(value: Any) -> str:
    """Superset's ``q=`` parameter: the value encoded as Rison."""
    return str(prison.dumps(value))


def _token_refused(response: httpx.Response) -> bool:
    """Superset refused the bearer token itself: 401, or the 422 its JWT reader (flask-jwt-extended,
    ``{"msg": ...}``) answers a token it cannot read, as where the hook is not installed."""
    if response.status_code == 401:
        return True
    if response.status_code != 422 or "json" not in response.headers.get("content-type", ""):
        return False
    try:
        payload = response.json()
    except ValueError:
        return False
    return isinstance(payload, dict) and set(payload) == {"msg"}


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
            if isinstance(payload.get("msg"), str):  # flask-jwt-extended's refusals
                return str(payload["msg"])
    title = _TITLE.search(response.text)
    if title:
        return " ".join(title.group(1).split())
    return f"HTTP {response.status_code}"


class SupersetClient:
    """The environment's service account; :meth:`as_person` gives the same connection pool
    acting as a person."""

    def __init__(
        self,
        environment: Environment,
        *,
        timeout: float = 30.0,
        read_retries: int = 2,
        backoff: float = 0.25,
        tracer_provider: TracerProvider | None = None,
        metrics: SupersetMetrics | None = None,
    ) -> None:
        self.environment = environment
        # the service's registry; a client made without one (a script, a test) counts on its own
        self._metrics = metrics if metrics is not None else SupersetMetrics(CollectorRegistry())
        self._read_retries = read_retries
        self._backoff = backoff
        self._http = httpx.AsyncClient(
            base_url=str(environment.url).rstrip("/"),
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            follow_redirects=False,
            cookies=CookieJar(policy=_NoCookies()),
        )
        if tracer_provider is not None:  # each Superset call a client span of the operation's trace
            instrument_httpx(self._http, tracer_provider)
        self._credentials: Credentials = ServiceAccount()

    def as_person(self, username: str, mint: Callable[[], str]) -> "SupersetClient":
        """This environment's client acting as ``username``, each call with a token from ``mint``."""
        person = copy.copy(self)  # the same pool and settings; credentials of its own
        person._credentials = Person(username, mint)
        return person

    @property
    def env_id(self) -> str:
        return self.environment.id

    @property
    def person(self) -> str | None:
        """Whom the calls run as; None for the service account."""
        return self._credentials.person

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
            response = await self._request("GET", "/health", timeout=3.0)
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
        credentials = self._credentials
        for renewal in (False, True):
            headers = await self._headers(writing=writing)
            try:
                response = await self._send(method, path, headers=headers, **call)
            except httpx.ConnectError as error:
                raise _Transient(SupersetUnavailable(self.env_id, f"cannot connect: {error}"), True) from None
            except httpx.TimeoutException:
                raise _Transient(
                    SupersetUnavailable(self.env_id, f"{method} {path} timed out"), False
                ) from None
            except httpx.TransportError as error:
                unavailable = SupersetUnavailable(self.env_id, f"connection failed: {error!r}")
                raise _Transient(unavailable, False) from None
            if response.status_code == 401 and not renewal and credentials.refused():
                continue
            if self.person is not None and _token_refused(response):
                raise self._person_refused(response)
            if response.status_code == 400 and writing and not renewal and "CSRF" in response.text:
                credentials.csrf = None
                continue
            if response.status_code < 400:
                return response
            failure = self._failure(method, path, response)
            if response.status_code in _GATEWAY:
                raise _Transient(failure, False)
            raise failure
        raise AssertionError("unreachable: the renewal loop returns or raises")

    def _person_refused(self, response: httpx.Response) -> SupersetPersonRefused:
        return SupersetPersonRefused(
            self.env_id,
            f"Superset {self.env_id} does not take ops' word that this is {self.person}: it has no "
            "active user by that name, or its sstools hook is missing or does not trust ops' keys "
            f"({_message(response)})",
            response.status_code,
        )

    def _failure(self, method: str, path: str, response: httpx.Response) -> SupersetError:
        message = _message(response)
        status = response.status_code
        if status in _GATEWAY:
            return SupersetUnavailable(self.env_id, f"{method} {path}: {message}", status)
        if status == 404:
            return SupersetNotFound(self.env_id, message, status)
        if status == 403:
            who = self.person or "ops' service account"
            return SupersetForbidden(self.env_id, f"Superset does not let {who} do this: {message}", status)
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
        credentials = self._credentials
        async with credentials.lock:
            token = await credentials.bearer(self)
            if writing and credentials.csrf is None:
                credentials.csrf = await self._csrf_token(token)
        headers = {"Authorization": f"Bearer {token}"}
        if writing:
            assert credentials.csrf is not None
            headers["X-CSRFToken"] = credentials.csrf
            headers["Referer"] = str(self._http.base_url)
        return headers

    async def sign_in(self) -> str:
        """The service account's JWT, from its password."""
        try:
            password = self.environment.password()
        except (EnvironmentConfigError, OSError) as error:
            raise SupersetAuthFailed(self.env_id, f"no password for Superset: {error}") from None
        body = {"username": self.environment.username, "password": password, "provider": "db"}
        response = await self._reach("POST", "/api/v1/security/login", json=body)
        if response.status_code in (400, 401):
            raise SupersetAuthFailed(self.env_id, f"Superset refused the sign-in: {_message(response)}")
        if response.status_code >= 400:
            raise self._failure("POST", "/api/v1/security/login", response)
        return str(self._json(response)["access_token"])

    async def _csrf_token(self, token: str) -> str:
        headers = {"Authorization": f"Bearer {token}"}
        response = await self._reach("GET", "/api/v1/security/csrf_token/", headers=headers)
        if self.person is not None and _token_refused(response):
            raise self._person_refused(response)
        if response.status_code >= 400:
            raise self._failure("GET", "/api/v1/security/csrf_token/", response)
        return str(self._json(response)["result"])

    async def _send(
        self, method: str, path: str, *, headers: dict[str, str], **kwargs: Any
    ) -> httpx.Response:
        """One request with this identity's session cookie; what Superset sets is kept for it."""
        credentials = self._credentials
        response = await self._request(method, path, headers=headers | credentials.cookie_header(), **kwargs)
        credentials.cookies.extract_cookies(response)
        return response

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The one way out to Superset: every request, timed by outcome for its environment."""
        started = time.perf_counter()
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.TransportError:  # refused, timed out, cut off: no answer
            self._metrics.observe(self.env_id, "unreachable", time.perf_counter() - started)
            raise
        outcome: Outcome = "ok" if response.status_code < 500 else "http_error"
        self._metrics.observe(self.env_id, outcome, time.perf_counter() - started)
        return response

    async def _reach(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._send(method, path, headers=kwargs.pop("headers", {}), **kwargs)
        except httpx.HTTPError as error:
            raise SupersetUnavailable(self.env_id, f"cannot reach Superset: {error!r}") from None
