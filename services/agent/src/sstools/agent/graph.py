"""The agent graph, assembled in one place: a model node and a tool node, looping until the
model answers without calling a tool, checkpointed per conversation (thread_id).

- The model node binds only the tools the router picked for this turn (``tool_names`` in the
  run's config), in the router's order, and sees the thread trimmed to its last ~4 000 tokens.
- The tool node runs every call through :func:`gate`: the environment is resolved (the call's
  own, the submit-time one, the page's), and a write or dangerous call pauses with
  ``interrupt(confirm_required)`` before it runs. Resuming with ``{"action": "confirm"}``
  (optionally with edited ``args``) runs it once; ``reject`` runs nothing. A read tool of the
  same batch is not run again on resume.
"""

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage, trim_messages
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
from sstools.common.policy import decide, resolve_env
from sstools.common.sql import SqlNotParsed, classify

CONTEXT_TOKENS = 4000
CONFIRM_PROMPTS = {
    "dangerous": "⚠️ Опасное действие: подтвердите / Dangerous action: please confirm",
    "guarded": "Изменение данных: подтвердите / This changes data: please confirm",
}


def _approximate_tokens(messages: list[BaseMessage]) -> int:
    """About four characters a token: enough to keep the prompt bounded, without a tokenizer."""
    return sum(len(str(message.content)) // 4 + 4 for message in messages)


def _mutating(tool_name: str, args: dict[str, Any]) -> bool:
    if tool_name != "superset_execute_sql" or not args.get("sql"):
        return False
    try:
        return not classify(str(args["sql"])).read_only
    except SqlNotParsed:
        return True  # what cannot be read is treated as a change


def confirm_payload(tool_name: str, args: dict[str, Any], env: str | None, thread_id: str) -> dict[str, Any]:
    decision = decide(tool_name, env, mutating_sql=_mutating(tool_name, args))
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


def _error(call: ToolCall, detail: dict[str, Any]) -> ToolMessage:
    return ToolMessage(
        content=json.dumps({"error": detail}, ensure_ascii=False),
        tool_call_id=call["id"],
        name=call["name"],
        status="error",
    )


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
        decision = decide(call["name"], args.get("env_id"), mutating_sql=_mutating(call["name"], args))
        if decision.needs_confirmation:
            payload = confirm_payload(
                call["name"], args, args.get("env_id"), str(configurable.get("thread_id", ""))
            )
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
            return _error(
                call, {"code": "tool_timeout", "message": f"no answer in {tool_timeout_seconds:.0f} s"}
            )

    return wrapped


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
        window = trim_messages(
            list[BaseMessage](state["messages"]),
            max_tokens=CONTEXT_TOKENS,
            token_counter=_approximate_tokens,
            strategy="last",
            start_on="human",
            include_system=True,
        )
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

    def after_model(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if getattr(last, "tool_calls", None) else END

    tool_node = ToolNode(
        list(tools.values()), awrap_tool_call=gate(tool_timeout_seconds), handle_tool_errors=_tool_error_text
    )
    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", tool_node)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", after_model, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=checkpointer)
