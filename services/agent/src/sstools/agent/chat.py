"""One chat turn: route the message, run the graph, and turn what happens into the stream
events of the design (``token``, ``tool_start`` / ``tool_end`` / ``tool_error`` /
``tool_retry`` / ``tool_timeout``, ``confirm_required``, ``permission_denied``, ``error``, and
a final ``state``), leaving one audit record per command in convo.

A send runs alone in its Gradio session (a second one is ``BUSY``) and holds its
conversation's lock and convo lease (another tab or pod is ``BUSY``). A confirm or reject waits
up to 2 s for them (the primary stream may still be closing) and then runs only if the
checkpoint still has a pause pending — so twenty confirms run the paused tool once.
"""

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import openai
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Interrupt
from opentelemetry.trace import SpanKind, Tracer
from pydantic import BaseModel

from sstools.agent.checkpoints import CheckpointsNotReady
from sstools.agent.clients.convo import (
    AuditRecord,
    ConvoClient,
    ConvoUnavailable,
    UnknownConversation,
    UploadedFile,
    UploadNotFound,
)
from sstools.agent.clients.docparse import DocparseClient
from sstools.agent.clients.ops import OpsClient, OpsError
from sstools.agent.clients.router import Routing, ToolRouter
from sstools.agent.fastpath import fast_confirmation_tool
from sstools.agent.gate import REFUSED_EVENT
from sstools.agent.graph import ModelMalformed, tool_error_detail
from sstools.agent.planner import NEEDS_CLARIFICATION
from sstools.agent.prefetch import PREFETCH_KEY, SEARCH_TOOL, prefetch_dashboards
from sstools.agent.telemetry import TurnMetrics
from sstools.agent.tools import USER_TOKEN
from sstools.agent.uploads import UPLOAD_NOT_FOUND, fetch_uploads, read_uploads
from sstools.common.catalogue import Role

RESUME_WAIT_SECONDS = 2.0
# A role change reaches the agent's guard within this time; ops enforces it at once.
ROLE_CACHE_SECONDS = 30.0
ROLE_CACHE_ENTRIES = 10_000
# Dispatched from the graph: the gate's refusals and denials, a read's retries, a time limit.
GUARD_EVENTS = (REFUSED_EVENT, "permission_denied", "tool_retry", "tool_timeout")
# Errors that turn a command away before anything of it runs.
REFUSALS = {
    "BUSY",
    "CONFIRMATION_PENDING",
    "NOTHING_PENDING",
    "CHECKPOINT_EXPIRED",
    "NOT_READY",
    "CONVO_UNAVAILABLE",
    "PAYLOAD_TOO_LARGE",
    "INVALID_UI_CONTEXT",
    "INVALID_ENVIRONMENT",
    "INVALID_CONVERSATION_ID",
    UPLOAD_NOT_FOUND,
}
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
    session_id: str = ""  # the Gradio session: one send at a time in each
    files: tuple[str, ...] = ()  # ids of this user's uploads in convo attached to the message

    @property
    def env(self) -> str | None:
        """The environment the turn is about: the one submitted, else the page's context."""
        return self.env_id or self.ui_env_id


@dataclass(frozen=True)
class Clients:
    router: ToolRouter
    convo: ConvoClient
    ops: OpsClient
    docparse: DocparseClient


def _error(code: str, message: str) -> Event:
    return Event(message, {"type": "error", "code": code, "message": message})


def _state(state: str, **extra: Any) -> Event:
    return Event(state, {"type": "state", "state": state, **extra})


