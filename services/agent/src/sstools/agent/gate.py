"""The confirmation gate: every tool call the model (or the fast path) makes passes here before
it runs, in the tool node (``ToolNode(awrap_tool_call=...)``).

In order: a name the catalogue does not have is refused (``UNKNOWN_TOOL``); a call batched with
one that may change something waits its turn (``ONE_CHANGE_AT_A_TIME``); the environment is
resolved (the call's own, the submit-time one, the page's) and every environment the call names
must be a valid id of a configured environment (``INVALID_ENVIRONMENT``); the arguments must
fit the tool's model; SQL is judged by ops in the target database's own dialect; a call the
user's role may not make is refused (``permission_denied``); a write or dangerous call pauses
with ``interrupt(confirm_required)``, and once confirmed runs with the gate's word
(:class:`~sstools.agent.tools.ConfirmedCalls`). Each refusal is a typed stream event, and the security
ones end the turn, so a model cannot try its way around them. Nothing reaches ops before all of
this held.
"""

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from langchain_core.callbacks.manager import adispatch_custom_event
from langchain_core.messages import ToolCall, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, interrupt
from pydantic import ValidationError

from sstools.agent.clients.ops import OpsError
from sstools.agent.guard import permission_denied
from sstools.agent.tools import ConfirmedCalls
from sstools.common.catalogue import Role, Tier, tool_names
from sstools.common.catalogue import tool as catalogue_tool
from sstools.common.policy import Decision, decide, resolve_env
from sstools.common.tool_args import ARGS, ENV_FIELDS, SqlArgs, ToolArgs, is_env_id

ENDS_TURN = "ends_turn"  # the artifact key of a refusal after which the model is not asked again
REFUSED_EVENT = "tool_refused"  # the custom event a refusal is dispatched as (a ``tool_error``)
CONFIRM_PROMPTS = {
    "dangerous": "⚠️ Опасное действие: подтвердите / Dangerous action: please confirm",
    "guarded": "Изменение данных: подтвердите / This changes data: please confirm",
}
_KNOWN_TOOLS = frozenset(tool_names())
Execute = Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]


class GateFacts(Protocol):
    """What the gate asks ops, under the user's own token."""

    async def environments(self, user_token: str) -> frozenset[str]: ...

    async def sql_read_only(self, user_token: str, args: SqlArgs) -> bool: ...


class Refused(Exception):
    """A call that does not get past the gate; ``code`` is its stream error code."""

    def __init__(self, code: str, message: str, *, ends_turn: bool = True) -> None:
        super().__init__(message)
        self.code = code
        self.ends_turn = ends_turn


def confirm_payload(
    tool_name: str, args: dict[str, Any], thread_id: str, decision: Decision
) -> dict[str, Any]:
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


def error_message(call: ToolCall, detail: dict[str, Any], *, ends_turn: bool = False) -> ToolMessage:
    return ToolMessage(
        content=json.dumps({"error": detail}, ensure_ascii=False),
        tool_call_id=call["id"],
        name=call["name"],
        status="error",
        artifact={ENDS_TURN: True} if ends_turn else None,  # not shown to the model
    )


async def _checked_arguments(
    call: ToolCall, args: dict[str, Any], facts: GateFacts, user_token: str
) -> ToolArgs:
    """The call's arguments validated by the tool's model; every environment it names is a
    configured one."""
    for field in ENV_FIELDS:
        value = args.get(field)
        if value is None:
            continue
        if not is_env_id(value):
            raise Refused("INVALID_ENVIRONMENT", f"{field}: {str(value)[:80]!r} is not an environment id")
        try:
            known = await facts.environments(user_token)
        except OpsError as error:
            raise Refused(error.code, f"the environments could not be listed: {error}") from None
        if value not in known:
            raise Refused(
                "INVALID_ENVIRONMENT",
                f"{field}: no environment {value!r}; configured: {', '.join(sorted(known)) or 'none'}",
            )
    try:
        return ARGS[call["name"]].model_validate(args)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in issue['loc']) or 'arguments'}: {issue['msg']}"
            for issue in error.errors()
        )
        raise Refused("invalid_arguments", problems[:500], ends_turn=False) from None


async def _decision(
    name: str, arguments: ToolArgs, role: Role | None, facts: GateFacts, user_token: str
) -> Decision:
    """The policy for this call; SQL counts as a change unless ops read it as a query."""
    env = getattr(arguments, "env_id", None)
    as_read = decide(name, env)
    if not isinstance(arguments, SqlArgs) or (role is not None and not as_read.allows(role)):
        return as_read  # for SQL the role may not run at all, the denial names the lowest that may
    try:
        read_only = await facts.sql_read_only(user_token, arguments)
    except OpsError as error:
        raise Refused(error.code, f"the statement could not be judged: {error}", ends_turn=False) from None
    return decide(name, env, mutating_sql=not read_only)


