"""The confirmation gate: every tool call the model (or the fast path) makes passes here before
it runs, in the tool node (``ToolNode(awrap_tool_call=...)``).

In order: a name the catalogue does not have is refused (``UNKNOWN_TOOL``); a call batched with
one that may change something waits its turn (``ONE_CHANGE_AT_A_TIME``); the environment is
resolved (the call's own, the submit-time one, the page's) and every environment the call names
must be a valid id of a configured environment (``INVALID_ENVIRONMENT``); the arguments must
fit the tool's model; SQL is judged by ops in the target database's own dialect; a call the
user's role may not make is refused (``permission_denied``, with what they may ask instead).
Each refusal is a typed stream event, and the security ones end the turn, so a model cannot try
its way around them. Nothing reaches ops before all of this held.

A write or dangerous call pauses with ``interrupt(card)``: the card names the call (its id) and
carries a digest of everything it shows — tool, arguments, environment, production, risk,
required role, the dashboards it is about by title (as ops reads them now) and what will
change. The answer must name that digest. The resumed call runs exactly the card's
arguments; edited ones are validated and decided again, and an edit that changes anything the
card shows (any argument, and so the environment, tier, risk, role or object) is answered with a
new card showing the edited call, never an execution: only a card the person saw runs.
Every call that runs is handed its Idempotency-Key, derived from the conversation, the model's
answer that asked, the call and the card the person confirmed, if any; once
confirmed, it also carries a confirmation signed for its user, tool, key and exact request
(:class:`~sstools.agent.tools.Passes`), which ops requires.
"""

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from langchain_core.callbacks.manager import adispatch_custom_event
from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, interrupt
from pydantic import ValidationError

from sstools.agent.changes import change
from sstools.agent.clients.ops import OpsCall, OpsError
from sstools.agent.context import RunContext, run_context
from sstools.agent.events import (
    Alternative,
    ConfirmRequiredEvent,
    DashboardNamed,
    PermissionDeniedEvent,
    Subject,
    ToolErrorEvent,
    ToolTimeoutEvent,
)
from sstools.agent.language import Lang, say
from sstools.agent.tools import Passes, idempotency_key, ops_call
from sstools.common.catalogue import (
    ALTERNATIVES,
    ALWAYS_OFFERED,
    ARGS,
    EXAMPLE_PROMPTS,
    Role,
    Tier,
    tool_names,
)
from sstools.common.catalogue import tool as catalogue_tool
from sstools.common.confirmation import Confirmation
from sstools.common.policy import Decision, decide, resolve_env
from sstools.common.tool_args import ENV_FIELDS, SqlArgs, ToolArgs, is_env_id

ENDS_TURN = "ends_turn"  # the artifact key of a refusal after which the model is not asked again
# The artifact key of a call's result that a person answered: the card's digest and the answer,
# so a repeated confirm of the same card gets the same result, not a second run.
ANSWERED = "answered"
REFUSED_EVENT = "tool_refused"  # the custom event a refusal is dispatched as (a ``tool_error``)
# A refused call's arguments as the model wrote them, which no check passed: the audit records
# them; the stream and the stored history never carry them (a page, or Gradio's client, could
# take a crafted value for a file to fetch).
UNCHECKED_ARGS = "unchecked_args"
# Each in Russian and English: a card speaks the language of the turn that made it.
CONFIRM_PROMPTS = {
    "dangerous": ("⚠️ Опасное действие: подтвердите", "⚠️ Dangerous action: please confirm"),
    "guarded": ("Изменение данных: подтвердите", "This changes data: please confirm"),
    # Only a card whose edit made a change a read (SQL edited into a query): still a new card.
    "safe": ("Подтвердите", "Please confirm"),
}
_KNOWN_TOOLS = frozenset(tool_names())
Execute = Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]


class GateFacts(Protocol):
    """What the gate asks ops, under the user's own token."""

    async def environments(self, user_token: str) -> Mapping[str, bool]: ...

    async def sql_read_only(self, user_token: str, args: SqlArgs) -> bool: ...

    def fingerprint(self, call: OpsCall) -> str: ...

    async def dashboard_titles(
        self, user_token: str, env_id: str, dashboard_ids: list[int]
    ) -> Mapping[int, str]: ...


class Refused(Exception):
    """A call that does not get past the gate; ``code`` is its stream error code."""

    def __init__(self, code: str, message: str, *, ends_turn: bool = True, **facts: str) -> None:
        super().__init__(message)
        self.code = code
        self.ends_turn = ends_turn
        self.facts = facts  # what the person's words name: the environment that is not there


