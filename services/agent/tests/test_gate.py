"""The confirmation gate (:mod:`sstools.agent.gate`) alone, fast: a tool node behind the gate in
a real LangGraph graph of its own (checkpointed in memory), driven by an AI message's tool calls
and resumed with the person's answers, as the agent's graph is. What a call must get past —
unknown names, batches, environments, arguments, SQL, roles, the card and its answer, the time
limit — is checked against DESIGN.md's policy table written out by hand
(:mod:`sstools.devstack.policy_table`), never against the policy code the gate uses."""

import asyncio
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, Interrupt

from sstools.agent.changes import change
from sstools.agent.clients.ops import OpsCall, OpsError
from sstools.agent.context import RunContext
from sstools.agent.gate import CONFIRM_PROMPTS, gate
from sstools.agent.graph import AgentGraph
from sstools.agent.language import DEFAULT_LANG, as_lang
from sstools.agent.tools import Passes, idempotency_key, ops_call, tool_schema
from sstools.common.catalogue import (
    ALTERNATIVES,
    ALWAYS_OFFERED,
    ARGS,
    EXAMPLE_PROMPTS,
    Role,
    Tier,
    tool_names,
)
from sstools.common.confirmation import Confirmation, ConfirmationCodec, request_fingerprint
from sstools.common.sql import classify
from sstools.common.tokens import USER_AUDIENCE, TokenError, TokenType
from sstools.common.tool_args import GIT_REF_PATTERN, SqlArgs
from sstools.devstack.keys import ISSUER, user_token
from sstools.devstack.policy_table import MUTATING_SQL, POLICY_TABLE, RANKS, allowed

USERNAME = "anna"
TOKEN = user_token(USERNAME)
THREAD = "conversation-1"
THREAD_CONFIG: RunnableConfig = {"configurable": {"thread_id": THREAD}}
SENT_KEY = "the Idempotency-Key the call was sent with"
CODEC = ConfirmationCodec("gate-tests-confirmation-secret-of-32+-bytes")
# Ops' environments as configured: "live" is production by its configuration alone.
ENVIRONMENTS = {"dev": False, "staging": False, "prod": True, "live": True}
# The kind of each (sstools.common.policy: production by configuration, else by name).
KINDS = {"dev": "dev", "staging": "staging", "prod": "prod", "live": "prod"}
RISK_LEVELS = {Tier.READ: "safe", Tier.WRITE: "guarded", Tier.DANGEROUS: "dangerous"}
# The dashboards ops can name, by environment: the same id is another dashboard elsewhere.
TITLES = {"dev": {12: "Sales Overview", 7: "Legacy KPIs"}, "staging": {12: "Staging copy"}}
PATIENT = 30.0  # a time limit no tool here reaches
HASTY = 0.05  # a time limit for the tools that never answer
OPS_UNAVAILABLE = OpsError(503, {"code": "ops_unavailable", "message": "ops did not answer"})
SUPERSET_UNAVAILABLE = OpsError(503, {"code": "superset_unavailable", "message": "Superset did not answer"})

# One valid call of each tool, without its environment (given per test where the tool has one).
VALID_ARGS: dict[str, dict[str, Any]] = {
    "show_capabilities": {},
    "search_dashboards": {},
    "get_health_summary": {},
    "list_environments": {},
    "get_task_status": {"task_id": "2f1e6c0a-3b7d-4c55-9a11-0d6b1e2f3a4b"},
    "list_llm_providers": {},
    "get_llm_status": {},
    "list_maintenance_events": {},
    "superset_format_sql": {"sql": "select 1"},
    "superset_explore_database": {},
    "superset_execute_sql": {"database_id": 1, "sql": "SELECT 1"},
    "superset_audit_permissions": {},
    "superset_create_dashboard": {"title": "Sales"},
    "superset_copy_dashboard": {"dashboard_id": 12, "title": "Sales copy"},
    "superset_create_dataset": {"database_id": 1, "table_name": "sales"},
    "run_llm_documentation": {"dashboard_id": 12},
    "run_llm_validation": {"dashboard_id": 12},
    "create_branch": {"name": "release-7"},
    "run_backup": {},
    "commit_changes": {"branch": "release-7", "dashboard_ids": [12], "message": "Sales"},
    "start_maintenance": {"reason": "upgrade"},
    "end_maintenance": {},
    "deploy_dashboard": {"dashboard_id": 12},
    "execute_migration": {"source_env": "dev", "dashboard_ids": [12]},
}
WITHOUT_ENV = frozenset(
    {
        "show_capabilities",
        "list_environments",
        "get_task_status",
        "list_llm_providers",
        "get_llm_status",
        "superset_format_sql",
        "create_branch",
    }
)


# The tools' argument models as the agent binds them; made once, as making them is slow.
SCHEMAS = {name: tool_schema(ARGS[name]) for name in tool_names()}


