"""The service-token client: a token the server refuses is replaced once, never more; a refused
user token is not a reason to ask for a new service token; no token to be had is UNAVAILABLE.
The servers' check: a token verified once is kept no longer than it is valid."""

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import grpc
import pytest
from opentelemetry.sdk.trace import TracerProvider
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sstools.common.grpc_auth import CallerRefused, Callers, ServiceTokenUnavailable, as_user, bearer, user_of
from sstools.common.grpc_client import insecure_channel
from sstools.common.runtime import Service
from sstools.common.settings import ServiceSettings
from sstools.common.tokens import PublicKeyCodec
from sstools.devstack.keys import CALLERS, ISSUER, service_token, user_token


class EchoSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ECHO_")
    service_name: ClassVar[str] = "echo"

    grpc_port: int = Field(default=0)
    metrics_port: int = Field(default=0)


async def _echo(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
    return request


async def _whoami(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
    return (await user_of(CALLERS, context)).encode()


def _register(server: grpc.aio.Server) -> list[str]:
    handlers: dict[str, grpc.RpcMethodHandler[bytes, bytes]] = {
        "Echo": grpc.unary_unary_rpc_method_handler(_echo),
        "WhoAmI": grpc.unary_unary_rpc_method_handler(_whoami),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Echo", handlers),))
    return ["test.Echo"]


class Tokens:
    """A source that gives ``tokens`` in turn, and remembers what it was asked."""

    def __init__(self, *tokens: str) -> None:
        self.tokens = list(tokens)
        self.given = 0
        self.forgotten: list[str] = []

    async def service_token(self) -> str:
        if not self.tokens:
            raise ServiceTokenUnavailable("ops is down")
        self.given += 1
        return self.tokens[min(self.given, len(self.tokens)) - 1]

    def forget_service_token(self, token: str) -> None:
        self.forgotten.append(token)


@pytest.fixture
async def target(tracer_provider: TracerProvider) -> AsyncIterator[str]:
    service = Service(EchoSettings(), tracer_provider=tracer_provider)
    service.add_grpc(0, _register, callers=CALLERS)
    await service.start()
    try:
        yield f"127.0.0.1:{service.ports['grpc']}"
    finally:
        await service.stop()


async def _call(target: str, tokens: Tokens, method: str = "Echo", user: str | None = None) -> bytes:
    async with insecure_channel(target, TracerProvider(), tokens=tokens) as channel:
        call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(f"/test.Echo/{method}")
        reply: bytes = await call(b"ping", metadata=as_user(user) if user else None, timeout=10)
        return reply


LAPSED = service_token(ttl=timedelta(minutes=5), now=datetime.now(UTC) - timedelta(hours=1))


async def test_a_refused_service_token_is_replaced_once_and_the_call_goes_through(target: str) -> None:
    tokens = Tokens(LAPSED, service_token())
    assert await _call(target, tokens) == b"ping"
    assert (tokens.given, tokens.forgotten) == (2, [LAPSED])


async def test_a_token_refused_again_fails_the_call_after_one_retry(target: str) -> None:
    tokens = Tokens(LAPSED)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _call(target, tokens)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert (tokens.given, tokens.forgotten) == (2, [LAPSED])


async def test_a_refused_user_token_is_not_retried_with_a_new_service_token(target: str) -> None:
    tokens = Tokens(service_token())
    assert await _call(target, tokens, "WhoAmI", user_token("anna")) == b"anna"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _call(target, tokens, "WhoAmI")  # no user token
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert (tokens.given, tokens.forgotten) == (2, [])


async def test_no_service_token_to_be_had_is_unavailable(target: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _call(target, Tokens())
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "ops is down" in (refused.value.details() or "")


def _sleep_until(moment: datetime) -> None:
    time.sleep(max(0.0, (moment - datetime.now(UTC)).total_seconds()))


def test_a_token_verified_before_is_still_refused_once_it_expires() -> None:
    """Callers keep what they verified, to check a signature once: never past the token's end."""
    late = timedelta(seconds=2)
    callers = Callers(PublicKeyCodec(ISSUER.trusted), late_user_seconds=late.total_seconds())
    ends = datetime.now(UTC) + timedelta(seconds=3)
    lifetime = timedelta(minutes=5)
    service = (bearer(service_token(ttl=lifetime, now=ends - lifetime)),)
    person = as_user(user_token("anna", ttl=lifetime, now=ends - lifetime))
    assert callers.service(service).subject == "agent"
    assert callers.user(person).subject == "anna"
    _sleep_until(ends + timedelta(seconds=0.1))
    with pytest.raises(CallerRefused) as refused:
        callers.service(service)
    assert refused.value.code == "token_expired"
    with pytest.raises(CallerRefused) as refused:
        callers.user(person)
    assert refused.value.code == "token_expired"
    assert callers.user(person, late=True).subject == "anna"  # within the late seconds
    _sleep_until(ends + late + timedelta(seconds=0.1))
    with pytest.raises(CallerRefused):
        callers.user(person, late=True)


def test_a_token_kept_as_one_kind_is_never_taken_as_the_other() -> None:
    callers = Callers(PublicKeyCodec(ISSUER.trusted))
    person = user_token("anna")
    assert callers.user(as_user(person)).subject == "anna"
    with pytest.raises(CallerRefused) as refused:
        callers.service((bearer(person),))
    assert refused.value.code == "token_audience_invalid"
