"""A typed refusal over gRPC: the status code says its class, trailing metadata its code, which
a client reads back without parsing the message."""

from typing import Any, NoReturn

import grpc

ERROR_CODE_KEY = "sstools-error-code"
# convo's: a closed conversation refused, on each edge (gRPC, REST, the agent's stream).
CONVERSATION_ARCHIVED = "CONVERSATION_ARCHIVED"
CONVERSATION_BUSY = "CONVERSATION_BUSY"


async def refuse(
    context: "grpc.aio.ServicerContext[Any, Any]", status: grpc.StatusCode, code: str, message: str
) -> NoReturn:
    await context.abort(status, message, trailing_metadata=((ERROR_CODE_KEY, code),))
    raise AssertionError("abort returns only by raising")  # for the type checker


def error_code(error: grpc.aio.AioRpcError) -> str:
    """The code a refusal carries; "" for any other failure."""
    for name, value in error.trailing_metadata() or ():
        if name == ERROR_CODE_KEY:
            return value.decode() if isinstance(value, bytes) else str(value)
    return ""