class AnyText:
    """Equal to any non-empty string: a free-text message, whose wording is not the behaviour."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and other != ""

    def __repr__(self) -> str:
        return "<any text>"


TEXT = AnyText()


class OpsFacts:
    """The gate's :class:`~sstools.agent.gate.GateFacts` as ops answers them — a stand-in for the
    OpsClient the agent passes: the user's token is checked as ops checks it (a user token signed
    with ops' key, else 401 with the token's error code); the environments are ops'
    configuration; a statement is judged as ops' sql/shape endpoint judges it for a PostgreSQL
    database (:func:`sstools.common.sql.classify`); the fingerprint is that of the request the
    OpsClient sends for a call. A question named in ``failing`` fails as ops does when it cannot
    answer. It records which questions reached it and which statements it judged."""

    def __init__(
        self,
        environments: Mapping[str, bool] = ENVIRONMENTS,
        failing: Mapping[str, OpsError] | None = None,
        titles: Mapping[str, Mapping[int, str]] = TITLES,
    ) -> None:
        self._environments = dict(environments)
        self._failing = dict(failing or {})
        self._titles = titles
        self.asked: list[str] = []
        self.judged: list[str] = []

    def _as_user(self, question: str, token: str) -> None:
        self.asked.append(question)
        try:
            ISSUER.verify(token, audience=USER_AUDIENCE, token_type=TokenType.USER)
        except TokenError as error:
            raise OpsError(401, {"code": error.code, "message": str(error)}) from None
        if question in self._failing:
            raise self._failing[question]

    async def environments(self, user_token: str) -> Mapping[str, bool]:
        self._as_user("environments", user_token)
        return dict(self._environments)

    async def sql_read_only(self, user_token: str, args: SqlArgs) -> bool:
        self._as_user("sql_read_only", user_token)
        self.judged.append(args.sql)
        return classify(args.sql, "postgres").read_only

    async def dashboard_titles(
        self, user_token: str, env_id: str, dashboard_ids: list[int]
    ) -> dict[int, str]:
        # as the OpsClient does: a failure to ask leaves every dashboard unnamed
        try:
            self._as_user("dashboard_titles", user_token)
        except OpsError:
            return {}
        there = self._titles.get(env_id, {})
        return {board: there[board] for board in dashboard_ids if board in there}

    def fingerprint(self, call: OpsCall) -> str:
        request = httpx.Request(call.method, f"http://ops{call.path}", params=call.params, json=call.body)
        return request_fingerprint(request.method, request.url.raw_path, request.content)


@dataclass(frozen=True)
class Run:
    """One run of a tool: the arguments it got and the confirmation it carried, as ops reads it
    (its key :data:`SENT_KEY` when it names the Idempotency-Key the call was sent with, as ops
    requires), and that key."""

    tool: str
    args: dict[str, Any]
    confirmation: Confirmation | None
    key: str | None = field(default=None, compare=False)


@dataclass
class Outcome:
    """What one run of the graph showed: the gate's events, the tools started and with what
    input (as the stream shows them), the cards it paused with, and the results of the last
    batch of calls (by call id)."""

    events: list[tuple[str, dict[str, Any]]]
    started: list[tuple[str, Any]]
    paused: list[Interrupt]
    results: dict[str, ToolMessage]

    @property
    def cards(self) -> list[dict[str, Any]]:
        return [dict(interrupt.value) for interrupt in self.paused]


class Gated:
    """A tool node behind the gate, in a graph of its own (START → tools → END) checkpointed in
    memory, with the configuration keys the agent's chat passes. Its tools are built as
    :func:`sstools.agent.tools.build_tools` builds them (the catalogue's names and argument
    models, the call id injected) and do what a real tool does before it sends — take its
    call's confirmation — then record the run instead of calling ops. A tool in ``hanging``
    never answers (as one whose ops call hangs), and hangs before it takes its confirmation,
    so that what the gate itself does with one shows."""

    def __init__(
        self,
        facts: OpsFacts | None = None,
        *,
        timeout_seconds: float = PATIENT,
        hanging: frozenset[str] = frozenset(),
    ) -> None:
        self.facts = facts or OpsFacts()
        self.passes = Passes(CODEC)
        self.runs: list[Run] = []
        self._hanging = hanging
        node = ToolNode(
            [self._tool(name) for name in tool_names()],
            awrap_tool_call=gate(self.facts, self.passes, timeout_seconds),
        )
        graph = StateGraph(MessagesState, context_schema=RunContext)
        graph.add_node("tools", node)
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        self.graph: AgentGraph = graph.compile(checkpointer=InMemorySaver())
        self._paused: list[Interrupt] = []

    def _tool(self, name: str) -> BaseTool:
        async def run(config: RunnableConfig, **values: Any) -> str:
            if name in self._hanging:
                await asyncio.Event().wait()  # nothing ever sets it
            thread = str((config.get("configurable") or {}).get("thread_id", ""))
            granted = self.passes.take(thread, values.pop("tool_call_id"))
            key = granted.idempotency_key if granted is not None else None
            signed = CODEC.verify(granted.confirmation) if granted and granted.confirmation else None
            if signed is not None and signed.idempotency_key == key:
                signed = replace(signed, idempotency_key=SENT_KEY)
            self.runs.append(Run(name, values, signed, key))
            return json.dumps({"ran": name})

        return StructuredTool.from_function(
            coroutine=run, name=name, description=name, args_schema=SCHEMAS[name]
        )

    async def send(
        self,
        *calls: ToolCall,
        role: Role | None,
        env_id: str | None = None,
        ui_env_id: str | None = None,
        before: Sequence[BaseMessage] = (),
        lang: str | None = None,
    ) -> Outcome:
        """A turn whose AI message makes ``calls`` (after the thread's ``before``)."""
        messages = [*before, HumanMessage("please"), AIMessage("", tool_calls=list(calls))]
        return await self._run({"messages": messages}, context(role, env_id, ui_env_id, lang))

    async def answer(
        self, answer: object, *, role: Role | None, env_id: str | None = None, lang: str | None = None
    ) -> Outcome:
        """The person's answer to the card the graph paused with, as the chat resumes it (in the
        card's language)."""
        (paused,) = self._paused
        return await self._run(Command(resume={paused.id: answer}), context(role, env_id, None, lang))

    async def _run(self, graph_input: Any, run: RunContext) -> Outcome:
        events: list[tuple[str, dict[str, Any]]] = []
        started: list[tuple[str, Any]] = []
        paused: list[Interrupt] = []
        async with asyncio.timeout(10):  # a gate that never lets go fails the test, not the run
            async for raw in self.graph.astream_events(graph_input, THREAD_CONFIG, context=run, version="v2"):
                if raw["event"] == "on_custom_event":
                    events.append((raw["name"], dict(raw["data"])))
                elif raw["event"] == "on_tool_start":
                    started.append((raw["name"], raw["data"].get("input")))
                elif raw["event"] == "on_chain_stream" and not raw["parent_ids"]:
                    chunk = raw["data"].get("chunk")
                    if isinstance(chunk, dict):
                        paused.extend(chunk.get("__interrupt__", ()))
        self._paused = paused
        messages = (await self.graph.aget_state(THREAD_CONFIG)).values["messages"]
        last_call = max(index for index, message in enumerate(messages) if isinstance(message, AIMessage))
        results = {
            message.tool_call_id: message
            for message in messages[last_call + 1 :]
            if isinstance(message, ToolMessage)
        }
        return Outcome(events, started, paused, results)


def context(
    role: Role | None, env_id: str | None, ui_env_id: str | None, lang: str | None = None
) -> RunContext:
    """The run's context as the agent's chat makes it."""
    return RunContext(
        user_token=TOKEN,
        username=USERNAME,
        lang=as_lang(lang) or DEFAULT_LANG,
        tool_names=tuple(tool_names()),
        env_id=env_id,
        ui_env_id=ui_env_id,
        user_role=role,
    )


def call(name: str, args: dict[str, Any], call_id: str = "call-1") -> ToolCall:
    return ToolCall(name=name, args=args, id=call_id)


def result(message: ToolMessage) -> tuple[str | None, str, Any, Any]:
    """A call's result as the model and the stream read it."""
    return message.name, message.status, json.loads(str(message.content)), message.artifact


def refused(
    name: str, call_id: str, code: str, message: Any = TEXT, *, args: dict[str, Any], **facts: str
) -> tuple[str, dict[str, Any]]:
    """The refusal event of a call with ``args`` (``facts``: what its words name, an environment
    say)."""
    event = {
        "type": "tool_error",
        "tool": name,
        "run_id": call_id,
        "unchecked_args": args,
        "error": {"code": code, "message": message, **facts},
    }
    return "tool_refused", event


def refusal(
    name: str, code: str, *, ends_turn: bool, message: Any = TEXT, **facts: str
) -> tuple[str, str, Any, Any]:
    """The result of a refused call."""
    artifact = {"ends_turn": True} if ends_turn else None
    return name, "error", {"error": {"code": code, "message": message, **facts}}, artifact


def named_environment(message: str) -> dict[str, str]:
    """The environment a refusal's words name (quoted in them), as the refusal carries it."""
    quoted = re.search(r"'([^']*)'", message)
    return {"env_id": quoted.group(1)} if quoted else {}


def digest(card: Mapping[str, Any]) -> str:
    """A card's digest computed here: SHA-256 of its canonical JSON (sorted keys, compact, UTF-8)."""
    shown = {key: value for key, value in card.items() if key != "digest"}
    canonical = json.dumps(shown, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def tier_of(tool: str, env_id: str | None) -> Tier:
    """The table's tier, a write into production being dangerous."""
    tier = POLICY_TABLE[tool][0]
    return Tier.DANGEROUS if tier is Tier.WRITE and KINDS.get(env_id or "") == "prod" else tier


def required_role(tool: str, env_id: str | None) -> Role:
    _, lowest, lowest_in_prod = POLICY_TABLE[tool]
    return lowest_in_prod if KINDS.get(env_id or "") == "prod" else lowest


def card(
    tool: str,
    tool_args: dict[str, Any],
    *,
    call_id: str = "call-1",
    risk: Tier | None = None,
    role: Role | None = None,
) -> dict[str, Any]:
    """The card a call pauses with, written out field by field."""
    env_id = tool_args.get("env_id")
    every = ARGS[tool].model_validate(tool_args).model_dump()
    ids = every.get("dashboard_ids") or ([every["dashboard_id"]] if every.get("dashboard_id") else [])
    source = every.get("source_env") or env_id
    named = TITLES.get(source or "", {})
    dashboards = [{"id": board, "title": named.get(board)} for board in ids]
    subject = {"env_id": source, "dashboards": dashboards} if ids else None
    risk = risk or tier_of(tool, env_id)
    kind = KINDS.get(env_id) if env_id else None
    shown = {
        "type": "confirm_required",
        "thread_id": THREAD,
        "call_id": call_id,
        "tool_name": tool,
        "tool_args": tool_args,
        "env_id": env_id,
        "env_context": kind,
        "production": kind == "prod",
        "risk": risk.value,
        "risk_level": RISK_LEVELS[risk],
        "required_role": (role or required_role(tool, env_id)).value,
        "dangerous": risk is Tier.DANGEROUS,
        "prompt": CONFIRM_PROMPTS[RISK_LEVELS[risk]][0],  # Russian: the runs here say no language
        "subject": subject,
        "change": change(tool, "ru", every, dashboards),
        "lang": "ru",
        "requires_confirmation": True,
    }
    return {**shown, "digest": digest(shown)}


def denial(tool: str, role: Role, env_id: str | None, required: Role, args: dict[str, Any]) -> dict[str, Any]:
    """The permission_denied event of a call with ``args``: the table's alternatives this role may
    run there."""
    prod = KINDS.get(env_id or "") == "prod"
    offered = [name for name in ALTERNATIVES.get(tool, ()) if allowed(name, role, prod=prod)]
    return {
        "type": "permission_denied",
        "tool_name": tool,
        "required_role": required.value,
        "user_role": role.value,
        "env_context": KINDS.get(env_id) if env_id else None,
        "alternatives": [
            {"action": name, "prompt": EXAMPLE_PROMPTS[name][0]} for name in offered or [ALWAYS_OFFERED]
        ],
        "tool_args": args,
    }


def confirmation(tool: str, args: dict[str, Any], facts: OpsFacts) -> Confirmation:
    """The confirmation ops must get for exactly this call of the user's."""
    sent = ops_call(tool, ARGS[tool].model_validate(args))
    return Confirmation(USERNAME, tool, SENT_KEY, facts.fingerprint(sent))


def answered(the_card: Mapping[str, Any], action: str) -> dict[str, Any]:
    return {"answered": {"digest": the_card["digest"], "action": action}}


def ran(name: str) -> dict[str, str]:
    return {"ran": name}


# --- what is refused before anything else ---


async def test_an_unknown_tool_is_refused_ends_the_turn_and_reaches_nothing() -> None:
    gated = Gated()
    outcome = await gated.send(call("drop_everything", {"env_id": "dev"}), role=Role.ADMIN)
    assert outcome.events == [refused("drop_everything", "call-1", "UNKNOWN_TOOL", args={"env_id": "dev"})]
    assert result(outcome.results["call-1"]) == refusal("drop_everything", "UNKNOWN_TOOL", ends_turn=True)
    assert (outcome.paused, gated.runs, gated.facts.asked) == ([], [], [])


@pytest.mark.parametrize(
    ("batch", "goes"),
    [
        (
            [
                call("get_health_summary", {"env_id": "dev"}, "read-1"),
                call("create_branch", {"name": "release-7"}, "change-1"),
                call("run_backup", {"env_id": "dev"}, "change-2"),
            ],
            "change-1",
        ),
        (
            [call("run_backup", {"env_id": "dev"}, "change-2"), call("list_environments", {}, "read-1")],
            "change-2",
        ),
    ],
)
async def test_a_change_batched_with_other_calls_goes_alone_and_the_others_may_be_asked_again(
    batch: list[ToolCall], goes: str
) -> None:
    gated = Gated()
    outcome = await gated.send(*batch, role=Role.OPERATOR)
    (going,) = [each for each in batch if each["id"] == goes]
    others = [each for each in batch if each["id"] != goes]
    assert outcome.cards == [card(going["name"], going["args"], call_id=goes)]
    assert sorted(outcome.events, key=lambda event: event[1]["run_id"]) == sorted(
        (
            refused(each["name"], str(each["id"]), "ONE_CHANGE_AT_A_TIME", args=each["args"])
            for each in others
        ),
        key=lambda event: event[1]["run_id"],
    )
    done = await gated.answer({"action": "confirm", "digest": outcome.cards[0]["digest"]}, role=Role.OPERATOR)
    assert {call_id: result(message) for call_id, message in done.results.items()} == {
        goes: (going["name"], "success", ran(going["name"]), answered(outcome.cards[0], "confirm")),
        **{
            str(each["id"]): refusal(each["name"], "ONE_CHANGE_AT_A_TIME", ends_turn=False) for each in others
        },
    }
    assert [run.tool for run in gated.runs] == [going["name"]]


async def test_a_batch_of_reads_all_runs() -> None:
    gated = Gated()
    outcome = await gated.send(
        call("get_health_summary", {"env_id": "dev"}, "read-1"),
        call("list_environments", {}, "read-2"),
        call("superset_format_sql", {"sql": "select 1"}, "read-3"),
        role=Role.VIEWER,
    )
    assert (outcome.events, outcome.paused) == ([], [])
    assert sorted(gated.runs, key=lambda run: run.tool) == [
        Run("get_health_summary", {"env_id": "dev", "dashboard_ids": None, "force": False}, None),
        Run("list_environments", {}, None),
        Run("superset_format_sql", {"sql": "select 1", "dialect": "postgres"}, None),
    ]
    assert {call_id: result(message) for call_id, message in outcome.results.items()} == {
        "read-1": ("get_health_summary", "success", ran("get_health_summary"), None),
        "read-2": ("list_environments", "success", ran("list_environments"), None),
        "read-3": ("superset_format_sql", "success", ran("superset_format_sql"), None),
    }


async def test_an_unknown_name_in_a_batch_is_not_taken_for_a_change() -> None:
    gated = Gated()
    outcome = await gated.send(
        call("drop_everything", {}, "unknown-1"), call("list_environments", {}, "read-1"), role=Role.VIEWER
    )
    assert outcome.events == [refused("drop_everything", "unknown-1", "UNKNOWN_TOOL", args={})]
    assert gated.runs == [Run("list_environments", {}, None)]


async def test_a_calls_batch_is_its_own_turns_even_when_the_model_reuses_call_ids() -> None:
    # Some models number their calls call_0, call_1, ... afresh in every turn.
    earlier = [
        HumanMessage("branch and look"),
        AIMessage(
            "",
            tool_calls=[
                call("create_branch", {"name": "x"}, "call_0"),
                call("list_environments", {}, "call_1"),
            ],
        ),
        ToolMessage("rejected", tool_call_id="call_0", name="create_branch", status="error"),
        ToolMessage("not run", tool_call_id="call_1", name="list_environments", status="error"),
    ]
    gated = Gated()
    outcome = await gated.send(call("list_environments", {}, "call_1"), role=Role.VIEWER, before=earlier)
    assert outcome.events == []
    assert gated.runs == [Run("list_environments", {}, None)]


# --- the environment ---


@pytest.mark.parametrize(
    ("in_call", "submitted", "on_page", "used"),
    [
        ("staging", "dev", "prod", "staging"),
        (None, "staging", "prod", "staging"),
        (None, None, "staging", "staging"),
        ("dev", None, None, "dev"),
    ],
)
async def test_the_environment_is_the_calls_then_the_submitted_one_then_the_pages(
    in_call: str | None, submitted: str | None, on_page: str | None, used: str
) -> None:
    gated = Gated()
    args = {"env_id": in_call} if in_call else {}
    outcome = await gated.send(
        call("get_health_summary", args), role=Role.VIEWER, env_id=submitted, ui_env_id=on_page
    )
    assert outcome.events == []
    assert gated.runs == [
        Run("get_health_summary", {"env_id": used, "dashboard_ids": None, "force": False}, None)
    ]


async def test_a_tool_without_an_environment_is_not_given_the_submitted_one() -> None:
    gated = Gated()
    outcome = await gated.send(call("create_branch", {"name": "release-7"}), role=Role.OPERATOR, env_id="dev")
    assert outcome.cards == [card("create_branch", {"name": "release-7"})]


@pytest.mark.parametrize(
    ("tool", "args", "submitted", "message"),
    [
        (
            "get_health_summary",
            {"env_id": "Prod/maintenance/end#"},
            None,
            "env_id: 'Prod/maintenance/end#' is not an environment id",
        ),
        ("get_health_summary", {"env_id": 7}, None, "env_id: '7' is not an environment id"),
        ("get_health_summary", {}, "../dev", "env_id: '../dev' is not an environment id"),
        (
            "deploy_dashboard",
            {"env_id": "staging", "dashboard_id": 1, "source_env": "dev/../prod"},
            None,
            "source_env: 'dev/../prod' is not an environment id",
        ),
        (
            "get_health_summary",
            {"env_id": "qa"},
            None,
            "env_id: no environment 'qa'; configured: dev, live, prod, staging",
        ),
        (
            "get_health_summary",
            {},
            "qa",
            "env_id: no environment 'qa'; configured: dev, live, prod, staging",
        ),
        (
            "deploy_dashboard",
            {"env_id": "staging", "dashboard_id": 1, "source_env": "qa"},
            None,
            "source_env: no environment 'qa'; configured: dev, live, prod, staging",
        ),
        (
            "deploy_dashboard",
            {"dashboard_id": 1, "source_env": "qa"},
            None,
            "source_env: no environment 'qa'; configured: dev, live, prod, staging",
        ),
    ],
)
async def test_an_environment_that_is_not_a_configured_ones_id_is_refused_and_ends_the_turn(
    tool: str, args: dict[str, Any], submitted: str | None, message: Any
) -> None:
    gated = Gated()
    outcome = await gated.send(call(tool, args), role=Role.ADMIN, env_id=submitted)
    named = named_environment(message)
    assert outcome.events == [refused(tool, "call-1", "INVALID_ENVIRONMENT", message, args=args, **named)]
    assert result(outcome.results["call-1"]) == refusal(
        tool, "INVALID_ENVIRONMENT", ends_turn=True, message=message, **named
    )
    assert (outcome.paused, gated.runs) == ([], [])


async def test_a_malformed_environment_is_refused_without_asking_ops() -> None:
    gated = Gated()
    await gated.send(call("get_health_summary", {"env_id": "Prod/maintenance/end#"}), role=Role.VIEWER)
    assert gated.facts.asked == []


async def test_with_no_environment_configured_the_refusal_says_so() -> None:
    gated = Gated(OpsFacts(environments={}))
    outcome = await gated.send(call("get_health_summary", {"env_id": "dev"}), role=Role.VIEWER)
    message = "env_id: no environment 'dev'; configured: none"
    assert outcome.events == [
        refused(
            "get_health_summary",
            "call-1",
            "INVALID_ENVIRONMENT",
            message,
            args={"env_id": "dev"},
            env_id="dev",
        )
    ]


async def test_when_ops_cannot_list_the_environments_the_call_is_refused_with_its_code() -> None:
    gated = Gated(OpsFacts(failing={"environments": OPS_UNAVAILABLE}))
    outcome = await gated.send(call("get_health_summary", {"env_id": "dev"}), role=Role.VIEWER)
    assert outcome.events == [
        refused("get_health_summary", "call-1", "ops_unavailable", args={"env_id": "dev"})
    ]
    assert result(outcome.results["call-1"]) == refusal(
        "get_health_summary", "ops_unavailable", ends_turn=True
    )
    assert gated.runs == []


# --- the arguments ---


# What is wrong is said argument by argument (pydantic's words), so the model can ask again right.
@pytest.mark.parametrize(
    ("tool", "args", "problems"),
    [
        ("create_branch", {}, "name: Field required"),
        ("create_branch", {"name": "release-7", "force": True}, "force: Extra inputs are not permitted"),
        (
            "create_branch",
            {"start": ""},
            f"name: Field required; start: String should match pattern '{GIT_REF_PATTERN}'",
        ),
        (
            "get_health_summary",
            {"env_id": "dev", "dashboard_ids": [0]},
            "dashboard_ids.0: Input should be greater than or equal to 1",
        ),
        ("get_health_summary", {}, "env_id: Field required"),
    ],
)
async def test_arguments_the_tools_model_does_not_take_are_refused_without_ending_the_turn(
    tool: str, args: dict[str, Any], problems: str
) -> None:
    gated = Gated()
    outcome = await gated.send(call(tool, args), role=Role.ADMIN)
    assert outcome.events == [refused(tool, "call-1", "invalid_arguments", problems, args=args)]
    assert result(outcome.results["call-1"]) == refusal(
        tool, "invalid_arguments", ends_turn=False, message=problems
    )
    assert (outcome.paused, gated.runs) == ([], [])


# --- roles: every tool, every role, in an ordinary and a production environment ---


def _boundaries() -> list[tuple[str, Role, str | None]]:
    """For every tool, in an ordinary environment and (where the table's prod column or a
    write's raised tier makes a difference) in one that is production by configuration alone:
    the lowest role the table allows, and the role just below it."""
    cases = []
    for tool, (tier, lowest, lowest_in_prod) in POLICY_TABLE.items():
        envs: list[str | None] = [None] if tool in WITHOUT_ENV else ["dev"]
        if tool not in WITHOUT_ENV and (lowest_in_prod != lowest or tier is Tier.WRITE):
            envs.append("live")
        for env_id in envs:
            rank = RANKS[lowest_in_prod if env_id == "live" else lowest]
            cases += [
                (tool, role, env_id) for role, role_rank in RANKS.items() if role_rank in (rank - 1, rank)
            ]
    return cases


@pytest.mark.parametrize(("tool", "role", "env_id"), _boundaries())
async def test_a_role_the_table_does_not_allow_is_denied_before_any_card(
    tool: str, role: Role, env_id: str | None
) -> None:
    gated = Gated()
    args = {**VALID_ARGS[tool], **({"env_id": env_id} if env_id else {})}
    outcome = await gated.send(call(tool, args), role=role)
    required = required_role(tool, env_id)
    if not allowed(tool, role, prod=KINDS.get(env_id or "") == "prod"):
        denied = denial(tool, role, env_id, required, args)
        assert (outcome.events, outcome.paused, gated.runs) == ([("permission_denied", denied)], [], [])
        detail = {"code": "permission_denied", "message": TEXT, **denied}
        assert result(outcome.results["call-1"]) == (tool, "error", {"error": detail}, {"ends_turn": True})
    elif tier_of(tool, env_id) is Tier.READ:
        assert (outcome.events, outcome.paused, [run.tool for run in gated.runs]) == ([], [], [tool])
    else:
        assert (outcome.events, outcome.cards, gated.runs) == ([], [card(tool, args)], [])


async def test_a_user_whose_role_is_unknown_is_left_to_ops() -> None:
    gated = Gated()
    args = {"env_id": "live", "dashboard_id": 12}
    outcome = await gated.send(call("deploy_dashboard", args), role=None)
    assert (outcome.events, outcome.cards) == ([], [card("deploy_dashboard", args)])


# --- SQL ---


async def test_a_read_only_statement_runs_as_a_read() -> None:
    gated = Gated()
    args = {"env_id": "dev", "database_id": 1, "sql": "SELECT count(*) FROM sales"}
    outcome = await gated.send(call("superset_execute_sql", args), role=Role.ANALYST)
    assert (outcome.events, outcome.paused) == ([], [])
    assert gated.facts.judged == ["SELECT count(*) FROM sales"]
    assert gated.runs == [Run("superset_execute_sql", {**args, "schema_name": None, "limit": 100}, None)]


@pytest.mark.parametrize(
    ("role", "env_id"), [(Role.ANALYST, "dev"), (Role.OPERATOR, "dev"), (Role.OPERATOR, "live")]
)
async def test_a_statement_that_changes_data_is_denied_below_admin(role: Role, env_id: str) -> None:
    # The table's row for anything but one read-only query: for admins, after a confirmation.
    gated = Gated()
    args = {"env_id": env_id, "database_id": 1, "sql": "DELETE FROM sales"}
    outcome = await gated.send(call("superset_execute_sql", args), role=role)
    assert outcome.events == [
        ("permission_denied", denial("superset_execute_sql", role, env_id, MUTATING_SQL[1], args))
    ]
    assert (outcome.paused, gated.runs, gated.facts.judged) == ([], [], ["DELETE FROM sales"])


@pytest.mark.parametrize("role", [Role.ADMIN, None])
async def test_a_statement_that_changes_data_pauses_as_dangerous_for_admins(role: Role | None) -> None:
    gated = Gated()
    args = {"env_id": "dev", "database_id": 1, "sql": "DELETE FROM sales"}
    outcome = await gated.send(call("superset_execute_sql", args), role=role)
    assert outcome.cards == [card("superset_execute_sql", args, risk=MUTATING_SQL[0], role=MUTATING_SQL[1])]
    assert gated.facts.judged == ["DELETE FROM sales"]


async def test_a_role_that_may_not_run_sql_at_all_is_denied_without_asking_ops_about_it() -> None:
    gated = Gated()
    args = {"env_id": "dev", "database_id": 1, "sql": "DELETE FROM sales"}
    outcome = await gated.send(call("superset_execute_sql", args), role=Role.VIEWER)
    assert outcome.events == [
        ("permission_denied", denial("superset_execute_sql", Role.VIEWER, "dev", Role.ANALYST, args))
    ]
    assert gated.facts.judged == []


async def test_a_statement_ops_cannot_judge_is_refused_with_its_code_and_may_be_asked_again() -> None:
    gated = Gated(OpsFacts(failing={"sql_read_only": SUPERSET_UNAVAILABLE}))
    args = {"env_id": "dev", "database_id": 1, "sql": "SELECT 1"}
    outcome = await gated.send(call("superset_execute_sql", args), role=Role.ADMIN)
    assert outcome.events == [refused("superset_execute_sql", "call-1", "superset_unavailable", args=args)]
    assert result(outcome.results["call-1"]) == refusal(
        "superset_execute_sql", "superset_unavailable", ends_turn=False
    )
    assert gated.runs == []


# --- the card ---


@pytest.mark.parametrize(
    ("tool", "args", "role"),
    [
        ("superset_create_dashboard", {"env_id": "dev", "title": "Sales"}, Role.ANALYST),
        ("deploy_dashboard", {"env_id": "staging", "dashboard_id": 12, "source_env": "dev"}, Role.OPERATOR),
        ("superset_create_dashboard", {"env_id": "prod", "title": "Продажи"}, Role.OPERATOR),
    ],
)
async def test_a_change_pauses_with_a_card_showing_all_that_was_decided(
    tool: str, args: dict[str, Any], role: Role
) -> None:
    gated = Gated()
    outcome = await gated.send(call(tool, args), role=role)
    assert outcome.cards == [card(tool, args)]
    assert (outcome.events, gated.runs) == ([], [])


async def test_a_card_speaks_the_language_of_its_turn_only() -> None:
    deploy = call("deploy_dashboard", {"env_id": "prod", "source_env": "dev", "dashboard_id": 1})
    english = (await Gated().send(deploy, role=Role.ADMIN, lang="en")).cards[0]
    russian = (await Gated().send(deploy, role=Role.ADMIN, lang="ru")).cards[0]
    assert (english["prompt"], russian["prompt"]) == (
        "⚠️ Dangerous action: please confirm",
        "⚠️ Опасное действие: подтвердите",
    )
    assert english["digest"] != russian["digest"]  # the digest binds the words shown too


async def test_a_denial_offers_its_alternatives_in_the_language_of_its_turn() -> None:
    deploy = call("deploy_dashboard", {"env_id": "prod", "source_env": "dev", "dashboard_id": 1})
    english = (await Gated().send(deploy, role=Role.ANALYST, lang="en")).events
    russian = (await Gated().send(deploy, role=Role.ANALYST, lang="ru")).events
    assert [alternative["prompt"] for _, denied in english for alternative in denied["alternatives"]] == [
        "What is broken in the dashboards?",
        "Show the dashboards",
    ]
    assert [alternative["prompt"] for _, denied in russian for alternative in denied["alternatives"]] == [
        "Что сломано в дашбордах?",
        "Покажи дашборды",
    ]


async def test_a_deploy_card_names_the_dashboard_as_its_source_has_it_and_says_where_it_goes() -> None:
    # no source given: the deploy takes dev's dashboard 12, and so the card names dev's, not the
    # target's dashboard of the same id
    deploy = call("deploy_dashboard", {"env_id": "staging", "dashboard_id": 12})
    english = (await Gated().send(deploy, role=Role.OPERATOR, lang="en")).cards[0]
    assert english["subject"] == {"env_id": "dev", "dashboards": [{"id": 12, "title": "Sales Overview"}]}
    assert english["change"] == (
        "Dashboard «Sales Overview» (#12) from dev is imported into staging: created there, or replaced "
        "together with its charts and datasets."
    )
    russian = (await Gated().send(deploy, role=Role.OPERATOR, lang="ru")).cards[0]
    assert russian["change"].startswith("Дашборд «Sales Overview» (#12) из dev будет импортирован в staging")


async def test_a_dashboard_ops_cannot_name_is_shown_by_its_id_alone() -> None:
    gated = Gated(OpsFacts(failing={"dashboard_titles": OpsError(503, {"code": "ops_unavailable"})}))
    args = {"env_id": "dev", "dashboard_ids": [12, 99], "source_env": "staging"}
    shown = (await gated.send(call("execute_migration", args), role=Role.OPERATOR, lang="en")).cards[0]
    assert shown["subject"]["dashboards"] == [{"id": 12, "title": None}, {"id": 99, "title": None}]
    assert shown["change"].startswith("Dashboards #12, #99 from staging are migrated into dev")
    unknown = (await Gated().send(call("execute_migration", args), role=Role.OPERATOR, lang="en")).cards[0]
    assert unknown["change"].startswith("Dashboards «Staging copy» (#12), #99 from staging")


async def test_an_edit_naming_another_dashboard_is_a_new_card_naming_it_never_a_run() -> None:
    gated = Gated()
    args = {"env_id": "staging", "dashboard_id": 12, "source_env": "dev"}
    shown = (await gated.send(call("deploy_dashboard", args), role=Role.OPERATOR, lang="en")).cards[0]
    # the same tool, environments, risk and role: only which dashboard it is changes
    again = await gated.answer(
        {"action": "confirm", "digest": shown["digest"], "args": {"dashboard_id": 7}},
        role=Role.OPERATOR,
        lang="en",
    )
    (renamed,) = again.cards
    assert renamed["subject"]["dashboards"] == [{"id": 7, "title": "Legacy KPIs"}]
    assert "«Legacy KPIs» (#7)" in renamed["change"]
    assert renamed["digest"] != shown["digest"]
    assert (again.results, gated.runs) == ({}, [])


async def test_a_call_is_given_its_arguments_as_validated_in_their_json_form() -> None:
    # The stream shows what a tool was started with: the checked value, as JSON can carry it.
    gated = Gated()
    outcome = await gated.send(
        call("get_task_status", {"task_id": "2F1E6C0A-3B7D-4C55-9A11-0D6B1E2F3A4B"}), role=Role.VIEWER
    )
    assert outcome.started == [("get_task_status", {"task_id": "2f1e6c0a-3b7d-4c55-9a11-0d6b1e2f3a4b"})]


async def test_a_card_shows_the_arguments_as_given_and_by_their_public_names() -> None:
    gated = Gated()
    args = {"env_id": "dev", "database_id": 3, "table_name": "sales", "schema": "public"}
    outcome = await gated.send(call("superset_create_dataset", args), role=Role.ANALYST)
    assert outcome.cards == [card("superset_create_dataset", args)]


# --- the answer ---


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "confirm", "digest": "0" * 64},
        {"action": "confirm"},
        "confirm",
        None,
        ["confirm"],
    ],
)
async def test_an_answer_that_does_not_name_the_card_asks_it_again_and_runs_nothing(answer: object) -> None:
    gated = Gated()
    args = {"env_id": "dev", "title": "Sales"}
    first = await gated.send(call("superset_create_dashboard", args), role=Role.ANALYST)
    again = await gated.answer(answer, role=Role.ANALYST, env_id="dev")
    assert again.cards == first.cards == [card("superset_create_dashboard", args)]
    assert (again.events, again.results, gated.runs) == ([], {}, [])
    # asked again, the card is still answered as any card is
    done = await gated.answer({"action": "confirm", "digest": first.cards[0]["digest"]}, role=Role.ANALYST)
    assert [run.tool for run in gated.runs] == ["superset_create_dashboard"]
    assert result(done.results["call-1"])[3] == answered(first.cards[0], "confirm")


