"""Calls to the run's gRPC services as a caller without a valid service token would make them:
each credential an attacker could try, and what the server answered."""

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

import grpc
from google.protobuf.message import Message

from sstools.common.grpc_auth import AUTH_ERROR_KEY, bearer
from sstools.common.tokens import SERVICE_AUDIENCE, USER_AUDIENCE, TokenType
from sstools.devstack.keys import ISSUER, forged_token, service_token, user_token


def bad_service_credentials() -> dict[str, tuple[str, tuple[tuple[str, str], ...]]]:
    """Each way to lack a service token: the ``authorization`` metadata sent, and the reason the
    server must give, by a name for the case."""
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    wrong_audience = ISSUER.issue(
        "agent", token_type=TokenType.SERVICE, audience=USER_AUDIENCE, ttl=timedelta(hours=1)
    )
    user_typed = ISSUER.issue(
        "root", token_type=TokenType.USER, audience=SERVICE_AUDIENCE, ttl=timedelta(hours=1)
    )
    tokens = {
        "expired": ("token_expired", service_token(ttl=timedelta(minutes=5), now=long_ago)),
        "a person's user token": ("token_audience_invalid", user_token("root")),
        "user-typed, for the services": ("token_type_invalid", user_typed),
        "signed by another key": (
            "token_key_unknown",
            forged_token("agent", token_type=TokenType.SERVICE, audience=SERVICE_AUDIENCE),
        ),
        "for another audience": ("token_audience_invalid", wrong_audience),
        "not a JWT": ("token_malformed", "not-a-jwt"),
    }
    return {
        "none": ("service_token_missing", ()),
        "without Bearer": ("service_token_missing", (("authorization", service_token()),)),
        **{case: (code, (bearer(token),)) for case, (code, token) in tokens.items()},
    }


async def answer(
    target: str,
    service: str,
    method: str,
    request: Message,
    metadata: Sequence[tuple[str, str]],
) -> tuple[grpc.StatusCode, str]:
    """One call, its answer's status and ``sstools-auth-error`` ("" on success or none)."""
    async with grpc.aio.insecure_channel(target) as channel:
        call: grpc.aio.UnaryUnaryMultiCallable[Message, bytes] = channel.unary_unary(
            f"/{service}/{method}", request_serializer=lambda sent: sent.SerializeToString()
        )
        try:
            await call(request, metadata=tuple(metadata), timeout=30)
        except grpc.aio.AioRpcError as error:
            trailing: Mapping[str, str | bytes] = dict(error.trailing_metadata() or ())
            return error.code(), str(trailing.get(AUTH_ERROR_KEY, ""))
    return grpc.StatusCode.OK, ""


async def not_refused(
    target: str,
    service: str,
    method: str,
    request: Message,
    also: Sequence[tuple[str, str]] = (),
) -> dict[str, tuple[grpc.StatusCode, str]]:
    """What the server answered to each bad service credential (with ``also`` besides, e.g. a
    valid user token) where it did not refuse it, UNAUTHENTICATED for the right reason: empty
    when every one was refused."""
    wrong = {}
    for case, (code, credential) in bad_service_credentials().items():
        got = await answer(target, service, method, request, [*credential, *also])
        if got != (grpc.StatusCode.UNAUTHENTICATED, code):
            wrong[case] = got
    return wrong