class ChatService:
    def __init__(
        self,
        graph: Callable[[], CompiledStateGraph[Any]],
        tools: Mapping[str, BaseTool],
        clients: Clients,
        model_name: str,
        tracer: Tracer,
        metrics: TurnMetrics,
        *,
        lease_ttl_seconds: int,
        service_identity: str,
        prefetch_limit: int,
    ) -> None:
        self._graph_of = graph
        self._schemas = {
            name: tool.args_schema
            for name, tool in tools.items()
            if isinstance(tool.args_schema, type) and issubclass(tool.args_schema, BaseModel)
        }
        self._router = clients.router
        self._convo = clients.convo
        self._ops = clients.ops
        self._docparse = clients.docparse
        self._prefetch_limit = prefetch_limit
        self._model_name = model_name
        self._tracer = tracer
        self._metrics = metrics
        self._lease_ttl = lease_ttl_seconds
        self._service_identity = service_identity
        self._holder = f"{socket.gethostname()}:{os.getpid()}"
        self._locks: dict[str, asyncio.Lock] = {}
        self._sessions: set[tuple[str, str]] = set()  # (user, Gradio session) sending now
        self._roles: dict[str, tuple[Role, float]] = {}  # username → role, good until

    @property
    def _graph(self) -> CompiledStateGraph[Any]:
        return self._graph_of()

    def _lock(self, conversation_id: str) -> asyncio.Lock:
        return self._locks.setdefault(conversation_id, asyncio.Lock())

    def _config(
        self, turn: Turn, tool_names: list[str] | None = None, role: Role | None = None
    ) -> RunnableConfig:
        configurable: dict[str, Any] = {
            "thread_id": turn.conversation_id,
            USER_TOKEN: turn.user_token,
            "username": turn.username,
            "env_id": turn.env_id,
            "ui_env_id": turn.ui_env_id,
        }
        if tool_names is not None:
            configurable["tool_names"] = tool_names
        if role is not None:
            configurable["user_role"] = role.value
        return {"configurable": configurable}

    async def run(self, turn: Turn) -> AsyncIterator[Event]:
        """One turn, one trace: routing, the model, the tools and what they call are its children.
        Whatever happens, the command leaves one audit record."""
        attributes = {"sstools.conversation_id": turn.conversation_id, "sstools.action": turn.action}
        started = time.monotonic()
        seen: list[Event] = []
        first_token: float | None = None
        with self._tracer.start_as_current_span("chat turn", kind=SpanKind.SERVER, attributes=attributes):
            try:
                async for event in self._run(turn):
                    if first_token is None and event.metadata["type"] == "token":
                        first_token = time.monotonic() - started
                    seen.append(event)
                    yield event
            finally:
                record = audit_record(turn, seen, time.monotonic() - started, self._service_identity)
                self._metrics.observe(record, (event.metadata for event in seen), first_token)
                await asyncio.shield(self._audit(record))

    async def refuse(self, turn: Turn, code: str, message: str) -> AsyncIterator[Event]:
        """A submit the edge could not take as it was (too big, malformed): said, and audited."""
        started = time.monotonic()
        events = [_error(code, message), _state("failed")]
        for event in events:
            yield event
        record = audit_record(turn, events, time.monotonic() - started, self._service_identity)
        self._metrics.observe(record, (event.metadata for event in events), None)
        await self._audit(record)

    async def _audit(self, record: AuditRecord) -> None:
        try:
            await self._convo.record_audit(record)
        except ConvoUnavailable as error:  # the turn is over either way; the log keeps what it was
            _log.warning("audit record not kept", extra={"error": str(error), "audit": asdict(record)})

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
        session = (turn.username, turn.session_id)
        lock = self._lock(turn.conversation_id)
        if session in self._sessions:
            yield _error("BUSY", "one message at a time: the previous one is still being answered")
            yield _state("failed")
            return
        if lock.locked():
            yield _error("BUSY", "this conversation is answering another message")
            yield _state("failed")
            return
        self._sessions.add(session)
        try:
            async with lock:
                async for event in self._with_uploads(turn):
                    yield event
        finally:
            self._sessions.discard(session)

    async def _with_uploads(self, turn: Turn) -> AsyncIterator[Event]:
        """The files the turn names, fetched from convo before anything of the turn is recorded:
        one that is not this user's upload for this conversation refuses the whole turn. Once
        the turn has run, its uploads are deleted, however it ended."""
        try:
            files = await fetch_uploads(self._convo, turn.username, turn.conversation_id, turn.files)
        except UploadNotFound:
            yield _error(
                UPLOAD_NOT_FOUND,
                "an attached file is not an upload of yours in this conversation (or it expired): "
                "upload it again",
            )
            yield _state("failed")
            return
        except ConvoUnavailable as error:
            yield _error("CONVO_UNAVAILABLE", str(error))
            yield _state("failed")
            return
        try:
            async for event in self._send(turn, files):
                yield event
        finally:
            if turn.files:
                await asyncio.shield(self._forget_uploads(turn))

    async def _forget_uploads(self, turn: Turn) -> None:
        try:
            await self._convo.delete_uploads(turn.username, turn.conversation_id, list(turn.files))
        except ConvoUnavailable as error:  # they expire by themselves; say so in the log
            _log.warning("uploads not deleted", extra={"error": str(error)})

    async def _send(self, turn: Turn, files: list[UploadedFile]) -> AsyncIterator[Event]:
        async with self._leased(turn, first_text=turn.text) as refusal:
            if refusal is not None:
                yield refusal
                yield _state("failed")
                return
            # What needs only reading runs side by side: the checkpoint (a pause pending?), the
            # router's choice, the user's role and whether the turn's environment exists.
            fast = fast_confirmation_tool(turn.text, self._schemas)
            snapshot, routing, role, unknown_env = await asyncio.gather(
                self._graph.aget_state(self._config(turn)),
                self._routing(turn, fast),
                self._role(turn),
                self._unknown_env(turn),
            )
            if unknown_env is not None:
                yield _error("INVALID_ENVIRONMENT", f"no environment {unknown_env!r} is configured")
                yield _state("failed")
                return
            if snapshot.interrupts:
                yield _error("CONFIRMATION_PENDING", "confirm or reject the pending action first")
                yield _state("needs_confirmation")
                return
            message_id = str(uuid.uuid4())
            try:  # kept before anything runs: a turn convo cannot record does not happen
                _, uploads, prefetched = await asyncio.gather(
                    self._convo.record_user_message(
                        turn.username, turn.conversation_id, message_id, turn.text
                    ),
                    read_uploads(files, self._docparse),
                    self._prefetch(turn, routing),
                )
            except ConvoUnavailable as error:
                yield _error("CONVO_UNAVAILABLE", str(error))
                yield _state("failed")
                return
            yield Event(
                "",
                {"type": "routing", "tools": routing.tools, "tier": routing.tier, "model": self._model_name},
            )
            messages: list[BaseMessage] = []
            for upload in uploads:
                if upload.problem is not None:  # said, and the message goes on without the file
                    yield Event(
                        upload.problem["message"], {"type": "error", "file": upload.name, **upload.problem}
                    )
                else:
                    messages.append(HumanMessage(upload.context, additional_kwargs={"document": upload.name}))
            messages.append(HumanMessage(turn.text, id=message_id))
            if fast is not None:  # an explicit command: its call is made, the model is not asked
                messages.append(AIMessage("", tool_calls=[fast], response_metadata={"fast_path": True}))
            config = self._config(turn, routing.tools, role)
            if prefetched is not None:
                config["configurable"][PREFETCH_KEY] = prefetched
                config["configurable"]["tool_names"] = [name for name in routing.tools if name != SEARCH_TOOL]
            async for event in self._recorded(turn, self._stream({"messages": messages}, config)):
                yield event

    async def _prefetch(self, turn: Turn, routing: Routing) -> str | None:
        env = turn.env
        if not (routing.prefetch_dashboards and self._prefetch_limit and env):
            return None
        return await prefetch_dashboards(self._ops, turn.user_token, env, self._prefetch_limit)

    async def _routing(self, turn: Turn, fast: ToolCall | None) -> Routing:
        if fast is not None:
            return Routing(tools=[fast["name"]], tier="fast-path", degraded=False)
        return await self._router.route(turn.text, turn.env, turn.object_type)

    async def _unknown_env(self, turn: Turn) -> str | None:
        """The turn's environment if ops has none of that id; None when it has, or cannot say
        now (the gate asks again for every call and refuses it then)."""
        if turn.env is None:
            return None
        try:
            known = await self._ops.environments(turn.user_token)
        except OpsError as error:
            _log.warning("environments unknown; the gate will judge each call", extra={"error": str(error)})
            return None
        return None if turn.env in known else turn.env

    async def _role(self, turn: Turn) -> Role | None:
        """The user's role for the guard, as ops said it at most ``ROLE_CACHE_SECONDS`` ago;
        unknown when ops cannot say (ops, the authority, still decides every call)."""
        now = time.monotonic()
        known = self._roles.get(turn.username)
        if known is not None and known[1] > now:
            return known[0]
        try:
            role = await self._ops.role(turn.user_token)
        except OpsError as error:
            _log.warning("user role unknown; ops alone will judge", extra={"error": str(error)})
            return None
        if len(self._roles) >= ROLE_CACHE_ENTRIES:
            self._roles = {user: entry for user, entry in self._roles.items() if entry[1] > now}
        self._roles[turn.username] = (role, now + ROLE_CACHE_SECONDS)
        return role

    @contextlib.asynccontextmanager
    async def _leased(
        self, turn: Turn, *, first_text: str | None, wait_seconds: float = 0.0
    ) -> AsyncIterator[Event | None]:
        """The conversation's lease in convo, the gate between tabs and pods: held (and renewed)
        while the turn runs, given back at its end — or left to lapse after its TTL if this
        process dies. Yields None when held, else the error saying why the turn cannot run."""
        holder = f"{self._holder}:{uuid.uuid4().hex[:12]}"
        deadline = time.monotonic() + wait_seconds
        try:
            while not await self._convo.acquire_lease(
                turn.username, turn.conversation_id, holder, self._lease_ttl, first_text=first_text
            ):
                if time.monotonic() >= deadline:
                    yield _error("BUSY", "this conversation is answering in another tab or window")
                    return
                await asyncio.sleep(0.1)
        except UnknownConversation:
            yield _error("CHECKPOINT_EXPIRED", "nothing to resume: this conversation is not known")
            return
        except ConvoUnavailable as error:
            yield _error("CONVO_UNAVAILABLE", str(error))
            return
        renewing = asyncio.create_task(self._keep_lease(turn.conversation_id, holder))
        try:
            yield None
        finally:
            renewing.cancel()
            with contextlib.suppress(ConvoUnavailable):
                await asyncio.shield(self._convo.release_lease(turn.conversation_id, holder))

    async def _keep_lease(self, conversation_id: str, holder: str) -> None:
        while True:
            await asyncio.sleep(self._lease_ttl / 3)
            try:
                await self._convo.renew_lease(conversation_id, holder, self._lease_ttl)
            except ConvoUnavailable as error:
                _log.warning("lease not renewed", extra={"error": str(error)})

    async def _resume(self, turn: Turn) -> AsyncIterator[Event]:
        lock = self._lock(turn.conversation_id)
        waited_from = time.monotonic()
        try:
            await asyncio.wait_for(lock.acquire(), RESUME_WAIT_SECONDS)
        except TimeoutError:
            yield _error("BUSY", "the conversation is still streaming; try again")
            yield _state("failed")
            return
        try:
            remaining = max(0.0, RESUME_WAIT_SECONDS - (time.monotonic() - waited_from))
            async with self._leased(turn, first_text=None, wait_seconds=remaining) as refusal:
                if refusal is not None:
                    yield refusal
                    yield _state("failed")
                    return
                async for event in self._resume_paused(turn):
                    yield event
        finally:
            lock.release()

    async def _resume_paused(self, turn: Turn) -> AsyncIterator[Event]:
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
        role = await self._role(turn)
        async for event in self._recorded(turn, self._stream(resume, self._config(turn, role=role))):
            yield event

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
        asked_back = denied = failed = False
        try:
            async for raw in self._graph.astream_events(graph_input, config, version="v2"):
                kind = raw["event"]
                if kind == "on_chain_stream" and not raw["parent_ids"]:
                    # The graph's own output: a pause shows as its ``__interrupt__`` update, so
                    # the turn need not read the checkpoint back to learn of it.
                    chunk = raw["data"].get("chunk")
                    if isinstance(chunk, dict):
                        pending.extend(chunk.get(PAUSED_KEY, ()))
                elif kind == "on_custom_event" and raw["name"] in GUARD_EVENTS:
                    data = dict(raw["data"])
                    denied |= data["type"] == "permission_denied"
                    failed |= data["type"] in ("tool_timeout", "tool_error")
                    yield Event(_guard_text(data), data)
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
                    if isinstance(raw["data"].get("error"), asyncio.CancelledError):
                        continue  # stopped by its time limit: tool_timeout says so
                    detail = tool_error_detail(raw["data"].get("error"))
                    raised = ToolMessage(
                        json.dumps({"error": detail}), tool_call_id=raw["run_id"], status="error"
                    )
                    results.append(raised)
                    yield _tool_result(raw["name"], raw["run_id"], raised)
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
        if denied:
            yield _state("denied")
        elif failed:
            yield _state("failed")
        else:
            yield _final_state(results, asked_back)


