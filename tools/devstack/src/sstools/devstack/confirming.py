"""Calls to ops as the agent sends them once a person confirmed: an httpx request hook that
signs, for every call that changes something, the confirmation the agent's gate would — for
its user, tool, Idempotency-Key and exact request. A request that already names one (even an
empty one: :data:`UNCONFIRMED`) is sent as it is."""

import re
import uuid
from collections.abc import Awaitable, Callable

import httpx
import jwt

from sstools.common.catalogue import ENDPOINTS
from sstools.common.confirmation import HEADER, Confirmation, ConfirmationCodec, request_fingerprint

UNCONFIRMED = {HEADER: ""}  # headers of a call sent without any confirmation
# Every endpoint that changes something, with the tool whose policy guards it: the agent's
# tools, and ops' restore, which no tool calls (it is guarded as a deploy).
_CHANGES = [(endpoint.method, endpoint.path, tool) for tool, endpoint in ENDPOINTS.items()]
_CHANGES.append(("POST", "/api/envs/{env_id}/restores", "deploy_dashboard"))
_TOOL_ROUTES = [
    (method, re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$"), tool)
    for method, path, tool in _CHANGES
]


def tool_of(method: str, path: str) -> str | None:
    return next((tool for verb, route, tool in _TOOL_ROUTES if verb == method and route.match(path)), None)


def confirming(secret: str) -> Callable[[httpx.Request], Awaitable[None]]:
    """The request hook, signing with the secret ops shares with the agent."""
    codec = ConfirmationCodec(secret)

    async def confirm(request: httpx.Request) -> None:
        user_token = request.headers.get("X-User-Authorization", "").removeprefix("Bearer ")
        tool = tool_of(request.method, request.url.path)
        if request.method == "GET" or HEADER in request.headers or not user_token or tool is None:
            return
        key = request.headers.setdefault("Idempotency-Key", uuid.uuid4().hex)
        username = jwt.decode(user_token, options={"verify_signature": False})["sub"]
        fingerprint = request_fingerprint(request.method, request.url.raw_path, request.content)
        request.headers[HEADER] = codec.sign(Confirmation(username, tool, key, fingerprint))

    return confirm
