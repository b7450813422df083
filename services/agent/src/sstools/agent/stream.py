"""The stream of a turn: what the graph does, as the events of the design (declared in
:mod:`sstools.agent.events`) — ``token``, ``tool_start`` / ``tool_end`` / ``tool_error`` /
``tool_retry`` / ``tool_timeout``, ``confirm_required``, ``permission_denied``, ``error``, and a
final ``state``."""

import asyncio
import contextlib
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import openai
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphRecursionError
from langgraph.types import Interrupt

from sstools.agent.answers import found_issues
from sstools.agent.context import RunContext
from sstools.agent.events import (
    ErrorEvent,
    EventMetadata,
    StateEvent,
    TokenEvent,
    ToolEndEvent,
    ToolErrorEvent,
    ToolStartEvent,
    TurnState,
)
from sstools.agent.gate import REFUSED_EVENT, UNCHECKED_ARGS
from sstools.agent.graph import AgentGraph, ModelMalformed, tool_error_detail
from sstools.agent.language import Lang, say
from sstools.agent.planner import NEEDS_CLARIFICATION
from sstools.agent.wording import explained
from sstools.common.catalogue import TOOLS

# Dispatched from the graph: the gate's refusals and denials, a read's retries, a time limit.
_CHANGING_TOOLS = frozenset(spec.name for spec in TOOLS if spec.may_change)
GUARD_EVENTS = (REFUSED_EVENT, "permission_denied", "tool_retry", "tool_timeout")
PAUSED_KEY = "__interrupt__"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # where a paused graph's streamed output holds its interrupts
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    """One ChatMessage of the stream: its text and its metadata (``type`` first)."""

    content: str
    metadata: dict[str, Any]

    @classmethod
    def of(cls, metadata: EventMetadata, content: str = "") -> "Event":
        return cls(content, metadata.metadata())


def error(code: str, message: str, **details: Any) -> Event:
    return Event.of(ErrorEvent(code=code, message=message, **details), message)


def state(name: TurnState, task_id: str | None = None) -> Event:
    return Event.of(StateEvent(state=name, task_id=task_id), name)


