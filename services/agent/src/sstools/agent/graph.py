"""The agent graph, assembled in one place: a model node and a tool node, looping until the
model answers without calling a tool, checkpointed per conversation (thread_id).

- The model node binds only the tools the router picked for this turn (``tool_names`` in the
  run's config), in the router's order, and sees the thread trimmed to its last ~4 000 tokens.
- The tool node runs every call through :func:`gate`: the environment is resolved (the call's
  own, the submit-time one, the page's); a call the user's role may not make is refused
  (``permission_denied``) and ends the turn; a write or dangerous call pauses with
  ``interrupt(confirm_required)`` before it runs. Resuming with ``{"action": "confirm"}``
  (optionally with edited ``args``) runs it once; ``reject`` runs nothing. A read tool of the
  same batch is not run again on resume. A call past its time says ``tool_timeout``.
- A turn may start with a tool call already made (the fast path of an explicit command): it
  then goes straight to the tool node, and so to its confirmation.
"""

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import openai
from langchain_core.callbacks.manager import adispatch_custom_event
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    trim_messages,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, interrupt
from opentelemetry.trace import SpanKind, Tracer

from sstools.agent.clients.ops import OpsError
from sstools.agent.guard import permission_denied
from sstools.agent.prefetch import PREFETCH_KEY
from sstools.common.catalogue import Role, Tier
from sstools.common.policy import decide_call, resolve_env

CONTEXT_TOKENS = 4000
DENIED = "permission_denied"  # the artifact key marking a call the guard refused
CONFIRM_PROMPTS = {
    "dangerous": "⚠️ Опасное действие: подтвердите / Dangerous action: please confirm",
    "guarded": "Изменение данных: подтвердите / This changes data: please confirm",
}


