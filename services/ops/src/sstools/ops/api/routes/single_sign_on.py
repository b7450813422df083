"""Single sign-on (OpenID Connect, authorization code with PKCE) beside the password sign-in.

    GET  /api/auth/methods          how the sign-in page may sign people in (public)
    GET  /api/auth/oidc/start       302 to the provider (?return_to=/agent/...&prompt=none)
    GET  /api/auth/oidc/callback    the provider's 302 back; 302 to {return_to}#sso=<hand-off>
                                    or {return_to}#sso_error=<code>
    POST /api/auth/oidc/session     {"handoff"} -> the same tokens as POST /api/auth/login

No token ever travels in a URL: the callback gives the page a one-time hand-off code (in the
fragment, which no server and no Referer sees), which the page posts for an ordinary ops
session (refresh rotation, revocation on disable and the per-call account check all hold). The
start binds the sign-in to the browser with a cookie named after its state, so a callback
carried to another browser (login CSRF) is refused; the callback binds the hand-off the same
way, with a cookie named after the code holding a second secret, so a code carried to another
browser (``/agent/#sso=<someone else's code>``) is refused too. Every sign-in and every refusal
is in ops' audit trail as ``sign_in.sso``.

The account is the one linked to the provider's issuer and subject; a first sign-in makes one
under the name the provider gives only when no account holds it (``oidc_name_taken`` otherwise,
until an admin links them). Starts are bounded per client address, and in total with the
heaviest starter giving way first (:mod:`sstools.ops.store.single_sign_on`).
"""

import hashlib
import logging
from dataclasses import replace
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, HTTPException, Request, status
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel, Field

from sstools.ops.api.auth import unauthorized
from sstools.ops.api.clients import client_address
from sstools.ops.api.context import OpsContext, SingleSignOn
from sstools.ops.api.routes.identity import SessionOut, session_out
from sstools.ops.oidc import (
    Identity,
    OidcDenied,
    OidcError,
    OidcLastAdmin,
    OidcNameTaken,
    OidcStateUnknown,
    OidcTokenInvalid,
    OidcUnavailable,
    OidcUserDisabled,
    safe_return_to,
)
from sstools.ops.store.single_sign_on import HANDOFF_TTL, LOGIN_TTL, PendingLogin, TooManyPending
from sstools.ops.store.users import AccountChangeRefused, SignIn

_log = logging.getLogger(__name__)

START_PATH = "/api/auth/oidc/start"
CALLBACK_PATH = "/api/auth/oidc/callback"
SESSION_PATH = "/api/auth/oidc/session"
AUDIT_ACTION = "sign_in.sso"
# Sign-ins one client address may start a minute (an office behind one NAT included); the
# number under way across all addresses is OPS_OIDC_PENDING_SIGN_INS.
STARTS_PER_ADDRESS_PER_MINUTE = 60
_STATE_MAX_CHARS = 200


class SsoMethod(BaseModel):
    name: str
    start: str


class Methods(BaseModel):
    """How the sign-in page may sign people in."""

    password: bool
    sso: SsoMethod | None


class HandoffIn(BaseModel):
    handoff: str = Field(min_length=1, max_length=200)


def _no_sso() -> HTTPException:
    return HTTPException(
        status.HTTP_404_NOT_FOUND, {"code": "sso_off", "message": "single sign-on is not configured"}
    )


