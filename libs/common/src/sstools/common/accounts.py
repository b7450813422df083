"""Whether a signed-in user may still act, as ops (the authority over users) says it now.

A verified token proves who signed in, not that they still may: a disabled user's access token
verifies until it expires. So the agent and convo ask ops (``GET /api/auth/me``, with the user's
own token) and remember a yes for ``fresh_seconds`` per user: at most that long after being
disabled, a user is refused everywhere. A no is never remembered (a user enabled again gets in at
once), and neither is a failure to ask.
"""

import time
from dataclasses import dataclass

import httpx
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.catalogue import Role
from sstools.common.tracing import instrument_httpx

MAX_REMEMBERED = 10_000  # users; past it, the expired ones are forgotten


class AccountRefused(Exception):
    """Ops does not accept this user's token: ``code`` is its reason (``user_inactive``...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class AccountUnknown(Exception):
    """Ops could not be asked, or answered something other than yes or no."""


@dataclass(frozen=True)
class Standing:
    role: Role
    until: float  # monotonic


class Accounts:
    def __init__(
        self, ops_url: str, fresh_seconds: float, *, timeout: float, tracer_provider: TracerProvider
    ) -> None:
        self._http = httpx.AsyncClient(base_url=ops_url.rstrip("/"), timeout=timeout)
        instrument_httpx(self._http, tracer_provider)
        self._fresh_seconds = fresh_seconds
        self._known: dict[str, Standing] = {}

    async def aclose(self) -> None:
        await self._http.aclose()

    async def role(self, username: str, token: str, *, fresh: bool = False) -> Role:
        """The user's role; ops is asked unless it answered for them less than ``fresh_seconds``
        ago and ``fresh`` is not asked for. Raises :class:`AccountRefused` or
        :class:`AccountUnknown`."""
        now = time.monotonic()
        known = self._known.get(username)
        if known is not None and known.until > now and not fresh:
            return known.role
        self._known.pop(username, None)
        role = await self._ask(username, token)
        if len(self._known) >= MAX_REMEMBERED:
            self._known = {user: standing for user, standing in self._known.items() if standing.until > now}
        self._known[username] = Standing(role, now + self._fresh_seconds)
        return role

    async def _ask(self, username: str, token: str) -> Role:
        try:
            reply = await self._http.get("/api/auth/me", headers={"Authorization": f"Bearer {token}"})
        except httpx.HTTPError as error:
            raise AccountUnknown(f"ops could not be asked: {error!r}"[:300]) from None
        if reply.status_code == 401:
            code = _code(reply)
            raise AccountRefused(code, f"ops does not accept {username}'s token ({code})")
        if reply.status_code != 200:
            raise AccountUnknown(f"ops answered {reply.status_code}: {reply.text[:200]}")
        try:
            body = reply.json()
            named, role = body["username"], Role(body["role"])
        except (ValueError, KeyError, TypeError):
            raise AccountUnknown(f"ops answered what is not a user: {reply.text[:200]}") from None
        if named != username:  # the token and the name it was verified as disagree
            raise AccountRefused("token_subject_mismatch", "ops reads another user in this token")
        return role


def _code(reply: httpx.Response) -> str:
    try:
        detail = reply.json().get("detail")
    except (ValueError, AttributeError):
        return "unauthorized"
    code = detail.get("code") if isinstance(detail, dict) else None
    return code if isinstance(code, str) else "unauthorized"