@pytest.mark.parametrize("action", ["reject", "cancel", None])
async def test_anything_but_a_confirm_of_the_card_runs_nothing(action: str | None) -> None:
    gated = Gated()
    args = {"env_id": "staging", "dashboard_id": 12}
    shown = (await gated.send(call("deploy_dashboard", args), role=Role.OPERATOR)).cards[0]
    done = await gated.answer(
        {"action": action, "digest": shown["digest"]}, role=Role.OPERATOR, env_id="staging"
    )
    detail = {"error": {"code": "rejected", "message": TEXT}}
    assert result(done.results["call-1"]) == (
        "deploy_dashboard",
        "error",
        detail,
        answered(shown, str(action)),
    )
    assert (done.events, done.paused, gated.runs) == ([], [], [])
    assert gated.passes.take(THREAD, "call-1") is None


@pytest.mark.parametrize("edits", [None, {}])
async def test_a_confirm_runs_exactly_the_cards_call_once_with_its_confirmation(
    edits: dict[str, Any] | None,
) -> None:
    gated = Gated()
    args = {"env_id": "staging", "dashboard_id": 12}
    shown = (await gated.send(call("deploy_dashboard", args), role=Role.OPERATOR)).cards[0]
    done = await gated.answer(
        {"action": "confirm", "digest": shown["digest"], "args": edits}, role=Role.OPERATOR, env_id="staging"
    )
    sent = {"env_id": "staging", "dashboard_id": 12, "source_env": "dev"}
    assert gated.runs == [Run("deploy_dashboard", sent, confirmation("deploy_dashboard", args, gated.facts))]
    assert result(done.results["call-1"]) == (
        "deploy_dashboard",
        "success",
        ran("deploy_dashboard"),
        answered(shown, "confirm"),
    )
    assert (done.events, done.paused) == ([], [])
    assert gated.passes.take(THREAD, "call-1") is None  # good for that one run


