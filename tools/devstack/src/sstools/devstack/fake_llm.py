"""An OpenAI-compatible chat server for tests: it answers from a script over a real socket, so
the clients under test (httpx in ops, ``ChatOpenAI`` in the agent) speak their real protocol.

Each ``POST /v1/chat/completions`` takes the next :class:`Reply` from the script (or, when the
script is empty, echoes the last user message); ``stream: true`` answers with server-sent
events chunk by chunk, tool calls included. Every request is kept for the test to inspect.
"""

import asyncio
import json
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] | str  # a string is sent as is: malformed arguments
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:12]}")


@dataclass(frozen=True)
class Reply:
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    status: int = 200  # anything else answers an error body with this status
    first_token_delay: float = 0.0
    chunk_size: int = 4  # characters per streamed content chunk
    chunk_delay: float = 0.0  # seconds between streamed content chunks
    malformed: bool = False  # a streamed chunk that is not JSON


@dataclass
class FakeLlm:
    model: str = "fake-model"
    script: deque[Reply] = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def says(self, *replies: Reply) -> None:
        self.script.extend(replies)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/v1/models")
        async def models() -> dict[str, Any]:
            return {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "tests"}]}

        @app.post("/v1/chat/completions")
        async def completions(request: Request) -> Response:
            body = await request.json()
            self.requests.append(body)
            reply = self.script.popleft() if self.script else Reply(content=_last_user_text(body))
            if reply.status != 200:
                error = {"error": {"message": f"scripted failure {reply.status}", "type": "server_error"}}
                return JSONResponse(error, status_code=reply.status)
            if body.get("stream"):
                return StreamingResponse(self._stream(reply), media_type="text/event-stream")
            await asyncio.sleep(reply.first_token_delay)
            return JSONResponse(_completion(self.model, reply))

        return app

    async def _stream(self, reply: Reply) -> AsyncIterator[str]:
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            payload = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

        await asyncio.sleep(reply.first_token_delay)
        yield chunk({"role": "assistant", "content": ""})
        if reply.malformed:
            yield "data: {not json\n\n"
        for start in range(0, len(reply.content), reply.chunk_size):
            yield chunk({"content": reply.content[start : start + reply.chunk_size]})
            await asyncio.sleep(reply.chunk_delay)
        for index, call in enumerate(reply.tool_calls):
            arguments = _arguments(call)
            head = {
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            yield chunk({"tool_calls": [head]})
            for start in range(0, len(arguments), 16):
                yield chunk(
                    {
                        "tool_calls": [
                            {"index": index, "function": {"arguments": arguments[start : start + 16]}}
                        ]
                    }
                )
        yield chunk({}, "tool_calls" if reply.tool_calls else "stop")
        yield "data: [DONE]\n\n"


def _arguments(call: ToolCall) -> str:
    return (
        call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments, ensure_ascii=False)
    )


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


def _completion(model: str, reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": _arguments(call)},
            }
            for call in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }
