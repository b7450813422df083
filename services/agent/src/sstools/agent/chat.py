"""One chat turn: route the message, run the graph, and turn what happens into the stream
events of the design (``token``, ``tool_start`` / ``tool_end`` / ``tool_error``,
``confirm_required``, ``error``, and a final ``state``).

A turn on a conversation holds that conversation's lock; a confirm or reject waits up to 2 s
for it (the primary stream may still be closing) and then runs only if the checkpoint still
has a pause pending — so twenty confirms run the paused tool once.
"""

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import openai
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Interrupt
from opentelemetry.trace import SpanKind, Tracer

from sstools.agent.checkpoints import CheckpointsNotReady
from sstools.agent.clients.convo import ConvoClient, ConvoUnavailable
from sstools.agent.clients.router import ToolRouter
from sstools.agent.graph import ModelMalformed, tool_error_detail
from sstools.agent.planner import NEEDS_CLARIFICATION

RESUME_WAIT_SECONDS = 2.0
PAUSED_KEY = "__interrupt__"  # where a paused graph's streamed output holds its interrupts
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    """One ChatMessage of the stream: its text and its metadata (``type`` first)."""

    content: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    username: str
    user_token: str
    conversation_id: str
    text: str = ""
    action: str = "send"  # send | confirm | reject
    env_id: str | None = None
    ui_env_id: str | None = None
    object_type: str | None = None
    edited_args: dict[str, Any] = field(default_factory=dict)


def _error(code: str, message: str) -> Event:
    return Event(message, {"type": "error", "code": code, "message": message})


def _state(state: str, **extra: Any) -> Event:
    return Event(state, {"type": "state", "state": state, **extra})


class ChatService:
    def __init__(
        self,
        graph: Callable[[], CompiledStateGraph[Any]],
        router: ToolRouter,
        convo: ConvoClient,
        model_name: str,
        tracer: Tracer,
    ) -> None:
        self._graph_of = graph
        self._router = router
        self._convo = convo
        self._model_name = model_name
        self._tracer = tracer
        self._locks: dict[str, asyncio.Lock] = {}

    @property
    def _graph(self) -> CompiledStateGraph[Any]:
        return self._graph_of()

    def _lock(self, conversation_id: str) -> asyncio.Lock:
        return self._locks.setdefault(conversation_id, asyncio.Lock())

    def _config(self, turn: Turn, tool_names: list[str] | None = None) -> RunnableConfig:
        configurable: dict[str, Any] = {
            "thread_id": turn.conversation_id,
            "user_token": turn.user_token,
            "username": turn.username,
            "env_id": turn.env_id,
            "ui_env_id": turn.ui_env_id,
        }
        if tool_names is not None:
            configurable["tool_names"] = tool_names
        return {"configurable": configurable}

    async def run(self, turn: Turn) -> AsyncIterator[Event]:
        """One turn, one trace: routing, the model, the tools and what they call are its children."""
        attributes = {"sstools.conversation_id": turn.conversation_id, "sstools.action": turn.action}
        with self._tracer.start_as_current_span("chat turn", kind=SpanKind.SERVER, attributes=attributes):
            async for event in self._run(turn):
                yield event

    async def _run(self, turn: Turn) -> AsyncIterator[Event]:
        try:
            self._graph_of()
        except CheckpointsNotReady as error:
            yield _error("NOT_READY", str(error))
            yield _state("failed")
            return
        if turn.action in ("confirm", "reject"):
            async for event in self._resume(turn):
                yield event
            return
        lock = self._lock(turn.conversation_id)
        if lock.locked():
            yield _error("BUSY", "this conversation is answering another message")
            yield _state("failed")
            return
        async with lock:
            if (await self._graph.aget_state(self._config(turn))).interrupts:
                yield _error("CONFIRMATION_PENDING", "confirm or reject the pending action first")
                yield _state("needs_confirmation")
                return
            message_id = str(uuid.uuid4())
            try:  # kept before anything runs: a turn convo cannot record does not happen
                await self._convo.record_user_message(
                    turn.username, turn.conversation_id, message_id, turn.text
                )
            except ConvoUnavailable as error:
                yield _error("CONVO_UNAVAILABLE", str(error))
                yield _state("failed")
                return
            routing = await self._router.route(turn.text, turn.env_id or turn.ui_env_id, turn.object_type)
            yield Event(
                "",
                {
                    "type": "routing",
                    "tools": routing.tools,
                    "tier": routing.tier,
                    "model": self._model_name,
                },
            )
            message = HumanMessage(turn.text, id=message_id)
            config = self._config(turn, routing.tools)
            async for event in self._recorded(turn, self._stream({"messages": [message]}, config)):
                yield event

    async def _resume(self, turn: Turn) -> AsyncIterator[Event]:
        lock = self._lock(turn.conversation_id)
        try:
            await asyncio.wait_for(lock.acquire(), RESUME_WAIT_SECONDS)
        except TimeoutError:
            yield _error("BUSY", "the conversation is still streaming; try again")
            yield _state("failed")
            return
        try:
            config = self._config(turn)
            snapshot = await self._graph.aget_state(config)
            if not snapshot.values:
                yield _error("CHECKPOINT_EXPIRED", "nothing to resume: this conversation has no saved state")
                yield _state("failed")
                return
            if not snapshot.interrupts:
                yield _error(
                    "NOTHING_PENDING", "no action is waiting for confirmation (already confirmed or rejected)"
                )
                yield _state("failed")
                return
            answer: dict[str, Any] = {"action": turn.action}
            if turn.action == "confirm" and turn.edited_args:
                answer["args"] = turn.edited_args
            resume: Command[Any] = Command(resume={pending.id: answer for pending in snapshot.interrupts})
            async for event in self._recorded(turn, self._stream(resume, config)):
                yield event
        finally:
            lock.release()

    async def _recorded(self, turn: Turn, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """Pass the events on, then keep the answer in convo: its text, what the tools did and
        the final state; cut short (``partial``) when the person cancelled."""
        text = ""
        kept: list[dict[str, Any]] = []
        try:
            async for event in events:
                if event.metadata["type"] == "token":
                    text += event.content
                else:
                    kept.append({key: value for key, value in event.metadata.items() if key != "output"})
                yield event
        except asyncio.CancelledError:
            await asyncio.shield(self._keep_answer(turn, text, kept, partial=True))
            raise
        await self._keep_answer(turn, text, kept, partial=False)

    async def _keep_answer(
        self, turn: Turn, text: str, events: list[dict[str, Any]], *, partial: bool
    ) -> None:
        try:
            await self._convo.record_answer(
                turn.username,
                turn.conversation_id,
                str(uuid.uuid4()),
                text,
                {"events": json.loads(json.dumps(events, default=str))},
                partial=partial,
            )
        except ConvoUnavailable as error:  # the answer stays in the checkpoint; say so in the log
            _log.warning("answer not kept in convo", extra={"error": str(error)})

    async def _stream(self, graph_input: Any, config: RunnableConfig) -> AsyncIterator[Event]:
        text = ""
        message_id = f"partial-{uuid.uuid4().hex}"
        results: list[ToolMessage] = []
        pending: list[Interrupt] = []
        asked_back = False
        try:
            async for raw in self._graph.astream_events(graph_input, config, version="v2"):
                kind = raw["event"]
                if kind == "on_chain_stream" and not raw["parent_ids"]:
                    # The graph's own output: a pause shows as its ``__interrupt__`` update, so
                    # the turn need not read the checkpoint back to learn of it.
                    chunk = raw["data"].get("chunk")
                    if isinstance(chunk, dict):
                        pending.extend(chunk.get(PAUSED_KEY, ()))
                elif kind == "on_chat_model_stream":
                    piece = raw["data"]["chunk"].content
                    if isinstance(piece, str) and piece:
                        text += piece
                        yield Event(piece, {"type": "token"})
                elif kind == "on_chat_model_end":
                    text = ""  # that answer is in the checkpoint now
                    answer = raw["data"].get("output")
                    asked_back = bool(getattr(answer, "response_metadata", {}).get(NEEDS_CLARIFICATION))
                elif kind == "on_tool_start":
                    arguments = {
                        k: v for k, v in (raw["data"].get("input") or {}).items() if k != "tool_call_id"
                    }
                    yield Event(
                        raw["name"],
                        {
                            "type": "tool_start",
                            "tool": raw["name"],
                            "input": arguments,
                            "run_id": raw["run_id"],
                        },
                    )
                elif kind == "on_tool_end":
                    output = raw["data"].get("output")
                    if isinstance(output, ToolMessage):
                        results.append(output)
                        yield _tool_result(raw["name"], raw["run_id"], output)
                elif kind == "on_tool_error":  # the tool raised; the model is told the same
                    detail = tool_error_detail(raw["data"].get("error"))
                    failed = ToolMessage(
                        json.dumps({"error": detail}), tool_call_id=raw["run_id"], status="error"
                    )
                    results.append(failed)
                    yield _tool_result(raw["name"], raw["run_id"], failed)
        except ModelMalformed as error:
            _log.warning("llm output malformed", extra={"error": str(error)})
            yield _error("LLM_MALFORMED", "the language model's answer could not be read, twice")
            yield _state("failed")
            return
        except openai.APIError as error:  # the model's endpoint failed even after its retry
            _log.warning("llm failed", extra={"error": repr(error)[:300]})
            yield _error("LLM_UNAVAILABLE", f"the language model failed: {type(error).__name__}")
            yield _state("failed")
            return
        except asyncio.CancelledError:
            if text:  # keep what was said: the checkpoint and the page must agree
                partial = AIMessage(text, id=message_id, additional_kwargs={"partial": True})
                with contextlib.suppress(Exception):
                    await asyncio.shield(
                        self._graph.aupdate_state(config, {"messages": [partial]}, as_node="model")
                    )
            raise
        if pending:
            for paused in pending:
                payload = dict(paused.value)
                yield Event(payload.get("prompt", ""), payload)
            yield _state("needs_confirmation")
            return
        yield _final_state(results, asked_back)


def _tool_result(tool: str, run_id: str, output: ToolMessage) -> Event:
    content = str(output.content)
    if output.status == "error":
        try:
            error = json.loads(content).get("error", {})
        except (ValueError, AttributeError):
            error = {"message": content}
        return Event(content, {"type": "tool_error", "tool": tool, "run_id": run_id, "error": error})
    try:
        parsed: Any = json.loads(content)
    except ValueError:
        parsed = content
    return Event(content, {"type": "tool_end", "tool": tool, "run_id": run_id, "output": parsed})


def _final_state(results: list[ToolMessage], asked_back: bool) -> Event:
    if any(result.status == "error" for result in results):
        return _state("failed")
    for result in results:
        try:
            parsed = json.loads(str(result.content))
        except ValueError:
            continue
        if isinstance(parsed, dict) and {"id", "kind", "status"} <= set(parsed):
            if parsed["status"] in ("queued", "running"):
                return _state("started", task_id=parsed["id"])
            if parsed["status"] == "failed":
                return _state("failed", task_id=parsed["id"])
    return _state("needs_clarification" if asked_back and not results else "success")