async def test_each_answers_call_is_sent_with_a_key_of_its_own_never_the_servers_id_alone() -> None:
    """A server that numbers its calls sends ``functions.run_backup:0`` in every answer: each
    answer's call gets a key of its own — of the conversation, the answer, the call and the card
    confirmed, if any —, and a confirmation names the key its call is sent with."""
    gated = Gated()
    numbered = "functions.run_backup:0"
    digests = []
    for _ in range(2):
        sent = await gated.send(call("run_backup", {"env_id": "dev"}, numbered), role=Role.OPERATOR)
        digests.append(sent.cards[0]["digest"])
        await gated.answer({"action": "confirm", "digest": digests[-1]}, role=Role.OPERATOR, env_id="dev")
    for _ in range(2):
        await gated.send(call("get_health_summary", {"env_id": "dev"}, numbered), role=Role.VIEWER)
    assert [run.tool for run in gated.runs] == ["run_backup"] * 2 + ["get_health_summary"] * 2
    state = await gated.graph.aget_state(THREAD_CONFIG)
    answers = [str(message.id) for message in state.values["messages"] if isinstance(message, AIMessage)]
    parts = zip(answers, [*digests, "", ""], strict=True)
    assert [run.key for run in gated.runs] == [
        idempotency_key(THREAD, answer, numbered, digest) for answer, digest in parts
    ]
    assert len({run.key for run in gated.runs}) == 4
    backup = confirmation("run_backup", {"env_id": "dev"}, gated.facts)
    assert [run.confirmation for run in gated.runs] == [backup, backup, None, None]


