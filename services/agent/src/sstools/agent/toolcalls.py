"""Tool calls the agent can run, out of whatever an OpenAI-compatible server streams.

``ChatOpenAI`` merges streamed tool-call fragments by their ``index`` and keeps ids as sent,
which is right for OpenAI, vLLM, llama.cpp and Ollama, not for every server the agent may be
pointed at (their chunks: :class:`sstools.devstack.fake_llm.Shape`): some send no id, some no
index with a call's arguments split over several deltas, and a small local model often makes
no structured call at all but writes ``{"name": …, "arguments": …}`` in its text — in a
```json block, inside ``<tool_call>…</tool_call>`` or ``<tools>…</tools>``, or as the whole
reply; several objects one after another, ``"function"`` in place of ``"name"`` (or OpenAI's
``{"function": {"name": …, "arguments": …}}``), and ``//`` or ``/* */`` comments in the JSON
are read too. :class:`ToolCallStream` rewrites one response's chunks as they pass: each call gets an
index of its own and a non-empty id, and a call written in the text becomes a tool call,
never shown, when it names a tool bound for this request (any other text is left alone).
"""

import json
import uuid
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessageChunk, ToolCallChunk
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk

_FENCE = "```"
_TAGS = {"<tool_call>": "</tool_call>", "<tools>": "</tools>"}
_OPENERS = (_FENCE, *_TAGS)
# The info strings of a fenced block a call may be written in; other blocks are code to show.
_CALL_FENCES = frozenset({"", "json", "tool_call", "tools"})

# A call written in the text: its tool's name and arguments.
Written = tuple[str, dict[str, Any]]


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def bound_tool_names(tools: Any) -> frozenset[str]:
    """The function names ``bind_tools`` put in this request (its ``tools`` keyword)."""
    if not isinstance(tools, list):
        return frozenset()
    functions = (tool.get("function") for tool in tools if isinstance(tool, dict))
    return frozenset(
        function["name"]
        for function in functions
        if isinstance(function, dict) and isinstance(function.get("name"), str)
    )


@dataclass
class _Call:
    index: int  # its index in the chunks the agent sees
    id: str
    # Whether the server named it: then another id at its index is another call; a generated
    # id stays (an id the server sends later for the same call cannot replace it).
    from_server: bool


class _Calls:
    """The calls of one response, each under an index of its own and with an id."""

    def __init__(self) -> None:
        self._open: dict[tuple[bool, int], _Call] = {}
        self._count = 0

    def new(self, server_id: str | None) -> _Call:
        call = _Call(self._count, server_id or new_call_id(), server_id is not None)
        self._count += 1
        return call

    def adopt(self, chunks: list[ToolCallChunk]) -> list[ToolCallChunk]:
        """The server's fragments under the agent's indexes, each call's id on its first one.
        A fragment without an index (Ollama ≤ 0.4.6, Gemini) belongs by its place in the delta;
        a new id at an index already in use starts another call there."""
        adopted = []
        for position, chunk in enumerate(chunks):
            index = chunk.get("index")
            key = (True, index) if isinstance(index, int) else (False, position)
            server_id = chunk.get("id") or None
            call = self._open.get(key)
            if call is None or (server_id is not None and call.from_server and server_id != call.id):
                call = self._open[key] = self.new(server_id)
                first_id: str | None = call.id
            else:
                first_id = None
            adopted.append(
                tool_call_chunk(name=chunk.get("name"), args=chunk.get("args"), id=first_id, index=call.index)
            )
        return adopted


