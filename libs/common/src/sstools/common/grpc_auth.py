"""Who may call a gRPC service, and for whom.

Every call to convo, the router and docparse carries the caller's service token (ops signs it,
``TokenType.SERVICE``, audience ``SERVICE_AUDIENCE``) as ``authorization: Bearer <token>``;
:class:`ServiceTokenCheck` refuses one without a valid token with ``UNAUTHENTICATED`` before any
handler runs. A call made for a person also carries that person's user token in
``x-user-token``, and the service takes the person from it (:meth:`Callers.user`), never from a
field of the request. Health checks and reflection stay open: probes hold no token.

A refusal says why in its trailing metadata: ``sstools-auth-error`` (the ``TokenError`` code, or
``service_token_missing`` / ``user_token_missing``) and ``sstools-auth-credential`` (``service``
or ``user``: a client fetches a fresh service token only when that one was refused).

Clients: :class:`ServiceTokenInterceptor` puts the service token from a
:class:`ServiceTokenSource` on every call, and asks for a fresh one, once, when the server
refuses the one it sent.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn, Protocol

import grpc
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection

from sstools.common.tokens import (
    SERVICE_AUDIENCE,
    USER_AUDIENCE,
    PublicKeyCodec,
    TokenClaims,
    TokenError,
    TokenType,
)

_log = logging.getLogger(__name__)

SERVICE_TOKEN_KEY = "authorization"
USER_TOKEN_KEY = "x-user-token"
AUTH_ERROR_KEY = "sstools-auth-error"
AUTH_CREDENTIAL_KEY = "sstools-auth-credential"

# Open to anyone who reaches the port: kubelet and `make run` probe health without a token.
OPEN_SERVICES = frozenset(
    {
        health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
        reflection.SERVICE_NAME,
        "grpc.reflection.v1.ServerReflection",
    }
)

Metadata = Iterable[tuple[str, str | bytes]] | None
# Tokens verified lately, each kept until it expires: one service token comes with every call for
# minutes, one user token with every call of a turn; its signature is checked once.
VERIFIED_KEPT = 1024


class CallerRefused(Exception):
    """A call's credential is missing or does not verify; ``credential`` says which one."""

    def __init__(self, credential: str, code: str, message: str) -> None:
        super().__init__(f"{credential} token refused: {code}: {message}")
        self.credential = credential
        self.code = code


def bearer(token: str) -> tuple[str, str]:
    """The metadata entry that carries a service token."""
    return (SERVICE_TOKEN_KEY, f"Bearer {token}")


def as_user(user_token: str) -> tuple[tuple[str, str]]:
    """The metadata of a call made for the person who holds ``user_token``."""
    return ((USER_TOKEN_KEY, user_token),)


def _value(metadata: Metadata, key: str) -> str:
    for name, value in metadata or ():
        if name == key:
            return value.decode() if isinstance(value, bytes) else value
    return ""


class Callers:
    """Verifies the credentials a call carries, with ops' public keys only.

    ``late_user_seconds``: how long after it expired a user token is still taken where the
    caller asks for it (:meth:`user` with ``late=True``) — the writes at the end of a turn that
    began while the person's token was valid (see the README, "Service credentials")."""

    def __init__(self, codec: PublicKeyCodec, *, late_user_seconds: float = 0.0) -> None:
        self._codec = codec
        self._late_codec = PublicKeyCodec(codec.trusted, leeway_seconds=late_user_seconds)
        self._late = timedelta(seconds=late_user_seconds)
        self._verified_lately: OrderedDict[tuple[str, str, bool], TokenClaims] = OrderedDict()

    def service(self, metadata: Metadata) -> TokenClaims:
        scheme, _, token = _value(metadata, SERVICE_TOKEN_KEY).partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise CallerRefused(
                "service", "service_token_missing", "expected 'authorization: Bearer <token>'"
            )
        return self._verified("service", token, SERVICE_AUDIENCE, TokenType.SERVICE, late=False)

    def user(self, metadata: Metadata, *, late: bool = False) -> TokenClaims:
        token = _value(metadata, USER_TOKEN_KEY)
        if not token:
            raise CallerRefused(
                "user", "user_token_missing", f"expected the person's token in {USER_TOKEN_KEY!r}"
            )
        claims = self._verified("user", token, USER_AUDIENCE, TokenType.USER, late=late)
        if not claims.subject:  # ops never signs one; a call for no one acts for no one
            raise CallerRefused("user", "token_claim_missing", "the user token names no user")
        return claims

    def _verified(
        self, credential: str, token: str, audience: str, token_type: TokenType, *, late: bool
    ) -> TokenClaims:
        """The token's claims, its signature checked once while it is valid (``late``: for the
        late codec's leeway too); a token past that is verified again, and refused."""
        kept = (token, credential, late)
        claims = self._verified_lately.get(kept)
        grace = self._late if late else timedelta()
        if claims is not None and datetime.now(UTC) < claims.expires_at + grace:
            return claims
        codec = self._late_codec if late else self._codec
        try:
            claims = codec.verify(token, audience=audience, token_type=token_type)
        except TokenError as error:
            self._verified_lately.pop(kept, None)
            raise CallerRefused(credential, error.code, str(error)) from None
        self._verified_lately[kept] = claims
        if len(self._verified_lately) > VERIFIED_KEPT:
            self._verified_lately.popitem(last=False)
        return claims