def alternatives(tool_name: str, role: Role, decision: Decision, lang: Lang) -> list[Alternative]:
    """The catalogue's suggestions for a denied tool that this role may run here, as prompts in
    the person's language."""
    offered = [
        name
        for name in ALTERNATIVES.get(tool_name, ())
        if decide(name, decision.env, production=decision.production).allows(role)
    ]
    return [
        Alternative(action=name, prompt=say(lang, *EXAMPLE_PROMPTS[name]))
        for name in offered or [ALWAYS_OFFERED]
    ]


def permission_denied(
    tool_name: str, decision: Decision, role: Role, lang: Lang, arguments: ToolArgs | None = None
) -> dict[str, Any]:
    """The ``permission_denied`` event of data model §3, with the arguments tried (the audit
    keeps which environment it was)."""
    return PermissionDeniedEvent(
        tool_name=tool_name,
        required_role=decision.required_role.value,
        user_role=role.value,
        env_context=decision.env,
        alternatives=alternatives(tool_name, role, decision, lang),
        tool_args=shown_arguments(arguments) if arguments is not None else {},
    ).metadata()


def card_digest(card: Mapping[str, Any]) -> str:
    """The digest of everything a card shows (all of it but the digest itself)."""
    shown = {key: value for key, value in card.items() if key != "digest"}
    canonical = json.dumps(shown, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


async def subject_of(facts: GateFacts, user_token: str, arguments: ToolArgs) -> Subject | None:
    """The dashboards a call is about, each with its title in the environment they are read from
    (the source of a deploy or migration, defaults included, else the call's own); None for a
    call about none."""
    args = arguments.model_dump()
    ids = list(args.get("dashboard_ids") or ([args["dashboard_id"]] if args.get("dashboard_id") else []))
    env = args.get("source_env") or args.get("env_id")
    if not ids or not env:
        return None
    titles = await facts.dashboard_titles(user_token, str(env), ids)
    return Subject(
        env_id=env, dashboards=[DashboardNamed(id=board, title=titles.get(board)) for board in ids]
    )


def confirm_card(
    call_id: str,
    tool_name: str,
    arguments: ToolArgs,
    thread_id: str,
    decision: Decision,
    lang: Lang,
    subject: Subject | None = None,
) -> dict[str, Any]:
    """The ``confirm_required`` event: what the person is asked to confirm, and its digest."""
    args = shown_arguments(arguments)
    every = arguments.model_dump()  # what runs, defaults included, by field name
    card = ConfirmRequiredEvent(
        thread_id=thread_id,
        call_id=call_id,
        tool_name=tool_name,
        tool_args=args,
        env_id=args.get("env_id"),
        env_context=decision.env,
        production=decision.production,
        risk=decision.tier.value,
        risk_level=decision.risk_level.value,
        required_role=decision.required_role.value,
        dangerous=decision.risk_level.value == "dangerous",
        prompt=say(lang, *CONFIRM_PROMPTS[decision.risk_level.value]),
        subject=subject,
        change=change(tool_name, lang, every, subject.model_dump()["dashboards"] if subject else ()),
        lang=lang,  # a resume runs the gate again: the card must come out the same, words too
        requires_confirmation=True,
    ).metadata()
    return {**card, "digest": card_digest(card)}


def error_message(
    call: ToolCall, detail: dict[str, Any], *, ends_turn: bool = False, answered: dict[str, str] | None = None
) -> ToolMessage:
    artifact: dict[str, Any] = {ENDS_TURN: True} if ends_turn else {}
    if answered is not None:
        artifact[ANSWERED] = answered
    return ToolMessage(
        content=json.dumps({"error": detail}, ensure_ascii=False),
        tool_call_id=call["id"],
        name=call["name"],
        status="error",
        artifact=artifact or None,  # not shown to the model
    )


async def checked_arguments(
    tool_name: str, args: dict[str, Any], environments: Callable[[], Awaitable[Mapping[str, bool]]]
) -> ToolArgs:
    """The call's arguments validated by the tool's model; every environment it names is a
    configured one. ``Refused`` says what is wrong."""
    for field in ENV_FIELDS:
        value = args.get(field)
        if value is None:
            continue
        if not is_env_id(value):
            raise Refused(
                "INVALID_ENVIRONMENT",
                f"{field}: {str(value)[:80]!r} is not an environment id",
                env_id=str(value)[:80],
            )
        try:
            known = await environments()
        except OpsError as error:
            raise Refused(error.code, f"the environments could not be listed: {error}") from None
        if value not in known:
            raise Refused(
                "INVALID_ENVIRONMENT",
                f"{field}: no environment {value!r}; configured: {', '.join(sorted(known)) or 'none'}",
                env_id=value,
            )
    try:
        return ARGS[tool_name].model_validate(args)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in issue['loc']) or 'arguments'}: {issue['msg']}"
            for issue in error.errors()
        )
        raise Refused("invalid_arguments", problems[:500], ends_turn=False) from None


