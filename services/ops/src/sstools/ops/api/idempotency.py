"""``Idempotency-Key`` on write endpoints: the first request runs, repeats get its answer."""

import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import HTTPException, status
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

from sstools.ops.api.auth import Caller
from sstools.ops.store.idempotency import Claimed, IdempotencyStore, InProgress, Mismatch, Replay

REPLAYED_HEADER = "Idempotent-Replayed"


def fingerprint(request: Any) -> str:
    return hashlib.sha256(json.dumps(jsonable_encoder(request), sort_keys=True).encode()).hexdigest()


async def once(
    store: IdempotencyStore,
    caller: Caller,
    operation: str,
    key: str | None,
    request: Any,
    action: Callable[[], Awaitable[tuple[int, Any]]],
) -> JSONResponse:
    """Run ``action`` (returning status and body) at most once per (user, operation, key)."""
    if key is None:
        code, body = await action()
        return JSONResponse(jsonable_encoder(body), status_code=code)
    outcome = await store.claim(caller.username, operation, key, fingerprint(request))
    if isinstance(outcome, Replay):
        return JSONResponse(
            outcome.response, status_code=outcome.status_code, headers={REPLAYED_HEADER: "true"}
        )
    if isinstance(outcome, InProgress):
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            {
                "code": "idempotency_in_progress",
                "message": "the first request with this key is still running",
            },
        )
    if isinstance(outcome, Mismatch):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            {"code": "idempotency_key_reused", "message": "this key was used for a different request"},
        )
    assert isinstance(outcome, Claimed)
    try:
        code, body = await action()
    except BaseException:
        await store.release(caller.username, operation, key)  # nothing was done: a retry may run
        raise
    encoded = jsonable_encoder(body)
    await store.complete(caller.username, operation, key, code, encoded)
    return JSONResponse(encoded, status_code=code)