async def refuse(context: grpc.aio.ServicerContext[Any, Any], refused: CallerRefused) -> NoReturn:
    """End the call UNAUTHENTICATED, with the typed reason in its trailing metadata."""
    await context.abort(
        grpc.StatusCode.UNAUTHENTICATED,
        str(refused),
        trailing_metadata=((AUTH_ERROR_KEY, refused.code), (AUTH_CREDENTIAL_KEY, refused.credential)),
    )
    raise AssertionError("abort raises")  # for the type checker: abort never returns


def has_user_token(metadata: Metadata) -> bool:
    """Whether a call carries a person's token at all (valid or not)."""
    return bool(_value(metadata, USER_TOKEN_KEY))


async def user_of(
    callers: Callers, context: grpc.aio.ServicerContext[Any, Any], *, late: bool = False
) -> str:
    """The person a call is made for: the subject of its verified user token."""
    try:
        return callers.user(context.invocation_metadata(), late=late).subject
    except CallerRefused as refused:
        await refuse(context, refused)


class ServiceTokenCheck(grpc.aio.ServerInterceptor):
    """Refuses, before any handler runs, a call without a valid service token (but to
    :data:`OPEN_SERVICES`)."""

    def __init__(self, callers: Callers) -> None:
        self._callers = callers

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        method: str = handler_call_details.method
        if method.lstrip("/").split("/", 1)[0] in OPEN_SERVICES:
            return await continuation(handler_call_details)
        try:
            self._callers.service(handler_call_details.invocation_metadata)
        except CallerRefused as refused:
            handler = await continuation(handler_call_details)
            return None if handler is None else _refusing(handler, refused)
        return await continuation(handler_call_details)


def _refusing(
    handler: grpc.RpcMethodHandler[Any, Any], refused: CallerRefused
) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler of the same kind as ``handler`` that answers UNAUTHENTICATED and runs nothing."""

    async def refusal(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await refuse(context, refused)

    if handler.unary_unary is not None:
        make = grpc.unary_unary_rpc_method_handler
    elif handler.unary_stream is not None:
        make = grpc.unary_stream_rpc_method_handler
    elif handler.stream_unary is not None:
        make = grpc.stream_unary_rpc_method_handler
    else:
        make = grpc.stream_stream_rpc_method_handler
    return make(
        refusal,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


class ServiceTokenUnavailable(Exception):
    """No service token can be had now (ops cannot be reached, or refuses the client)."""


class ServiceTokenSource(Protocol):
    """Where a client's service token comes from (the agent: ops, via its OpsClient)."""

    async def service_token(self) -> str:
        """A token valid for a while yet; ServiceTokenUnavailable when none can be had."""
        ...

    def forget_service_token(self, token: str) -> None:
        """A server refused ``token``: the next :meth:`service_token` is a fresh one."""
        ...


def _refused_service_token(error: grpc.aio.AioRpcError) -> bool:
    if error.code() != grpc.StatusCode.UNAUTHENTICATED:
        return False
    return _value(error.trailing_metadata(), AUTH_CREDENTIAL_KEY) != "user"


class ServiceTokenInterceptor(grpc.aio.UnaryUnaryClientInterceptor):
    """Sends the source's service token with every unary call; when the server refuses that
    token, gets a fresh one and tries once more. A source with no token to give makes the call
    fail UNAVAILABLE, as an unreachable server would."""

    def __init__(self, source: ServiceTokenSource) -> None:
        self._source = source

    async def intercept_unary_unary(
        self,
        continuation: Callable[
            [grpc.aio.ClientCallDetails, Any], Awaitable[grpc.aio.UnaryUnaryCall[Any, Any]]
        ],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        for attempt in (1, 2):
            token = await self._token()
            metadata = grpc.aio.Metadata(*(client_call_details.metadata or ()), bearer(token))
            details = grpc.aio.ClientCallDetails(
                method=client_call_details.method,
                timeout=client_call_details.timeout,
                metadata=metadata,
                credentials=client_call_details.credentials,
                wait_for_ready=client_call_details.wait_for_ready,
            )
            call = await continuation(details, request)
            try:
                return await call
            except grpc.aio.AioRpcError as error:
                if attempt == 2 or not _refused_service_token(error):
                    raise
                _log.info("service token refused; asking for a fresh one", extra={"method": details.method})
                self._source.forget_service_token(token)
        raise AssertionError("unreachable")

    async def _token(self) -> str:
        try:
            return await self._source.service_token()
        except ServiceTokenUnavailable as problem:
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(),
                details=f"no service token: {problem}",
            ) from None


class FixedServiceToken:
    """A source that always gives the same token (a command-line tool, a test, a benchmark)."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def service_token(self) -> str:
        return self._token

    def forget_service_token(self, token: str) -> None:
        """Nothing fresher to be had."""
