"""An OpenAI-compatible chat server for tests: it answers from a script over a real socket, so
the clients under test (httpx in ops, ``ChatOpenAI`` in the agent) speak their real protocol.

Each ``POST /v1/chat/completions`` takes the next :class:`Reply` from the script (or, when the
script is empty, echoes the last user message); ``stream: true`` answers with server-sent
events chunk by chunk, tool calls included, in the chunk shape of the server the reply's
:class:`Shape` names. Every request is kept for the test to inspect.
"""

import asyncio
import json
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse


class Shape(StrEnum):
    """Whose streamed chunks a reply copies. The agent meets every one of these behind
    ``LLM_BASE_URL``; each is taken from the source (or a captured stream) named here.

    - ``SCRIPTED``: this server's own shape, OpenAI's in its plainest form (the default).
    - ``OPENAI``: the OpenAI API as recorded from gpt-4o-2024-08-06 (openai/openai-python,
      ``.inline-snapshot/external/453df473….bin``): a role chunk with ``content: null``, per call
      a head with index, id, type, name and empty arguments, then fragments of a few characters;
      ``finish_reason: tool_calls`` on an empty delta; a usage chunk with empty choices when
      ``stream_options.include_usage`` asks for it.
    - ``VLLM_HERMES``: vLLM's ``hermes`` tool parser (the one vLLM's docs give for Qwen2.5/Qwen3
      and Hermes models; ``vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py`` at
      00854322, ``serving_chat.py``): the head has id (``chatcmpl-tool-…``), type and name but
      no arguments key; the arguments follow token by token, cut anywhere (inside strings,
      between the letters of a word); the text between two calls comes as content ``"\\n"``; the
      last fragment rides on the chunk that carries ``finish_reason``.
    - ``VLLM_QWEN3_CODER``: vLLM's ``qwen3_coder`` parser (``qwen3coder_tool_parser.py`` at
      0054011d): a head with id ``call_<24 hex>`` and ``arguments: ""``, then ``{``, one
      ``"name": value`` fragment per parameter, ``}``; the finish chunk has ``content: ""``.
    - ``OLLAMA``: Ollama 0.12.6 ``/v1/chat/completions`` with a template's tool parser
      (``openai/openai.go`` ``ToChunk``/``ToToolCalls``, ``middleware/openai.go``,
      ``tools/tools.go``): every delta repeats ``role`` and ``content``; each call arrives whole
      in one chunk (id ``call_<8 chars>``, index counted by the parser); ``finish_reason`` on the
      last delta.
    - ``OLLAMA_INDEX_ZERO``: the same server with a built-in parser (``model/parsers/
      qwen3coder.go``; Ollama set no index there until 0.17.4, others until 0.20.6): every call
      has ``index: 0``, only the ids tell parallel calls apart.
    - ``OLLAMA_LEGACY``: Ollama 0.3.0–0.4.6 (``openai/openai.go``'s ``ToolCall`` had no index
      until #7888, 0.4.7; ``server/routes.go`` buffered the output while tools were offered):
      no role chunk, the calls together in one delta without ``index``, then
      ``finish_reason: stop``; the text of a reply with calls is dropped.
    - ``LLAMA_CPP``: llama.cpp ``llama-server`` b6xxx with ``--jinja`` (``tools/server/
      server.cpp`` ``to_json_oaicompat_chat_stream``, ``common/chat.cpp``
      ``common_chat_msg_diff_to_json_oaicompat``; as captured in g0t4/ask-openai.nvim's notes,
      September 2025): role chunk with ``content: null``, a head diff with a random 32-character
      id, type, name and ``arguments: ""``, then argument diffs.
    - ``GEMINI``: Google's OpenAI-compatible endpoint (``/v1beta/openai``) as reported in
      noho/dayu-agent#45 and open-webui/computer#224 (2026): calls without ``index``, a call's
      arguments split over index-less deltas, ``finish_reason: stop``.
    - ``NO_ID``: OpenAI's shape with no ``id`` on any call, as StepFun's step-router-v1 was
      reported to stream (iOfficeAI/aionrs#99, 2026).

    A small model that writes its call as JSON in its text (a ```json block, ``<tool_call>``
    or ``<tools>`` around it) needs no shape of its own: that is the reply's ``content``.
    """

    SCRIPTED = "scripted"
    OPENAI = "openai"
    VLLM_HERMES = "vllm-hermes"
    VLLM_QWEN3_CODER = "vllm-qwen3-coder"
    OLLAMA = "ollama"
    OLLAMA_INDEX_ZERO = "ollama-index-zero"
    OLLAMA_LEGACY = "ollama-legacy"
    LLAMA_CPP = "llama.cpp"
    GEMINI = "gemini"
    NO_ID = "no-id"


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
    chunk_delay: float = 0.0  # seconds after each streamed chunk that carries text
    malformed: bool = False  # a streamed chunk that is not JSON
    shape: Shape = Shape.SCRIPTED  # whose chunks a streamed reply copies
    response_id: str | None = None  # the stream's id when given (a server may send one id each time)


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
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                return StreamingResponse(self._stream(reply, usage), media_type="text/event-stream")
            await asyncio.sleep(reply.first_token_delay)
            return JSONResponse(_completion(self.model, reply))

        return app

    async def _stream(self, reply: Reply, include_usage: bool) -> AsyncIterator[str]:
        envelope = {
            "id": reply.response_id or f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
        }
        if reply.shape is Shape.GEMINI:  # its chunks, as captured, carry no id and no created
            del envelope["id"], envelope["created"]
        top, per_choice = _ENVELOPES.get(reply.shape, ({}, {}))
        await asyncio.sleep(reply.first_token_delay)
        for number, chunk in enumerate(_CHUNKS[reply.shape](reply)):
            if chunk.usage:
                if not include_usage:
                    continue
                payload = {**envelope, **top, "choices": [], "usage": _usage(reply)}
            else:
                choice = {"index": 0, "delta": chunk.delta, **per_choice, "finish_reason": chunk.finish}
                payload = {**envelope, **top, "choices": [choice]}
            yield f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"
            if number == 0 and reply.malformed:
                yield "data: {not json\n\n"
            if chunk.delta.get("content"):
                await asyncio.sleep(reply.chunk_delay)
        yield "data: [DONE]\n\n"