def test_a_key_names_its_conversation_answer_call_and_card_alone() -> None:
    parts = ("conversation-1", "run-1", "functions.run_backup:0", "d" * 64)
    key = idempotency_key(*parts)
    assert key == idempotency_key(*parts)  # the same call run again (a resume) is sent with the same key
    others = {idempotency_key(*[*parts[:at], "x", *parts[at + 1 :]]) for at in range(len(parts))}
    assert len(others) == len(parts)
    assert key not in others
    assert idempotency_key("a\n", "b", "c", "d") != idempotency_key("a", "\nb", "c", "d")  # parts kept apart
    assert len(key) <= 200  # ops takes a key of at most 200 characters


async def test_an_edit_that_leaves_every_shown_value_as_it_was_runs_under_the_cards_answer() -> None:
    gated = Gated()
    args = {"env_id": "dev", "title": "Sales"}
    shown = (await gated.send(call("superset_create_dashboard", args), role=Role.ANALYST)).cards[0]
    done = await gated.answer(
        {"action": "confirm", "digest": shown["digest"], "args": {"title": "Sales"}},
        role=Role.ANALYST,
        env_id="dev",
    )
    assert gated.runs == [
        Run(
            "superset_create_dashboard",
            {**args, "slug": None, "published": False},
            confirmation("superset_create_dashboard", args, gated.facts),
        )
    ]
    assert result(done.results["call-1"])[3] == answered(shown, "confirm")