def _shown(arguments: ToolArgs) -> dict[str, Any]:
    """The arguments as the card shows them and the tool receives them: as given, validated."""
    return arguments.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"confirmed"})


def _may_change(name: str) -> bool:
    """Whether a call of this tool may need a confirmation, by the catalogue alone."""
    spec = catalogue_tool(name)
    return spec.policy.tier is not Tier.READ or spec.mutating_sql_policy is not None


def _batch(request: ToolCallRequest) -> list[ToolCall]:
    """The calls the model made together with this one (its AI message's)."""
    state = request.state if isinstance(request.state, dict) else {}
    for message in reversed(state.get("messages", [])):
        calls: list[ToolCall] = getattr(message, "tool_calls", None) or []
        if any(call["id"] == request.tool_call["id"] for call in calls):
            return calls
    return [request.tool_call]


def _waits_its_turn(request: ToolCallRequest) -> bool:
    """A batch that holds a call which may change something runs that one call alone: the tool
    node runs a batch's calls side by side, and a pause for confirmation would cut the others
    short, their events lost. The first such call goes on; every other call of the batch is
    refused, typed, and the model may ask again."""
    batch = _batch(request)
    changing = [call["id"] for call in batch if call["name"] in _KNOWN_TOOLS and _may_change(call["name"])]
    return len(batch) > 1 and bool(changing) and request.tool_call["id"] != changing[0]


def gate(
    facts: GateFacts, confirmed_calls: ConfirmedCalls, tool_timeout_seconds: float, user_token_key: str
) -> Callable[[ToolCallRequest, Execute], Awaitable[ToolMessage | Command[Any]]]:
    async def judged(
        request: ToolCallRequest, configurable: dict[str, Any]
    ) -> tuple[dict[str, Any], Decision] | ToolMessage:
        """The call's arguments and decision, confirmed where it needs that; or why not."""
        call = request.tool_call
        user_token = str(configurable.get(user_token_key, ""))
        name = call["name"]
        if name not in _KNOWN_TOOLS:
            raise Refused("UNKNOWN_TOOL", f"there is no tool named {name[:80]!r}")
        if _waits_its_turn(request):
            raise Refused(
                "ONE_CHANGE_AT_A_TIME",
                "not run: a call that may change something goes alone; ask for this one after it",
                ends_turn=False,
            )
        args = {key: value for key, value in call["args"].items() if key != "confirmed"}  # the gate's
        if "env_id" in ARGS[name].model_fields:
            env = resolve_env(args.get("env_id"), configurable.get("env_id"), configurable.get("ui_env_id"))
            if env:
                args["env_id"] = env
        arguments = await _checked_arguments(call, args, facts, user_token)
        role = Role(configurable["user_role"]) if configurable.get("user_role") else None
        decision = await _decision(name, arguments, role, facts, user_token)
        if role is not None and not decision.allows(role):  # before any confirmation
            denial = permission_denied(name, decision, role)
            await adispatch_custom_event("permission_denied", denial)
            detail = {"code": "permission_denied", "message": f"the {role} role may not run {name}", **denial}
            return error_message(call, detail, ends_turn=True)
        shown = _shown(arguments)
        if not decision.needs_confirmation:
            return shown, decision
        answer = interrupt(confirm_payload(name, shown, str(configurable.get("thread_id", "")), decision))
        if not isinstance(answer, dict) or answer.get("action") != "confirm":
            return error_message(
                call, {"code": "rejected", "message": "the user rejected this call; nothing was run"}
            )
        edited = {key: value for key, value in (answer.get("args") or {}).items() if key != "confirmed"}
        arguments = await _checked_arguments(call, {**shown, **edited}, facts, user_token)
        confirmed_calls.add(str(configurable.get("thread_id", "")), str(call["id"]))
        return _shown(arguments), decision

    async def wrapped(request: ToolCallRequest, execute: Execute) -> ToolMessage | Command[Any]:
        call = request.tool_call
        configurable = (request.runtime.config or {}).get("configurable", {})
        try:
            outcome = await judged(request, configurable)
        except Refused as refusal:
            detail = {"code": refusal.code, "message": str(refusal)}
            event = {"type": "tool_error", "tool": call["name"], "run_id": call["id"], "error": detail}
            await adispatch_custom_event(REFUSED_EVENT, event)
            return error_message(call, detail, ends_turn=refusal.ends_turn)
        if isinstance(outcome, ToolMessage):
            return outcome
        args, decision = outcome
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
            return error_message(call, {"code": "tool_timeout", **timeout})
        finally:
            # a confirmation is good for this one run
            confirmed_calls.take(str(configurable.get("thread_id", "")), str(call["id"]))

    return wrapped