async def _decision(
    name: str, arguments: ToolArgs, role: Role | None, facts: GateFacts, user_token: str
) -> Decision:
    """The policy for this call, with its environment as configured; SQL counts as a change
    unless ops read it as a query."""
    env: str | None = getattr(arguments, "env_id", None)
    production = env is not None and (await facts.environments(user_token)).get(env, False)
    as_read = decide(name, env, production=production)
    if not isinstance(arguments, SqlArgs) or (role is not None and not as_read.allows(role)):
        return as_read  # for SQL the role may not run at all, the denial names the lowest that may
    try:
        read_only = await facts.sql_read_only(user_token, arguments)
    except OpsError as error:
        raise Refused(error.code, f"the statement could not be judged: {error}", ends_turn=False) from None
    return decide(name, env, production=production, mutating_sql=not read_only)


def shown_arguments(arguments: ToolArgs) -> dict[str, Any]:
    """The arguments as the card shows them and the tool receives them: as given, validated."""
    return arguments.model_dump(mode="json", by_alias=True, exclude_unset=True)


def _asking(request: ToolCallRequest) -> AIMessage | None:
    """The model's answer that made this call: the latest one with its id (a server may use the
    same id again in a later answer)."""
    state = request.state if isinstance(request.state, dict) else {}
    for message in reversed(state.get("messages", [])):
        if isinstance(message, AIMessage) and any(
            call["id"] == request.tool_call["id"] for call in message.tool_calls
        ):
            return message
    return None


def _batch(request: ToolCallRequest) -> list[ToolCall]:
    """The calls the model made together with this one (its AI message's)."""
    asking = _asking(request)
    return asking.tool_calls if asking is not None else [request.tool_call]


def _waits_its_turn(request: ToolCallRequest) -> bool:
    """A batch that holds a call which may change something runs that one call alone: the tool
    node runs a batch's calls side by side, and a pause for confirmation would cut the others
    short, their events lost. The first such call goes on; every other call of the batch is
    refused, typed, and the model may ask again."""
    batch = _batch(request)
    changing = [
        call["id"]
        for call in batch
        if call["name"] in _KNOWN_TOOLS and catalogue_tool(call["name"]).may_change
    ]
    return len(batch) > 1 and bool(changing) and request.tool_call["id"] != changing[0]


def _grant(
    passes: Passes,
    request: ToolCallRequest,
    username: str,
    arguments: ToolArgs,
    answered: Mapping[str, str] | None,
    facts: GateFacts,
) -> None:
    """The call's pass: its Idempotency-Key and, once the person confirmed it, a confirmation
    signed for this user, tool, key and the exact request the tool will send."""
    call = request.tool_call
    thread_id = _thread_id(request)
    asking = _asking(request)
    digest = answered["digest"] if answered is not None else ""
    key = idempotency_key(thread_id, str(asking.id if asking is not None else ""), str(call["id"]), digest)
    confirmation = None
    if answered is not None:
        fingerprint = facts.fingerprint(ops_call(call["name"], arguments))
        confirmation = Confirmation(username, call["name"], key, fingerprint)
    passes.grant(thread_id, str(call["id"]), key, confirmation)


def _thread_id(request: ToolCallRequest) -> str:
    """The conversation: the checkpointer's key, the one thing the run's config carries."""
    return str(((request.runtime.config or {}).get("configurable") or {}).get("thread_id", ""))