def _guard_text(data: dict[str, Any]) -> str:
    """The card's words for a guard event (its fields carry the rest)."""
    if data["type"] == "permission_denied":
        return (
            f"Недостаточно прав: {data['tool_name']} требует роль {data['required_role']} "
            f"(у вас {data['user_role']}) / Permission denied: {data['tool_name']} needs "
            f"{data['required_role']}, you are {data['user_role']}"
        )
    if data["type"] == "tool_error":  # the gate refused the call: nothing was sent to ops
        return f"{data['tool']}: {data['error']['code']} — {data['error']['message']}"
    if data["type"] == "tool_retry":
        return (
            f"{data['tool']}: попытка {data['attempt']} из {data['max_attempts']} / attempt {data['attempt']}"
        )
    return str(data["message"])  # tool_timeout carries its own words


def audit_record(
    turn: Turn, events: list[Event], latency_seconds: float, service_identity: str
) -> AuditRecord:
    """The one audit record of a command, from what its stream said."""
    kinds = {event.metadata["type"]: event.metadata for event in reversed(events)}  # first of each
    state = kinds.get("state", {})
    refused = kinds.get("error", {}).get("code") in REFUSALS
    subject: tuple[str, dict[str, Any]]
    if "permission_denied" in kinds:
        decision = "denied"
        subject = kinds["permission_denied"]["tool_name"], {}
    elif refused:
        decision, subject = "refused", ("", {})
    elif turn.action in ("confirm", "reject"):
        decision = "confirmed" if turn.action == "confirm" else "rejected"
        started = kinds.get("tool_start", {})
        subject = str(started.get("tool", "")), dict(started.get("input") or turn.edited_args)
    elif "confirm_required" in kinds:
        decision = "needs_confirmation"
        subject = kinds["confirm_required"]["tool_name"], dict(kinds["confirm_required"]["tool_args"])
    else:
        decision = "allowed"
        started = kinds.get("tool_start", {})
        subject = str(started.get("tool", "")), dict(started.get("input") or {})
    return AuditRecord(
        user=turn.username,
        conversation_id=turn.conversation_id,
        decision=decision,
        outcome=str(state.get("state", "cancelled")),
        service_identity=service_identity,
        tool_name=subject[0],
        tool_args=json.loads(json.dumps(subject[1], default=str)),
        task_id=str(state.get("task_id", "")),
        latency_seconds=latency_seconds,
    )


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