async def graph_events(
    graph: AgentGraph, graph_input: Any, config: RunnableConfig, context: RunContext
) -> AsyncIterator[Event]:
    """Run the graph for ``context`` and say what happens, ending with the turn's state."""
    text = ""
    message_id = f"partial-{uuid.uuid4().hex}"
    results: list[ToolMessage] = []
    pending: list[Interrupt] = []
    asked_back = denied = failed = False
    try:
        async for raw in graph.astream_events(graph_input, config, context=context, version="v2"):
            kind = raw["event"]
            if kind == "on_chain_stream" and not raw["parent_ids"]:
                # The graph's own output: a pause shows as its ``__interrupt__`` update, so
                # the turn need not read the checkpoint back to learn of it.
                chunk = raw["data"].get("chunk")
                if isinstance(chunk, dict):
                    pending.extend(chunk.get(PAUSED_KEY, ()))
                    results.extend(_rejections(chunk))
            elif kind == "on_custom_event" and raw["name"] in GUARD_EVENTS:
                data = dict(raw["data"])
                denied |= data["type"] == "permission_denied"
                failed |= data["type"] in ("tool_timeout", "tool_error")
                yield Event("", data)  # its words are the person's language's (in_language)
            elif kind == "on_chat_model_stream":
                piece = raw["data"]["chunk"].content
                if isinstance(piece, str) and piece:
                    text += piece
                    yield Event.of(TokenEvent(), piece)
            elif kind == "on_chat_model_end":
                text = ""  # that answer is in the checkpoint now
                asked_back = _asks_back(raw["data"].get("output"))
            elif kind == "on_tool_start":
                arguments = {k: v for k, v in (raw["data"].get("input") or {}).items() if k != "tool_call_id"}
                started = ToolStartEvent(tool=raw["name"], input=arguments, run_id=raw["run_id"])
                yield Event.of(started, raw["name"])
            elif kind == "on_tool_end":
                output = raw["data"].get("output")
                if isinstance(output, ToolMessage):
                    results.append(output)
                    yield tool_result(raw["name"], raw["run_id"], output)
            elif kind == "on_tool_error":  # the tool raised; the model is told the same
                if isinstance(raw["data"].get("error"), asyncio.CancelledError):
                    continue  # stopped by its time limit: tool_timeout says so
                detail = tool_error_detail(raw["data"].get("error"))
                raised = ToolMessage(
                    json.dumps({"error": detail}), tool_call_id=raw["run_id"], status="error"
                )
                results.append(raised)
                yield tool_result(raw["name"], raw["run_id"], raised)
    except ModelMalformed as problem:
        _log.warning("llm output malformed", extra={"error": str(problem)})
        yield error("LLM_MALFORMED", "the language model's answer could not be read, twice")
        yield state("failed")
        return
    except GraphRecursionError:  # a model (or the planner) that keeps calling tools is stopped
        _log.warning("turn stopped at the graph's step limit")
        yield error("TOO_MANY_STEPS", "the request took more steps than one turn may")
        yield state("failed")
        return
    except openai.APIError as problem:  # the model's endpoint failed even after its retry
        _log.warning("llm failed", extra={"error": repr(problem)[:300]})
        yield error("LLM_UNAVAILABLE", f"the language model failed: {type(problem).__name__}")
        yield state("failed")
        return
    except asyncio.CancelledError:
        if text:  # keep what was said: the checkpoint and the page must agree
            partial = AIMessage(text, id=message_id, additional_kwargs={"partial": True})
            with contextlib.suppress(Exception):
                await asyncio.shield(graph.aupdate_state(config, {"messages": [partial]}, as_node="model"))
        raise
    if pending:
        for paused in pending:
            payload = dict(paused.value)
            yield Event(payload.get("prompt", ""), payload)
        yield state("needs_confirmation")
        return
    if denied:
        yield state("denied")
    elif failed:
        yield state("failed")
    else:
        yield final_state(results, asked_back)


def _asks_back(answer: Any) -> bool:
    """Whether the model's answer is a question to the person: the offline planner says so; a
    language model's answer that calls nothing and ends with a question mark is one."""
    if not isinstance(answer, AIMessage):
        return False
    if answer.response_metadata.get(NEEDS_CLARIFICATION):
        return True
    return not answer.tool_calls and isinstance(answer.content, str) and answer.content.rstrip().endswith("?")


def _rejections(update: dict[str, Any]) -> list[ToolMessage]:
    """The calls a person rejected, from the tool node's update: the gate answered them without
    running the tool, so no tool event tells of them."""
    tools = update.get("tools")
    messages = tools.get("messages", []) if isinstance(tools, dict) else []
    return [
        message
        for message in messages
        if isinstance(message, ToolMessage)
        and message.status == "error"
        and _error_code(message) == "rejected"
    ]


def shown(event: Event) -> Event:
    """The event as the page gets it and the history keeps it: without what only the audit reads."""
    if UNCHECKED_ARGS not in event.metadata:
        return event
    return Event(
        event.content, {key: value for key, value in event.metadata.items() if key != UNCHECKED_ARGS}
    )


def replayed(messages: Sequence[BaseMessage], answered: ToolMessage) -> list[Event]:
    """What a call's confirmation answered, said again for a repeated confirm: its result, the
    answer that followed it, and the state — marked ``replayed``, nothing run again."""
    events = [tool_result(str(answered.name), answered.tool_call_id, answered, replayed=True)]
    after = messages[next(i for i, message in enumerate(messages) if message is answered) + 1 :]
    follow_up = next((message for message in after if isinstance(message, AIMessage)), None)
    if follow_up is not None and isinstance(follow_up.content, str) and follow_up.content:
        events.append(Event.of(TokenEvent(), follow_up.content))
    events.append(final_state([answered], asked_back=False))
    return events