def gate(
    facts: GateFacts, passes: Passes, tool_timeout_seconds: float
) -> Callable[[ToolCallRequest, Execute], Awaitable[ToolMessage | Command[Any]]]:
    async def judged(
        request: ToolCallRequest, context: RunContext
    ) -> tuple[ToolArgs, Decision, dict[str, str] | None] | ToolMessage:
        """The call's arguments, its decision and — where it needed one — the person's answer
        to its card; or why it does not run."""
        call = request.tool_call
        user_token = context.user_token
        thread_id = _thread_id(request)
        lang = context.lang
        name = call["name"]
        if name not in _KNOWN_TOOLS:
            raise Refused("UNKNOWN_TOOL", f"there is no tool named {name[:80]!r}")
        if _waits_its_turn(request):
            raise Refused(
                "ONE_CHANGE_AT_A_TIME",
                "not run: a call that may change something goes alone; ask for this one after it",
                ends_turn=False,
            )
        args = dict(call["args"])
        if "env_id" in ARGS[name].model_fields:
            env = resolve_env(args.get("env_id"), context.env_id, context.ui_env_id)
            if env:
                args["env_id"] = env
        role = context.user_role

        async def decided(args: dict[str, Any]) -> tuple[ToolArgs, Decision] | ToolMessage:
            arguments = await checked_arguments(name, args, lambda: facts.environments(user_token))
            decision = await _decision(name, arguments, role, facts, user_token)
            if role is not None and not decision.allows(role):  # before any confirmation
                # the arguments tried go with it: the audit keeps which environment it was
                denial = permission_denied(name, decision, role, lang, arguments)
                await adispatch_custom_event("permission_denied", denial)
                detail = {
                    "code": "permission_denied",
                    "message": f"the {role} role may not run {name}",
                    **denial,
                }
                return error_message(call, detail, ends_turn=True)
            return arguments, decision

        outcome = await decided(args)
        if isinstance(outcome, ToolMessage):
            return outcome
        arguments, decision = outcome
        if not decision.needs_confirmation:
            return arguments, decision, None
        subject = await subject_of(facts, user_token, arguments)
        card = confirm_card(str(call["id"]), name, arguments, thread_id, decision, lang, subject)
        while True:
            answer = interrupt(card)
            if not isinstance(answer, dict) or answer.get("digest") != card["digest"]:
                continue  # an answer to a card other than this one: this one is asked anew
            answered = {"digest": str(card["digest"]), "action": str(answer.get("action"))}
            if answer.get("action") != "confirm":
                detail = {"code": "rejected", "message": "the user rejected this call; nothing was run"}
                return error_message(call, detail, answered=answered)
            edited = answer.get("args") or {}
            if not edited:
                return arguments, decision, answered
            outcome = await decided({**card["tool_args"], **edited})
            if isinstance(outcome, ToolMessage):
                return outcome
            arguments, decision = outcome
            subject = await subject_of(facts, user_token, arguments)
            edited_card = confirm_card(str(call["id"]), name, arguments, thread_id, decision, lang, subject)
            if edited_card["digest"] == card["digest"]:  # the "edit" left every shown value as it was
                return arguments, decision, answered
            card = edited_card  # the person has not seen this call: a new card, never a run

    async def wrapped(request: ToolCallRequest, execute: Execute) -> ToolMessage | Command[Any]:
        call = request.tool_call
        context = run_context(request.runtime.context)
        thread_id = _thread_id(request)
        try:
            outcome = await judged(request, context)
        except Refused as refusal:
            detail = {"code": refusal.code, "message": str(refusal), **refusal.facts}
            event = ToolErrorEvent(
                tool=call["name"],
                run_id=str(call["id"]),
                unchecked_args=dict(call["args"]),  # for the audit alone: never shown or kept
                error=detail,
            )
            await adispatch_custom_event(REFUSED_EVENT, event.metadata())
            return error_message(call, detail, ends_turn=refusal.ends_turn)
        if isinstance(outcome, ToolMessage):
            return outcome
        arguments, decision, answered = outcome
        _grant(passes, request, context.username, arguments, answered, facts)
        request = request.override(tool_call={**call, "args": shown_arguments(arguments)})
        try:
            result = await asyncio.wait_for(execute(request), tool_timeout_seconds)
        except TimeoutError:
            writes = decision.tier is not Tier.READ
            timeout = ToolTimeoutEvent(
                tool=call["name"],
                timeout_seconds=tool_timeout_seconds,
                is_write_tool=writes,
                retryable=not writes,  # a write may have happened: only Superset can tell
                message=(
                    f"no answer in {tool_timeout_seconds:.0f} s: the operation's status is unknown — "
                    "check Superset before trying again"
                    if writes
                    else f"no answer in {tool_timeout_seconds:.0f} s; asking again is safe"
                ),
            ).metadata()
            await adispatch_custom_event("tool_timeout", timeout)
            return error_message(call, {"code": "tool_timeout", **timeout}, answered=answered)
        finally:
            passes.take(thread_id, str(call["id"]))  # a pass is good for this one run
        if answered is not None and isinstance(result, ToolMessage):
            result.artifact = {
                **(result.artifact if isinstance(result.artifact, dict) else {}),
                ANSWERED: answered,
            }
        return result

    return wrapped