@pytest.mark.parametrize(
    ("tool", "args", "edits", "role", "risk"),
    [
        # another environment
        (
            "superset_create_dashboard",
            {"env_id": "dev", "title": "Sales"},
            {"env_id": "staging"},
            Role.ANALYST,
            None,
        ),
        # production, by configuration alone: the write becomes dangerous
        (
            "superset_create_dashboard",
            {"env_id": "dev", "title": "Sales"},
            {"env_id": "live"},
            Role.OPERATOR,
            None,
        ),
        # the same environment, but a statement that only reads: a read's card, not a run
        (
            "superset_execute_sql",
            {"env_id": "dev", "database_id": 1, "sql": "DELETE FROM sales"},
            {"sql": "SELECT 1"},
            Role.ADMIN,
            Tier.READ,
        ),
        # the decision unchanged, but a call the person has not seen: every edit is a new card
        (
            "superset_execute_sql",
            {"env_id": "dev", "database_id": 1, "sql": "DELETE FROM sales"},
            {"sql": "DELETE FROM orders"},
            Role.ADMIN,
            Tier.DANGEROUS,
        ),
        (
            "superset_execute_sql",
            {"env_id": "dev", "database_id": 1, "sql": "DELETE FROM sales"},
            {"database_id": 2},
            Role.ADMIN,
            Tier.DANGEROUS,
        ),
        (
            "superset_execute_sql",
            {"env_id": "dev", "database_id": 1, "sql": "DELETE FROM sales"},
            {"schema": "archive"},
            Role.ADMIN,
            Tier.DANGEROUS,
        ),
        (
            "execute_migration",
            {"env_id": "staging", "source_env": "dev", "dashboard_ids": [12]},
            {"database_mapping": {"examples": "warehouse"}},
            Role.OPERATOR,
            None,
        ),
        (
            "superset_create_dashboard",
            {"env_id": "dev", "title": "Sales"},
            {"title": "Sales 2024", "published": True},
            Role.ANALYST,
            None,
        ),
        (
            "commit_changes",
            {"env_id": "dev", "branch": "feature", "dashboard_ids": [12], "message": "Export sales"},
            {"message": "Export everything"},
            Role.OPERATOR,
            None,
        ),
    ],
)
async def test_edits_that_change_anything_the_card_shows_are_a_new_card_never_a_run(
    tool: str, args: dict[str, Any], edits: dict[str, Any], role: Role, risk: Tier | None
) -> None:
    gated = Gated()
    shown = (await gated.send(call(tool, args), role=role)).cards[0]
    again = await gated.answer({"action": "confirm", "digest": shown["digest"], "args": edits}, role=role)
    edited = {**args, **edits}
    changing_sql = tool == "superset_execute_sql" and risk is Tier.DANGEROUS
    expected = card(tool, edited, risk=risk, role=Role.ADMIN if changing_sql else None)
    assert again.cards == [expected]
    assert expected["digest"] != shown["digest"]
    assert (again.events, again.results, gated.runs) == ([], {}, [])
    # the old card's digest no longer answers it; the new card's does, and runs the edit
    still = await gated.answer({"action": "confirm", "digest": shown["digest"]}, role=role)
    assert (still.cards, gated.runs) == ([expected], [])
    done = await gated.answer({"action": "confirm", "digest": expected["digest"]}, role=role)
    assert [(run.tool, run.confirmation) for run in gated.runs] == [
        (tool, confirmation(tool, edited, gated.facts))
    ]
    assert result(done.results["call-1"])[3] == answered(expected, "confirm")


