"""The Ed25519 key pair of a test run: ops signs with it, every other service trusts its public
half, and tests mint with it the tokens a signed-in person (or the agent) would hold."""

import contextlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import httpx
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.grpc_auth import Callers, FixedServiceToken
from sstools.common.grpc_client import insecure_channel
from sstools.common.tokens import (
    SERVICE_AUDIENCE,
    USER_AUDIENCE,
    PublicKeyCodec,
    SigningKey,
    TokenType,
    jwks,
)

SIGNING_KEY = SigningKey.generate()
PRIVATE_KEY = SIGNING_KEY.private_pem()
PUBLIC_KEYS = SIGNING_KEY.public_pem()
ISSUER = PublicKeyCodec({SIGNING_KEY.kid: SIGNING_KEY.public_key}, SIGNING_KEY)
# What a gRPC server of the test run checks its callers with (the public half alone).
CALLERS = Callers(PublicKeyCodec(ISSUER.trusted))


def user_token(username: str, *, ttl: timedelta = timedelta(hours=1), now: datetime | None = None) -> str:
    """A user token as ops would issue it at sign-in."""
    return ISSUER.issue(username, token_type=TokenType.USER, audience=USER_AUDIENCE, ttl=ttl, now=now)


def service_token(
    client_id: str = "agent", *, ttl: timedelta = timedelta(hours=1), now: datetime | None = None
) -> str:
    """A service token as ops would issue it to ``client_id``."""
    return ISSUER.issue(client_id, token_type=TokenType.SERVICE, audience=SERVICE_AUDIENCE, ttl=ttl, now=now)


def service_channel(target: str, *, max_receive_bytes: int | None = None) -> grpc.aio.Channel:
    """A channel to one of the run's gRPC services as the agent holds one: every call carries
    a service token of the test key."""
    tokens = FixedServiceToken(service_token())
    return insecure_channel(target, TracerProvider(), tokens=tokens, max_receive_bytes=max_receive_bytes)


def forged_token(
    subject: str,
    *,
    token_type: TokenType = TokenType.USER,
    audience: str = USER_AUDIENCE,
    kid: str | None = None,
) -> str:
    """A token made by someone who does not hold ops' key: signed with a key of their own, named
    by its own ``kid`` or by one they copied from a real token."""
    forger = SigningKey.generate()
    if kid is not None:
        forger.kid = kid
    codec = PublicKeyCodec({forger.kid: forger.public_key}, forger)
    return codec.issue(subject, token_type=token_type, audience=audience, ttl=timedelta(hours=1))


class PublishedKeys:
    """The run's public keys as ops publishes them (``/.well-known/jwks.json``), at ``url``, on a
    loopback port of their own, for the session's Superset instances: the test stacks' ops come
    and go on ports of their own, their keys stay. An ops with a key of its own (made by the
    README's install steps) is followed for as long as :meth:`following` holds: its keys are
    served beside the run's, as a Superset would read them from that ops."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._followed: list[str] = []

    def document(self) -> bytes:
        keys = list(jwks(ISSUER.trusted.values())["keys"])
        for url in list(self._followed):
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                keys += httpx.get(url, timeout=5).json()["keys"]
        return json.dumps({"keys": keys}).encode()

    @contextmanager
    def following(self, ops_jwks_url: str) -> Iterator[None]:
        self._followed.append(ops_jwks_url)
        try:
            yield
        finally:
            self._followed.remove(ops_jwks_url)


@contextmanager
def serving_jwks() -> Iterator[PublishedKeys]:
    """The run's keys served (:class:`PublishedKeys`) until the block ends."""
    published: PublishedKeys | None = None

    class Keys(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path == "/.well-known/jwks.json" and published is not None
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(published.document() if found and published is not None else b"{}")

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Keys)
    published = PublishedKeys(f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield published
    finally:
        server.shutdown()
        server.server_close()
