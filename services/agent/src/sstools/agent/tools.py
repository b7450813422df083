"""The tools the model may call: native LangChain tools whose names and descriptions come
from the catalogue, whose argument models and ops endpoints are the ones each declares, and
which act through ops.

Each tool's body is one ops call on behalf of the user its run's context names
(:class:`~sstools.agent.context.RunContext`), with what the gate handed it beside the
arguments (:class:`Passes`): the call's Idempotency-Key and, for a call the person confirmed,
the gate's signed confirmation; a read tool asks again (``tool_retry``) when ops or Superset
answered with a passing failure. What ops answers is the tool's result, as JSON; what ops
refuses raises :class:`OpsError`, which the graph turns into a ``tool_error``.
"""

import asyncio
import hashlib
import json
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.callbacks.manager import adispatch_custom_event
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.runtime import get_runtime
from pydantic import create_model

from sstools.agent.clients.ops import OpsCall, OpsClient, OpsError
from sstools.agent.context import run_context
from sstools.agent.events import ToolRetryEvent
from sstools.common.catalogue import ARGS, ENDPOINTS, TOOLS, Role, ToolSpec
from sstools.common.confirmation import Confirmation, ConfirmationCodec
from sstools.common.tool_args import TaskArgs, ToolArgs

RETRY_ATTEMPTS = 3


def idempotency_key(conversation_id: str, message_id: str, call_id: str, digest: str) -> str:
    """The key ops runs a call once by: the conversation, the model's answer that asked for the
    call and the call in it, and what the person confirmed (the card's digest; empty for a call
    that needed no card). Never the server's call id alone: some servers number their calls the same in every
    answer (``functions.run_backup:0``), and a later backup would get the first one's answer back
    instead of running. The same call run again (a resume after a restart) has the same key."""
    parts = json.dumps([conversation_id, message_id, call_id, digest], ensure_ascii=False)
    return "sst-" + hashlib.sha256(parts.encode()).hexdigest()


@dataclass(frozen=True)
class Pass:
    """What the gate hands a call's tool beside its arguments: the Idempotency-Key it derived,
    and the signed confirmation of a call the person confirmed."""

    idempotency_key: str
    confirmation: str | None = None


class Passes:
    """The gate's passes, kept by conversation and tool call id (ids come from the model, so
    only the pair names a call) until the tool sends its call, once. A pass travels beside the
    call because the tool node hands a tool only the arguments its model declares. A person's
    confirmation is signed as ops checks it: for the call's user, tool, key and exact request."""

    def __init__(self, codec: ConfirmationCodec) -> None:
        self._codec = codec
        self._passes: dict[tuple[str, str], Pass] = {}

    def grant(self, thread_id: str, call_id: str, key: str, confirmation: Confirmation | None) -> None:
        signed = self._codec.sign(confirmation) if confirmation is not None else None
        self._passes[(thread_id, call_id)] = Pass(key, signed)

    def take(self, thread_id: str, call_id: str) -> Pass | None:
        """The call's pass, if it has one; after this, it has not any more."""
        return self._passes.pop((thread_id, call_id), None)


def tool_schema(args: type[ToolArgs]) -> type[ToolArgs]:
    """The catalogue's argument model as LangChain binds it: the tool call id filled in by
    LangChain, hidden from the model."""
    injected: dict[str, Any] = {"tool_call_id": (Annotated[str, InjectedToolCallId], ...)}
    return create_model(args.__name__, __base__=args, **injected)


def ops_call(tool_name: str, arguments: ToolArgs) -> OpsCall:
    """The ops request of a call, built from its validated arguments (path segments encoded)."""
    endpoint = ENDPOINTS[tool_name]
    path, params, body = endpoint.request(arguments)
    return OpsCall(endpoint.method, path, params, body)


def capabilities(role: Role | None) -> str:
    """show_capabilities answers from the catalogue itself, without ops: the tools this role may
    use somewhere (all of them when the role is unknown; ops decides every call anyway)."""
    lines = [
        f"- {spec.name}: {spec.description_en} / {spec.description_ru}"
        for spec in TOOLS
        if role is None or role.at_least(spec.policy.min_role)
    ]
    return "\n".join(lines)


def _unfinished_task(result: Any) -> str | None:
    if isinstance(result, dict) and {"id", "kind", "status"} <= set(result):
        return str(result["id"]) if result["status"] in ("queued", "running") else None
    return None


def _transient(error: OpsError) -> bool:
    return error.status in (502, 503, 504) and error.code != "superset_auth_failed"


def _ops_tool(
    spec: ToolSpec,
    ops: OpsClient,
    passes: Passes,
    task_wait_seconds: float,
    retry_backoff_seconds: float,
) -> BaseTool:
    schema = tool_schema(ARGS[spec.name])

    async def run(config: RunnableConfig, **values: Any) -> str:
        context = run_context(get_runtime().context)
        # A long operation is an ops task (a statement too, once it outlives ops' own wait):
        # wait for its end until this long after the call began, so a quick one reports its
        # result and a slow one is reported as started, with its id, well within the time limit.
        deadline = asyncio.get_running_loop().time() + task_wait_seconds
        granted = passes.take(
            str((config.get("configurable") or {}).get("thread_id", "")), values["tool_call_id"]
        )
        arguments = schema.model_validate(values)
        call = ops_call(spec.name, arguments)
        user_token = context.user_token
        # A read may be asked again when ops or Superset stumbled; a call that may change
        # something is never re-sent here (ops' idempotency key would answer a replay, but a
        # timeout's fate is not ours to guess).
        attempts = 1 if spec.may_change else RETRY_ATTEMPTS
        for attempt in range(1, attempts + 1):
            try:
                result = await ops.call(
                    call,
                    user_token,
                    idempotency_key=granted.idempotency_key if granted else None,
                    confirmation=granted.confirmation if granted else None,
                )
                break
            except OpsError as error:
                if attempt == attempts or not _transient(error):
                    raise
                retry = ToolRetryEvent(
                    tool=spec.name, attempt=attempt + 1, max_attempts=attempts, error=error.code
                )
                await adispatch_custom_event("tool_retry", retry.metadata(), config=config)
                await asyncio.sleep(retry_backoff_seconds * 2 ** (attempt - 1))
        while (task_id := _unfinished_task(result)) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.5)
            result = await ops.call(
                ops_call("get_task_status", TaskArgs.model_validate({"task_id": task_id})), user_token
            )
        return json.dumps(result, ensure_ascii=False)

    return StructuredTool.from_function(
        coroutine=run,
        name=spec.name,
        description=f"{spec.description_en} {spec.description_ru}",
        args_schema=schema,
    )


def build_tools(
    ops: OpsClient,
    passes: Passes,
    task_wait_seconds: float,
    retry_backoff_seconds: float = 0.5,
) -> dict[str, BaseTool]:
    tools: dict[str, BaseTool] = {}
    for spec in TOOLS:
        if spec.endpoint is None:  # the agent's own answer (the capabilities)

            async def show(**values: Any) -> str:
                return capabilities(run_context(get_runtime().context).user_role)

            tools[spec.name] = StructuredTool.from_function(
                coroutine=show,
                name=spec.name,
                description=spec.description_en,
                args_schema=tool_schema(ARGS[spec.name]),
            )
        else:
            tools[spec.name] = _ops_tool(spec, ops, passes, task_wait_seconds, retry_backoff_seconds)
    return tools