def in_language(event: Event, lang: Lang) -> Event:
    """The event as the person reads it, in their language: a refusal's or a failure's cause and
    next step (the technical words kept as ``detail``), the guards' words."""
    meta = event.metadata
    kind = meta["type"]
    if kind == "error":
        detail = str(meta.get("message", ""))
        facts = {**meta, "supported": ", ".join(meta.get("supported", ())) or "—", "detail": detail}
        words = explained(str(meta.get("code", "")), lang, facts)
        return event if words is None else Event(words, {**meta, "message": words, "detail": detail})
    if kind == "tool_error":  # a call ops refused or failed, or one the gate stopped
        problem = meta.get("error") or {}
        words = explained(str(problem.get("code", "")), lang, problem)
        return Event(words or str(problem.get("message", event.content)), meta)
    if kind == "tool_timeout":
        words = explained("tool_timeout", lang, meta) or event.content
        return Event(words, {**meta, "message": words, "detail": meta.get("message", "")})
    if kind == "permission_denied":
        return Event(
            say(
                lang,
                f"Недостаточно прав: {meta['tool_name']} требует роль {meta['required_role']} "
                f"(у вас {meta['user_role']}).",
                f"Permission denied: {meta['tool_name']} needs the {meta['required_role']} role "
                f"(you are {meta['user_role']}).",
            ),
            meta,
        )
    if kind == "tool_retry":
        counted = f"{meta['attempt']}/{meta['max_attempts']}"
        return Event(
            say(lang, f"{meta['tool']}: попытка {counted}", f"{meta['tool']}: attempt {counted}"), meta
        )
    return event


def tool_result(tool: str, run_id: str, output: ToolMessage, *, replayed: bool = False) -> Event:
    content = str(output.content)
    if output.status == "error":
        try:
            problem = json.loads(content).get("error", {})
        except (ValueError, AttributeError):
            problem = {"message": content}
        if isinstance(problem.get("message"), str):  # a terminal's colours mean nothing on a page
            problem = {**problem, "message": _ANSI.sub("", problem["message"])}
        return Event.of(ToolErrorEvent(tool=tool, run_id=run_id, error=problem, replayed=replayed), content)
    try:
        parsed: Any = json.loads(content)
    except ValueError:
        parsed = content
    return Event.of(ToolEndEvent(tool=tool, run_id=run_id, output=parsed, replayed=replayed), content)


def final_state(results: list[ToolMessage], asked_back: bool) -> Event:
    """The turn's badge, as truthful as its results: a rejected call is ``cancelled`` (nothing
    ran), a check that found problems ``issues_found``, never ``success``. A task the turn
    started keeps its id however quickly it ended: the page shows it, the audit keeps it (one
    the turn only read the status of is not its own)."""
    errors = [result for result in results if result.status == "error"]
    if errors and all(_error_code(result) == "rejected" for result in errors):
        return state("cancelled")
    if errors:
        return state("failed")
    task: str | None = None
    for result in results:
        parsed = _parsed(result)
        if isinstance(parsed, dict) and {"id", "kind", "status"} <= set(parsed):
            if parsed["status"] in ("queued", "running"):
                return state("started", task_id=parsed["id"])
            if parsed["status"] == "failed":
                return state("failed", task_id=parsed["id"])
            if _started_by(result):
                task = parsed["id"]
    if any(found_issues(_parsed(result)) for result in results):
        return state("issues_found", task)
    return state("needs_clarification" if asked_back else "success", task)


def _started_by(result: ToolMessage) -> bool:
    """Whether the call that gave ``result`` may have started its task (a change), not read it."""
    return result.name in _CHANGING_TOOLS


def _parsed(result: ToolMessage) -> Any:
    try:
        return json.loads(str(result.content))
    except ValueError:
        return None


def _error_code(result: ToolMessage) -> str | None:
    parsed = _parsed(result)
    error = parsed.get("error") if isinstance(parsed, dict) else None
    return str(error.get("code")) if isinstance(error, dict) else None