@dataclass(frozen=True)
class _Chunk:
    """One streamed chunk of choice 0; with ``usage``, the usage chunk with no choices that a
    shape's server sends when the request's ``stream_options.include_usage`` asks for it."""

    delta: dict[str, Any] = field(default_factory=dict)
    finish: str | None = None
    usage: bool = False


_USAGE = _Chunk(usage=True)

# Top-level and per-choice fields each server adds to every chunk.
_ENVELOPES: dict[Shape, tuple[dict[str, Any], dict[str, Any]]] = {
    Shape.OPENAI: ({"system_fingerprint": "fp_2a322c9ffc"}, {"logprobs": None}),
    Shape.VLLM_HERMES: ({}, {"logprobs": None}),
    Shape.VLLM_QWEN3_CODER: ({}, {"logprobs": None}),
    Shape.OLLAMA: ({"system_fingerprint": "fp_ollama"}, {}),
    Shape.OLLAMA_INDEX_ZERO: ({"system_fingerprint": "fp_ollama"}, {}),
    Shape.OLLAMA_LEGACY: ({"system_fingerprint": "fp_ollama"}, {}),
    Shape.LLAMA_CPP: ({"system_fingerprint": "b6881-8b11deea4"}, {}),
    Shape.NO_ID: ({"system_fingerprint": "fp_step"}, {"logprobs": None}),
}


def _pieces(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def _finish(reply: Reply) -> str:
    return "tool_calls" if reply.tool_calls else "stop"


def _text(reply: Reply, **repeated: Any) -> Iterator[_Chunk]:
    for piece in _pieces(reply.content, reply.chunk_size):
        yield _Chunk({**repeated, "content": piece})


def _head(index: int, call: ToolCall, **fields: Any) -> dict[str, Any]:
    return {
        "index": index,
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": ""},
        **fields,
    }


def _fragments(index: int, arguments: str, size: int) -> Iterator[_Chunk]:
    for piece in _pieces(arguments, size):
        yield _Chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})


def _scripted(reply: Reply) -> Iterator[_Chunk]:
    yield _Chunk({"role": "assistant", "content": ""})
    yield from _text(reply)
    for index, call in enumerate(reply.tool_calls):
        yield _Chunk({"tool_calls": [_head(index, call)]})
        yield from _fragments(index, _arguments(call), 16)
    yield _Chunk({}, _finish(reply))


def _openai(reply: Reply, *, with_ids: bool = True) -> Iterator[_Chunk]:
    yield _Chunk({"role": "assistant", "content": None})
    yield from _text(reply)
    for index, call in enumerate(reply.tool_calls):
        head = _head(index, call)
        if not with_ids:
            del head["id"]
        yield _Chunk({"tool_calls": [head]})
        yield from _fragments(index, _arguments(call), 4)
    yield _Chunk({}, _finish(reply))
    yield _USAGE


