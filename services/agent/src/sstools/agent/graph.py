"""The agent graph, assembled in one place: a model node and a tool node, looping until the
model answers without calling a tool, checkpointed per conversation (thread_id).

- The model node binds only the tools the router picked for this turn (``tool_names`` in the
  run's config), in the router's order, and sees the thread trimmed to its last ~4 000 tokens.
- The tool node runs every call through the confirmation gate (:mod:`sstools.agent.gate`):
  unknown tools, bad environments and calls the role may not make are refused with typed
  events and end the turn; a write or dangerous call pauses with ``interrupt(card)`` before it
  runs. Resuming with ``{"action": "confirm", "digest": <the card's>}`` (optionally with edited
  ``args``) runs it once, or shows a new card when the edit changes what was decided;
  ``reject`` runs nothing. A read tool of the same batch is not run again on
  resume. A call past its time says ``tool_timeout``.
- A turn may start with a tool call already made (the fast path of an explicit command): it
  then goes straight to the tool node, and so to its confirmation.
"""

import json
from collections.abc import Callable, Sequence
from typing import Any

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_config
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime
from opentelemetry.trace import SpanKind, Tracer

from sstools.agent.clients.ops import OpsError
from sstools.agent.context import RunContext, run_context
from sstools.agent.fence import OUTSIDE_DATA, model_view
from sstools.agent.gate import ENDS_TURN, GateFacts, gate
from sstools.agent.planner import GROUND
from sstools.agent.planner.named import with_names_read
from sstools.agent.planner.steps import Ground
from sstools.agent.tools import Passes
from sstools.common.metrics import GenAiClientMetrics

CONTEXT_TOKENS = 4000
# The agent's graph: a thread of messages, run for one RunContext at a time.
AgentGraph = CompiledStateGraph[MessagesState, RunContext, MessagesState, MessagesState]


def _approximate_tokens(messages: list[BaseMessage]) -> int:
    """About four characters a token: enough to keep the prompt bounded, without a tokenizer."""
    return sum(len(str(message.content)) // 4 + 4 for message in messages)


def _ends_turn(messages: Sequence[BaseMessage]) -> bool:
    """Whether the last batch of tool results holds a refusal that ends the turn."""
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            return False
        if isinstance(message.artifact, dict) and message.artifact.get(ENDS_TURN):
            return True
    return False


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


def beyond_reach(messages: Sequence[BaseMessage]) -> list[RemoveMessage]:
    """The messages no later window can show (it holds at most ~4 000 tokens of earlier whole
    turns), as removals for the thread. The checkpoint is read and written whole at every step, so
    without them a long conversation costs memory, time and storage in step with its length; the
    history the person sees is convo's, not this."""
    reachable = trim_messages(
        list(messages),
        max_tokens=CONTEXT_TOKENS,
        token_counter=_approximate_tokens,
        strategy="last",
        start_on="human",
        include_system=True,
    )
    kept = {message.id for message in reachable}
    return [RemoveMessage(id=message.id) for message in messages if message.id and message.id not in kept]


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


async def _well_formed_answer(
    model: Any, messages: list[BaseMessage], config: RunnableConfig, measured: GenAiClientMetrics, name: str
) -> AIMessage:
    """The model's answer, asked again once if it came back unreadable (a broken stream, tool
    arguments that are not JSON); each call is measured."""
    problem = ""
    for _attempt in (1, 2):
        try:
            with measured.chat(name) as usage:
                answer = await model.ainvoke(messages, config)
                reported = getattr(answer, "usage_metadata", None) or {}
                usage.input, usage.output = reported.get("input_tokens"), reported.get("output_tokens")
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
    gate_facts: GateFacts,
    passes: Passes,
    tool_timeout_seconds: float,
    tracer: Tracer,
    model_name: str,
    provider_name: str,
    model_metrics: GenAiClientMetrics,
    ground: Callable[[RunContext], Ground] | None = None,
) -> AgentGraph:
    async def call_model(state: MessagesState, *, runtime: Runtime[RunContext]) -> dict[str, Any]:
        run = run_context(runtime.context)
        config = get_config()
        # for the built-in planner: the live system, as this person sees it
        GROUND.set(ground(run) if ground is not None else None)
        bound = model().bind_tools([tools[name] for name in run.tool_names if name in tools])
        window = model_view(context_window(state["messages"]))  # tool results fenced
        # For this call only, not kept in the thread: what the page and ops say of the turn (the
        # agent's own words and validated ids, as the system message), and as fenced data beside
        # the person's message what came from outside: the page's object name, the dashboards
        # fetched ahead.
        context = run.turn
        outside = [context.page_data() if context else None, run.prefetched]
        if data := [str(block) for block in outside if block]:
            outside_data = HumanMessage("\n\n".join(data), additional_kwargs={OUTSIDE_DATA: True})
            turn = _current_turn_start(window)  # before the turn's documents and message
            window = [*window[:turn], outside_data, *window[turn:]]
        if context is not None:
            window = [context.message(), *window]
        # The OpenTelemetry GenAI conventions: one client span per model call.
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name,
            "gen_ai.request.model": model_name,
        }
        with tracer.start_as_current_span(
            f"chat {model_name}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            answer = await _well_formed_answer(bound, window, config, model_metrics, model_name)
            environments = context.environments if context is not None else ()
            for call in answer.tool_calls:  # a dashboard or environment the model gave by name
                call["args"] = await with_names_read(call["name"], call["args"], environments, GROUND.get())
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
        """A refused call ends the turn: the model does not get to try its way around the gate."""
        return END if _ends_turn(state["messages"]) else "model"

    tool_node = ToolNode(
        list(tools.values()),
        awrap_tool_call=gate(gate_facts, passes, tool_timeout_seconds),
        handle_tool_errors=_tool_error_text,
    )
    graph = StateGraph(MessagesState, context_schema=RunContext)
    graph.add_node("model", call_model)
    graph.add_node("tools", tool_node)
    graph.add_conditional_edges(START, to_tools_if_called, ["model", "tools"])
    graph.add_conditional_edges("model", after_model, ["tools", END])
    graph.add_conditional_edges("tools", after_tools, ["model", END])
    return graph.compile(checkpointer=checkpointer)