async def test_edits_the_role_may_not_make_are_denied_and_end_the_turn() -> None:
    gated = Gated()
    args = {"env_id": "dev", "title": "Sales"}
    shown = (await gated.send(call("superset_create_dashboard", args), role=Role.ANALYST)).cards[0]
    done = await gated.answer(
        {"action": "confirm", "digest": shown["digest"], "args": {"env_id": "live"}}, role=Role.ANALYST
    )
    denied = denial(
        "superset_create_dashboard", Role.ANALYST, "live", Role.OPERATOR, {**args, "env_id": "live"}
    )
    assert done.events == [("permission_denied", denied)]
    detail = {"code": "permission_denied", "message": TEXT, **denied}
    assert result(done.results["call-1"]) == (
        "superset_create_dashboard",
        "error",
        {"error": detail},
        {"ends_turn": True},
    )
    assert (done.paused, gated.runs) == ([], [])


@pytest.mark.parametrize(
    ("edits", "code", "ends_turn", "message"),
    [
        ({"title": ""}, "invalid_arguments", False, "title: String should have at least 1 character"),
        (
            {"env_id": "qa"},
            "INVALID_ENVIRONMENT",
            True,
            "env_id: no environment 'qa'; configured: dev, live, prod, staging",
        ),
    ],
)
async def test_edits_that_make_no_valid_call_are_refused(
    edits: dict[str, Any], code: str, ends_turn: bool, message: str
) -> None:
    gated = Gated()
    args = {"env_id": "dev", "title": "Sales"}
    shown = (await gated.send(call("superset_create_dashboard", args), role=Role.ANALYST)).cards[0]
    done = await gated.answer(
        {"action": "confirm", "digest": shown["digest"], "args": edits}, role=Role.ANALYST
    )
    named = named_environment(message)
    assert done.events == [refused("superset_create_dashboard", "call-1", code, message, args=args, **named)]
    assert result(done.results["call-1"]) == refusal(
        "superset_create_dashboard", code, ends_turn=ends_turn, message=message, **named
    )
    assert (done.paused, gated.runs) == ([], [])