def _vllm_hermes(reply: Reply) -> Iterator[_Chunk]:
    yield _Chunk({"role": "assistant", "content": ""})
    yield from _text(reply)
    last: dict[str, Any] = {"content": ""}
    for index, call in enumerate(reply.tool_calls):
        if index:
            yield _Chunk({"content": "\n"})  # between </tool_call> and <tool_call>
        head = {"id": f"chatcmpl-tool-{uuid.uuid4().hex}", "type": "function", "index": index}
        yield _Chunk({"tool_calls": [{**head, "function": {"name": call.name}}]})
        fragments = list(_fragments(index, _arguments(call), 2))
        yield from fragments[:-1]
        last = fragments[-1].delta if fragments else last
    yield _Chunk(last, _finish(reply))
    yield _USAGE


def _vllm_qwen3_coder(reply: Reply) -> Iterator[_Chunk]:
    yield _Chunk({"role": "assistant", "content": ""})
    yield from _text(reply)
    for index, call in enumerate(reply.tool_calls):
        yield _Chunk({"tool_calls": [_head(index, call, id=f"call_{uuid.uuid4().hex[:24]}")]})
        pieces = [call.arguments]  # malformed arguments go out as they are
        if isinstance(call.arguments, dict):
            parameters = [
                f"{', ' if number else ''}{json.dumps(name)}: {json.dumps(value, ensure_ascii=False)}"
                for number, (name, value) in enumerate(call.arguments.items())
            ]
            pieces = ["{", *parameters, "}"]
        for piece in pieces:
            yield _Chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield _Chunk({"content": ""}, _finish(reply))
    yield _USAGE


def _ollama(reply: Reply, *, indexed: bool = True) -> Iterator[_Chunk]:
    said = {"role": "assistant", "content": ""}
    yield from _text(reply, role="assistant")
    for index, call in enumerate(reply.tool_calls):
        whole = {"id": call.id, "index": index if indexed else 0, "type": "function"}
        whole["function"] = {"name": call.name, "arguments": _arguments(call)}
        yield _Chunk({**said, "tool_calls": [whole]})
    yield _Chunk(said, _finish(reply))
    yield _USAGE


def _ollama_legacy(reply: Reply) -> Iterator[_Chunk]:
    said = {"role": "assistant", "content": ""}
    if not reply.tool_calls:
        yield _Chunk({**said, "content": reply.content}, "stop")
        return
    calls = [
        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": _arguments(call)}}
        for call in reply.tool_calls
    ]
    yield _Chunk({**said, "tool_calls": calls})
    yield _Chunk(said, "stop")


def _llama_cpp(reply: Reply) -> Iterator[_Chunk]:
    yield _Chunk({"role": "assistant", "content": None})
    yield from _text(reply)
    for index, call in enumerate(reply.tool_calls):
        yield _Chunk({"tool_calls": [_head(index, call, id=uuid.uuid4().hex)]})
        yield from _fragments(index, _arguments(call), 3)
    yield _Chunk({}, _finish(reply))
    yield _USAGE


def _gemini(reply: Reply) -> Iterator[_Chunk]:
    yield from _text(reply, role="assistant")
    for call in reply.tool_calls:
        arguments = _arguments(call)
        half = len(arguments) // 2
        function = {"name": call.name, "arguments": arguments[:half]}
        yield _Chunk(
            {"role": "assistant", "tool_calls": [{"id": call.id, "type": "function", "function": function}]}
        )
        yield _Chunk({"tool_calls": [{"function": {"arguments": arguments[half:]}}]})
    yield _Chunk({}, "stop")


_CHUNKS: dict[Shape, Callable[[Reply], Iterator[_Chunk]]] = {
    Shape.SCRIPTED: _scripted,
    Shape.OPENAI: _openai,
    Shape.VLLM_HERMES: _vllm_hermes,
    Shape.VLLM_QWEN3_CODER: _vllm_qwen3_coder,
    Shape.OLLAMA: _ollama,
    Shape.OLLAMA_INDEX_ZERO: partial(_ollama, indexed=False),
    Shape.OLLAMA_LEGACY: _ollama_legacy,
    Shape.LLAMA_CPP: _llama_cpp,
    Shape.GEMINI: _gemini,
    Shape.NO_ID: partial(_openai, with_ids=False),
}


def _arguments(call: ToolCall) -> str:
    return (
        call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments, ensure_ascii=False)
    )


def _usage(reply: Reply) -> dict[str, int]:
    """About four characters a token, as the reply is long."""
    completion = (len(reply.content) + sum(len(_arguments(call)) for call in reply.tool_calls)) // 4 + 1
    return {"prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion}


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