def _approximate_tokens(messages: list[BaseMessage]) -> int:
    """About four characters a token: enough to keep the prompt bounded, without a tokenizer."""
    return sum(len(str(message.content)) // 4 + 4 for message in messages)


def confirm_payload(tool_name: str, args: dict[str, Any], thread_id: str) -> dict[str, Any]:
    decision = decide_call(tool_name, args)
    return {
        "type": "confirm_required",
        "thread_id": thread_id,
        "tool_name": tool_name,
        "tool_args": args,
        "risk": decision.tier.value,
        "risk_level": decision.risk_level.value,
        "dangerous": decision.risk_level.value == "dangerous",
        "env_context": decision.env,
        "prompt": CONFIRM_PROMPTS[decision.risk_level.value],
        "requires_confirmation": True,
    }


def _error(call: ToolCall, detail: dict[str, Any], *, denied: bool = False) -> ToolMessage:
    return ToolMessage(
        content=json.dumps({"error": detail}, ensure_ascii=False),
        tool_call_id=call["id"],
        name=call["name"],
        status="error",
        artifact={DENIED: True} if denied else None,  # not shown to the model; ends the turn
    )


def _denied_in_last_batch(messages: Sequence[BaseMessage]) -> bool:
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            return False
        if isinstance(message.artifact, dict) and message.artifact.get(DENIED):
            return True
    return False


def gate(tool_timeout_seconds: float) -> Callable[..., Awaitable[ToolMessage | Command[Any]]]:
    async def wrapped(
        request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
    ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        configurable = (request.runtime.config or {}).get("configurable", {})
        args = {
            key: value for key, value in call["args"].items() if key != "confirmed"
        }  # only the gate confirms
        schema = request.tool.args_schema if request.tool else None
        if isinstance(schema, type) and "env_id" in getattr(schema, "model_fields", {}):
            env = resolve_env(args.get("env_id"), configurable.get("env_id"), configurable.get("ui_env_id"))
            if env:
                args["env_id"] = env
        decision = decide_call(call["name"], args)
        role = configurable.get("user_role")
        if role is not None and not decision.allows(Role(role)):  # before any confirmation
            denial = permission_denied(call["name"], decision, Role(role))
            await adispatch_custom_event("permission_denied", denial)
            return _error(
                call,
                {
                    "code": "permission_denied",
                    "message": f"the {role} role may not run {call['name']}",
                    **denial,
                },
                denied=True,
            )
        if decision.needs_confirmation:
            payload = confirm_payload(call["name"], args, str(configurable.get("thread_id", "")))
            answer = interrupt(payload)
            if not isinstance(answer, dict) or answer.get("action") != "confirm":
                return _error(
                    call, {"code": "rejected", "message": "the user rejected this call; nothing was run"}
                )
            edited = answer.get("args") or {}
            args.update(
                {key: value for key, value in edited.items() if key in args or key in _fields(schema)}
            )
            if call["name"] == "superset_execute_sql":
                args["confirmed"] = True
        request = request.override(tool_call={**call, "args": args})
        try:
            return await asyncio.wait_for(execute(request), tool_timeout_seconds)
        except TimeoutError:
            writes = decision.tier is not Tier.READ
            timeout = {
                "type": "tool_timeout",
                "tool": call["name"],
                "timeout_seconds": tool_timeout_seconds,
                "is_write_tool": writes,
                "retryable": not writes,  # a write may have happened: only Superset can tell
                "message": (
                    f"no answer in {tool_timeout_seconds:.0f} s: the operation's status is unknown — "
                    "check Superset before trying again"
                    if writes
                    else f"no answer in {tool_timeout_seconds:.0f} s; asking again is safe"
                ),
            }
            await adispatch_custom_event("tool_timeout", timeout)
            return _error(call, {"code": "tool_timeout", **timeout})

    return wrapped


def _current_turn_start(messages: Sequence[BaseMessage]) -> int:
    """Where this turn began: its message, with the documents attached to it just before."""
    start = next(
        (index for index in range(len(messages) - 1, -1, -1) if isinstance(messages[index], HumanMessage)), 0
    )
    while (
        start > 0
        and isinstance(messages[start - 1], HumanMessage)
        and messages[start - 1].additional_kwargs.get("document")
    ):
        start -= 1
    return start


def context_window(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """What the model sees: this turn whole, and as much of the thread before it as fits in
    ~4 000 tokens, from the most recent back (older turns are dropped, never cut)."""
    start = _current_turn_start(messages)
    current = list(messages[start:])
    budget = CONTEXT_TOKENS - _approximate_tokens(current)
    if budget <= 0 or start == 0:
        return current
    earlier = trim_messages(
        list(messages[:start]),
        max_tokens=budget,
        token_counter=_approximate_tokens,
        strategy="last",
        start_on="human",
        include_system=True,
    )
    return earlier + current


def _fields(schema: Any) -> set[str]:
    return set(getattr(schema, "model_fields", {})) - {"tool_call_id", "confirmed"}


def tool_error_detail(error: BaseException | None) -> dict[str, Any]:
    """Why a tool raised: ops' typed refusal, or its arguments' fault."""
    if isinstance(error, OpsError):
        return error.detail
    return {"code": "invalid_arguments", "message": str(error)[:500]}


def _tool_error_text(error: Exception) -> str:
    """What the model is told when a tool raised."""
    return json.dumps({"error": tool_error_detail(error)}, ensure_ascii=False)


class ModelMalformed(Exception):
    """The model's output could not be read, twice in a row."""


async def _well_formed_answer(model: Any, messages: list[BaseMessage], config: RunnableConfig) -> AIMessage:
    """The model's answer, asked again once if it came back unreadable (a broken stream, tool
    arguments that are not JSON)."""
    problem = ""
    for _attempt in (1, 2):
        try:
            answer = await model.ainvoke(messages, config)
        except (ValueError, openai.APIResponseValidationError) as error:  # JSON that does not parse
            problem = repr(error)[:300]
            continue
        if isinstance(answer, AIMessage) and not answer.invalid_tool_calls:
            return answer
        problem = f"unreadable tool calls: {getattr(answer, 'invalid_tool_calls', answer)}"[:300]
    raise ModelMalformed(problem)


def build_graph(
    model: Callable[[], BaseChatModel],
    tools: dict[str, BaseTool],
    checkpointer: BaseCheckpointSaver[Any],
    *,
    tool_timeout_seconds: float,
    tracer: Tracer,
    model_name: str,
    provider_name: str,
) -> CompiledStateGraph[Any]:
    async def call_model(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        names = (config.get("configurable") or {}).get("tool_names") or list(tools)
        bound = model().bind_tools([tools[name] for name in names if name in tools])
        window = context_window(state["messages"])
        if prefetched := (config.get("configurable") or {}).get(PREFETCH_KEY):
            window = [SystemMessage(prefetched), *window]  # for this turn only: not kept in the thread
        # The OpenTelemetry GenAI conventions: one client span per model call.
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name,
            "gen_ai.request.model": model_name,
        }
        with tracer.start_as_current_span(
            f"chat {model_name}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            answer = await _well_formed_answer(bound, window, config)
            usage = getattr(answer, "usage_metadata", None) or {}
            if usage:
                span.set_attribute("gen_ai.usage.input_tokens", int(usage.get("input_tokens", 0)))
                span.set_attribute("gen_ai.usage.output_tokens", int(usage.get("output_tokens", 0)))
            span.set_attribute(
                "gen_ai.response.finish_reasons", ["tool_calls" if answer.tool_calls else "stop"]
            )
        return {"messages": [answer]}

    def to_tools_if_called(state: MessagesState) -> str:
        """After the model — or at the start, when the fast path brought a ready tool call."""
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else "model"

    def after_model(state: MessagesState) -> str:
        return "tools" if to_tools_if_called(state) == "tools" else END

    def after_tools(state: MessagesState) -> str:
        """A denied call ends the turn: the model does not get to try its way around the guard."""
        return END if _denied_in_last_batch(state["messages"]) else "model"

    tool_node = ToolNode(
        list(tools.values()), awrap_tool_call=gate(tool_timeout_seconds), handle_tool_errors=_tool_error_text
    )
    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", tool_node)
    graph.add_conditional_edges(START, to_tools_if_called, ["model", "tools"])
    graph.add_conditional_edges("model", after_model, ["tools", END])
    graph.add_conditional_edges("tools", after_tools, ["model", END])
    return graph.compile(checkpointer=checkpointer)