# --- the time limit ---


async def test_a_read_past_its_time_limit_says_so_and_may_be_asked_again() -> None:
    gated = Gated(timeout_seconds=HASTY, hanging=frozenset({"get_health_summary"}))
    outcome = await gated.send(call("get_health_summary", {"env_id": "dev"}), role=Role.VIEWER)
    timeout = {
        "type": "tool_timeout",
        "tool": "get_health_summary",
        "timeout_seconds": HASTY,
        "is_write_tool": False,
        "retryable": True,
        "message": TEXT,
    }
    assert outcome.events == [("tool_timeout", timeout)]
    assert result(outcome.results["call-1"]) == (
        "get_health_summary",
        "error",
        {"error": {"code": "tool_timeout", **timeout}},
        None,
    )


async def test_a_change_past_its_time_limit_is_not_retryable_and_its_confirmation_is_spent() -> None:
    gated = Gated(timeout_seconds=HASTY, hanging=frozenset({"create_branch"}))
    shown = (await gated.send(call("create_branch", {"name": "release-7"}), role=Role.OPERATOR)).cards[0]
    done = await gated.answer({"action": "confirm", "digest": shown["digest"]}, role=Role.OPERATOR)
    timeout = {
        "type": "tool_timeout",
        "tool": "create_branch",
        "timeout_seconds": HASTY,
        "is_write_tool": True,
        "retryable": False,
        "message": TEXT,
    }
    assert done.events == [("tool_timeout", timeout)]
    assert result(done.results["call-1"]) == (
        "create_branch",
        "error",
        {"error": {"code": "tool_timeout", **timeout}},
        answered(shown, "confirm"),
    )
    # the tool never took it: the gate did, so it cannot be sent with another run
    assert gated.passes.take(THREAD, "call-1") is None