def _busy(retry_after: int) -> HTTPException:
    return HTTPException(
        status.HTTP_429_TOO_MANY_REQUESTS,
        {"code": "oidc_busy", "message": "too many single sign-ins under way", "retry_after": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


def _redirect(url: str) -> RedirectResponse:
    response = RedirectResponse(url, status_code=status.HTTP_302_FOUND)
    response.headers["Cache-Control"] = "no-store"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


class _BrowserBinding:
    """The cookies that tie a sign-in, then its hand-off, to the browser that started it: named
    after the state or the hand-off code (so sign-ins in several tabs do not clash), HttpOnly,
    SameSite=Lax (sent on the provider's top-level redirect back, and with the page's own
    fetch), ``__Host-`` and Secure behind https."""

    def __init__(self, redirect_url: str) -> None:
        self.secure = urlsplit(redirect_url).scheme == "https"
        self.prefix = "__Host-sstools_sso_" if self.secure else "sstools_sso_"
        self.path = "/" if self.secure else "/api/auth/oidc"

    def name(self, key: str, kind: str = "") -> str:
        return self.prefix + kind + hashlib.sha256(key.encode()).hexdigest()[:24]

    def set(self, response: Response, name: str, value: str, max_age: timedelta) -> None:
        response.set_cookie(
            name,
            value,
            max_age=int(max_age.total_seconds()),
            path=self.path,
            secure=self.secure,
            httponly=True,
            samesite="lax",
        )

    def clear(self, response: Response, name: str) -> None:
        response.delete_cookie(name, path=self.path, secure=self.secure, httponly=True, samesite="lax")


_HANDOFF_COOKIE = "handoff_"


def router(ctx: OpsContext) -> APIRouter:
    api = APIRouter()
    sso = ctx.single_sign_on
    binding = _BrowserBinding(sso.client.config.redirect_url) if sso else None

    def enabled() -> SingleSignOn:
        if sso is None:
            raise _no_sso()
        return sso

    async def record(outcome: str, username: str, detail: dict[str, Any]) -> None:
        await ctx.audit.record(
            service="",
            username=username,
            action=AUDIT_ACTION,
            target_env="",
            outcome=outcome,
            detail=detail,
        )

    async def refused(error: OidcError, return_to: str, detail: dict[str, Any]) -> RedirectResponse:
        if isinstance(error, OidcUnavailable):
            _log.warning("single sign-on unavailable", extra={"error": str(error)[:300]})
        await record(
            "refused",
            error.username,
            {**detail, **error.detail, "code": error.code, "reason": str(error)[:300]},
        )
        return _redirect(f"{return_to}#sso_error={error.code}")

    @api.get("/api/auth/methods")
    async def methods() -> Methods:
        """Public: what the sign-in page offers (the password form, a "Sign in with" button)."""
        return Methods(
            password=ctx.password_sign_in,
            sso=SsoMethod(name=sso.client.config.provider_name, start=START_PATH) if sso else None,
        )

    @api.get(START_PATH)
    async def start(request: Request, return_to: str | None = None, prompt: str | None = None) -> Response:
        """To the provider; ``prompt=none`` signs in silently if the provider has a session (else
        the browser comes back with ``#sso_error=oidc_denied``)."""
        sso = enabled()
        assert binding is not None
        back = safe_return_to(return_to)
        prompt_none = prompt == "none"
        address = client_address(request, ctx.trusted_proxies)
        wait = await ctx.sign_ins.limits.hit(
            f"sso:start:{address}", STARTS_PER_ADDRESS_PER_MINUTE, timedelta(minutes=1)
        )
        if wait is not None:
            raise _busy(wait)
        try:
            await sso.client.discovery()  # before a row is kept for a sign-in that cannot go on
        except OidcError as error:
            return await refused(error, back, {"stage": "start", "prompt_none": prompt_none})
        try:
            login = await ctx.sso_store.begin(
                back, prompt_none=prompt_none, address=address, limit=sso.pending_limit
            )
        except TooManyPending:
            _log.warning("too many single sign-ins under way", extra={"limit": sso.pending_limit})
            raise _busy(60) from None
        url = await sso.client.authorization_url(
            state=login.state, nonce=login.nonce, code_verifier=login.code_verifier, prompt_none=prompt_none
        )
        response = _redirect(url)
        binding.set(response, binding.name(login.state), "1", LOGIN_TTL)
        return response

    @api.get(CALLBACK_PATH)
    async def callback(
        request: Request,
        state: str | None = None,
        code: str | None = None,
        error: str | None = None,
        iss: str | None = None,
    ) -> Response:
        """The provider's answer: the page gets a hand-off code, or an error code, in the fragment."""
        sso = enabled()
        assert binding is not None
        login = None
        if state and len(state) <= _STATE_MAX_CHARS:
            login = await ctx.sso_store.take(state)  # used up whatever follows
        if login is None:
            return await refused(
                OidcStateUnknown("no single sign-on under way has this state"), safe_return_to(None), {}
            )
        detail: dict[str, Any] = {"prompt_none": login.prompt_none}
        try:
            if request.cookies.get(binding.name(login.state)) is None:
                raise OidcStateUnknown("this sign-in was started in another browser")
            identity = await finish(sso, login, code, error, iss)
        except OidcError as refusal:
            response = await refused(refusal, login.return_to, detail)
        except Exception:  # noqa: BLE001 — never a stack trace to the browser: the log has it
            _log.exception("single sign-on failed")
            response = await refused(OidcUnavailable("single sign-on failed"), login.return_to, detail)
        else:
            handoff = await ctx.sso_store.hand_off(identity.username)
            sign_in = SignIn("sso", client_address(request, ctx.trusted_proxies), identity.role_group)
            await ctx.authenticator.users.signed_in(identity.username, sign_in)
            await record(
                "signed_in",
                identity.username,
                {**detail, "groups": list(identity.groups), "role": identity.role.value},
            )
            response = _redirect(f"{login.return_to}#sso={handoff.code}")
            binding.set(
                response, binding.name(handoff.code, _HANDOFF_COOKIE), handoff.browser_secret, HANDOFF_TTL
            )
        binding.clear(response, binding.name(login.state))
        return response

    async def finish(
        sso: SingleSignOn, login: PendingLogin, code: str | None, error: str | None, iss: str | None
    ) -> Identity:
        client = sso.client
        if iss is not None and iss != client.config.issuer:  # RFC 9207: another provider's answer
            raise OidcTokenInvalid("the answer names another issuer", detail={"iss": iss[:200]})
        if error is not None:
            raise OidcDenied(f"the provider answered {error[:100]!r}", detail={"error": error[:100]})
        if not code:
            raise OidcTokenInvalid("the provider's answer has no code")
        id_token = await client.exchange(code, login.code_verifier)
        claims = await client.verify(id_token, login.nonce)
        identity = client.identity(claims)
        try:
            account = await ctx.authenticator.users.single_sign_on(
                identity.username, identity.role, identity.subject
            )
        except AccountChangeRefused as refusal:
            context = {
                "groups": list(identity.groups),
                "role": identity.role.value,
                "sub": identity.subject.subject,
            }
            if refusal.code == "name_taken":
                raise OidcNameTaken(str(refusal), username=identity.username, detail=context) from None
            if refusal.code == "user_disabled":
                raise OidcUserDisabled(str(refusal), username=identity.username, detail=context) from None
            if refusal.code == "last_admin":
                raise OidcLastAdmin(str(refusal), username=identity.username, detail=context) from None
            raise
        return replace(identity, username=account.username)  # a linked account keeps its own name

    @api.post(SESSION_PATH)
    async def session(body: HandoffIn, request: Request, response: Response) -> SessionOut:
        """The session of a finished single sign-on, for its hand-off code (once, within 60 s),
        redeemed by the browser it was handed to: from any other, refused (and used up)."""
        enabled()
        assert binding is not None
        cookie = binding.name(body.handoff, _HANDOFF_COOKIE)
        redeemed = await ctx.sso_store.redeem(body.handoff, request.cookies.get(cookie))
        if redeemed is None:
            raise unauthorized("oidc_handoff_invalid", "unknown, used or expired hand-off code")
        if not redeemed.same_browser:
            address = client_address(request, ctx.trusted_proxies)
            await record("refused", redeemed.username, {"code": "oidc_handoff_foreign", "address": address})
            raise unauthorized(
                "oidc_handoff_foreign", "this sign-in was started in another browser: sign in here yourself"
            )
        binding.clear(response, cookie)
        if await ctx.authenticator.users.active(redeemed.username) is None:
            raise unauthorized("user_inactive", "the user does not exist or is disabled")
        return session_out(ctx, redeemed.username, await ctx.sessions.issue(redeemed.username))

    return api