class _WrittenCalls:
    """Holds back text that may be a call written out until it is known not to be one, and
    takes out the calls to bound tools."""

    def __init__(self, tool_names: frozenset[str]) -> None:
        self._tool_names = tool_names
        self._held = ""
        self._started = False  # whether the reply has said more than white space
        self._in_code = False  # inside a fenced block of code, shown as it streams
        self._found = False

    def feed(self, text: str, *, final: bool = False) -> tuple[str, list[Written]]:
        """What may be shown of the text so far, and the calls it wrote. White space at the
        end waits for what follows: it goes with a call that comes next."""
        text, self._held = self._held + text, ""
        calls: list[Written] = []
        if not self._started:
            text, calls = self._whole_reply(text, final)
        shown = self._scan(text, final, calls) if self._started else ""
        self._found = self._found or bool(calls)
        if final and self._found:
            return shown.rstrip(), calls
        if not final:
            kept = shown.rstrip()
            self._held = shown[len(kept) :] + self._held
            shown = kept
        return shown, calls

    def _whole_reply(self, text: str, final: bool) -> tuple[str, list[Written]]:
        """A reply that starts as JSON waits to its end, then is a call or text."""
        start = text.lstrip()
        if not final and (not start or start[0] in "{["):
            self._held = text
            return "", []
        self._started = True
        if start[:1] in ("{", "["):
            written, end = _leading_json(start)
            if calls := self._calls_in(written):
                return start[end:], calls
        return text, []

    def _scan(self, text: str, final: bool, calls: list[Written]) -> str:
        shown = []
        while text:
            if self._in_code:
                end = text.find(_FENCE)
                if end < 0:
                    cut = len(text) if final else len(text) - _partial_opener(text, (_FENCE,))
                    shown.append(text[:cut])
                    text = text[cut:]
                    break
                shown.append(text[: end + len(_FENCE)])
                text = text[end + len(_FENCE) :]
                self._in_code = False
                continue
            found = [(at, opener) for opener in _OPENERS if (at := text.find(opener)) >= 0]
            if not found:
                cut = len(text) if final else len(text) - _partial_opener(text, _OPENERS)
                shown.append(text[:cut])
                text = text[cut:]
                break
            at, opener = min(found)
            before = text[:at].rstrip()  # the white space before a call goes with it
            shown.append(before)
            text = text[len(before) :]
            body = text.index(opener) + len(opener)
            closer = _TAGS.get(opener, _FENCE)
            if opener == _FENCE:
                line_end = text.find("\n", body)
                if line_end < 0 and not final:
                    break  # the fence's info string is still coming
                if text[body : line_end if line_end >= 0 else len(text)].strip().lower() not in _CALL_FENCES:
                    self._in_code = line_end >= 0
                    shown.append(text if line_end < 0 else text[: line_end + 1])
                    text = "" if line_end < 0 else text[line_end + 1 :]
                    continue
                body = line_end + 1
            end = text.find(closer, body)
            if end < 0 and not final:
                break  # maybe a call, still coming
            block_end = len(text) if end < 0 else end + len(closer)
            if written := self._calls_in(_json_values(text[body : end if end >= 0 else len(text)])):
                calls.extend(written)
            else:
                shown.append(text[:block_end])
            text = text[block_end:]
        self._held = text
        return "".join(shown)

    def _calls_in(self, written: list[Any]) -> list[Written]:
        """The calls the JSON values ``written`` make, if they are nothing but calls to bound
        tools: objects with ``name`` (or ``function``) and ``arguments`` (``parameters`` in
        Llama 3's format), OpenAI's ``{"function": {…}}``, or lists of them."""
        items = [item for value in written for item in (value if isinstance(value, list) else [value])]
        calls = []
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("function"), dict):
                item = item["function"]
            if not isinstance(item, dict):
                return []
            name = item.get("name", item.get("function"))
            arguments = item.get("arguments", item.get("parameters", {}))
            if isinstance(arguments, str):
                values = _json_values(arguments)
                arguments = values[0] if len(values) == 1 else None
            if not (isinstance(name, str) and name in self._tool_names and isinstance(arguments, dict)):
                return []
            calls.append((name, arguments))
        return calls


def _without_comments(text: str) -> str:
    """``text`` with its ``//`` and ``/* */`` comments (outside strings) turned to spaces, so
    that every other character keeps its place."""
    out = list(text)
    at, quoted = 0, False
    while at < len(text):
        char = text[at]
        if quoted:
            if char == "\\":
                at += 1
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif text.startswith("//", at) or text.startswith("/*", at):
            closer = "\n" if text[at + 1] == "/" else "*/"
            end = text.find(closer, at + 2)
            end = len(text) if end < 0 else end + (0 if closer == "\n" else len(closer))
            out[at:end] = " " * (end - at)
            at = end
            continue
        at += 1
    return "".join(out)


def _leading_json(text: str) -> tuple[list[Any], int]:
    """The JSON values at the start of ``text``, one after another, and where they end."""
    plain = _without_comments(text)
    decoder = json.JSONDecoder()
    values: list[Any] = []
    end = 0
    while (start := len(plain) - len(plain[end:].lstrip())) < len(plain):
        try:
            value, end = decoder.raw_decode(plain, start)
        except ValueError:
            break
        values.append(value)
    return values, end


def _json_values(text: str) -> list[Any]:
    """The JSON values ``text`` holds and nothing else; none when anything else is there."""
    values, end = _leading_json(text)
    return values if not text[end:].strip() else []


def _partial_opener(text: str, openers: tuple[str, ...]) -> int:
    """How many characters at the end of ``text`` may begin an opener."""
    return max(
        (size for opener in openers for size in range(1, len(opener)) if text.endswith(opener[:size])),
        default=0,
    )


class ToolCallStream:
    """One response's chunks, rewritten as they pass (see the module's docstring)."""

    def __init__(self, tool_names: frozenset[str]) -> None:
        self._calls = _Calls()
        self._written = _WrittenCalls(tool_names) if tool_names else None

    def rewrite(self, chunk: ChatGenerationChunk) -> ChatGenerationChunk:
        message = chunk.message
        if not isinstance(message, AIMessageChunk):
            return chunk
        calls = self._calls.adopt(message.tool_call_chunks)
        content = message.content
        if self._written is not None and isinstance(content, str):
            content, written = self._written.feed(content)
            calls += self._as_chunks(written)
        if content == message.content and not calls:
            return chunk
        rewritten = AIMessageChunk(
            content=content,
            additional_kwargs=message.additional_kwargs,
            response_metadata=message.response_metadata,
            usage_metadata=message.usage_metadata,
            id=message.id,
            name=message.name,
            tool_call_chunks=calls,
            chunk_position=message.chunk_position,
        )
        return ChatGenerationChunk(message=rewritten, generation_info=chunk.generation_info)

    def close(self) -> ChatGenerationChunk | None:
        """The end of the reply's text held back, and the calls it wrote."""
        if self._written is None:
            return None
        content, written = self._written.feed("", final=True)
        if not (content or written):
            return None
        return ChatGenerationChunk(
            message=AIMessageChunk(content=content, tool_call_chunks=self._as_chunks(written))
        )

    def _as_chunks(self, written: list[Written]) -> list[ToolCallChunk]:
        chunks = []
        for name, arguments in written:
            call = self._calls.new(None)
            arguments_json = json.dumps(arguments, ensure_ascii=False)
            chunks.append(tool_call_chunk(name=name, args=arguments_json, id=call.id, index=call.index))
        return chunks
