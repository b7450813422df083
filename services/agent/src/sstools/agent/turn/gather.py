"""Gather: what the graph is run with. For a send, what needs only reading runs side by side
(the checkpoint, the router's choice, the user's role), then the message is kept in convo before
anything runs; for a card's answer, the card it names, its edits checked, and the role ops gives
the user now."""

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from sstools.agent.admission import Answer, Refusal, card_answered
from sstools.agent.audit import AuditFacts
from sstools.agent.clients.convo import ConvoClient, ConvoUnavailable, UploadedFile
from sstools.agent.clients.docparse import DocparseClient
from sstools.agent.clients.ops import OpsClient, OpsError
from sstools.agent.clients.router import Routing, ToolRouter
from sstools.agent.context import (
    Environment,
    EnvSource,
    RunContext,
    TurnContext,
    default_env,
    environments_of,
    named_envs,
)
from sstools.agent.events import ContextEvent, RoutingEvent
from sstools.agent.fastpath import fast_confirmation_tool
from sstools.agent.gate import Refused, checked_arguments
from sstools.agent.graph import AgentGraph, beyond_reach
from sstools.agent.language import as_lang
from sstools.agent.prefetch import prefetch_dashboards
from sstools.agent.stream import Event, replayed
from sstools.agent.turn import Turn
from sstools.agent.uploads import read_uploads
from sstools.common.accounts import AccountRefused, Accounts, AccountUnknown
from sstools.common.catalogue import Role

_log = logging.getLogger(__name__)
ROUTED_KEY = "routed_tools"  # in a turn's HumanMessage: the tools the router picked for it


# The graph steps one turn may take (a model call and a tool batch are two): LangGraph's default
# of 25 ended the phrase-book planner's question in words once the stack held three databases —
# it explores up to three schemas of up to three databases, one read at a time, before its
# statement. A turn past it ends TOO_MANY_STEPS.
TURN_STEPS = 40


def thread_of(turn: Turn) -> RunnableConfig:
    """The run's config: the conversation, the checkpointer's key (the rest is its context)."""
    return {"configurable": {"thread_id": turn.conversation_id}, "recursion_limit": TURN_STEPS}


@dataclass(frozen=True)
class Prepared:
    """A command ready to run: the graph's input, the run's context, and what is said first."""

    graph_input: Any  # the messages of a send, or the Command resuming a card's call
    run: RunContext
    said: tuple[Event, ...] = ()


def resumed_tools(messages: Sequence[BaseMessage], card: Mapping[str, Any]) -> list[str]:
    """The tools a resumed run binds: those its turn was routed to; for a turn kept before they
    were recorded, the card's own tool alone — never the whole catalogue (FR-004)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage) and not message.additional_kwargs.get("document"):
            routed = message.additional_kwargs.get(ROUTED_KEY)
            if isinstance(routed, list):
                return [str(name) for name in routed]
            break
    return [str(card["tool_name"])]


class Gathering:
    def __init__(
        self,
        graph: Callable[[], AgentGraph],
        *,
        router: ToolRouter,
        convo: ConvoClient,
        ops: OpsClient,
        docparse: DocparseClient,
        accounts: Accounts,
        model_name: str,
        prefetch_limit: int,
    ) -> None:
        self._graph_of = graph
        self._router = router
        self._convo = convo
        self._ops = ops
        self._docparse = docparse
        self._accounts = accounts
        self._model_name = model_name
        self._prefetch_limit = prefetch_limit

    @property
    def _graph(self) -> AgentGraph:
        return self._graph_of()

    async def send(self, turn: Turn, files: list[UploadedFile]) -> Prepared:
        environments = await self._environments(turn)
        if turn.env is not None and environments and turn.env not in {env.id for env in environments}:
            problem = f"no environment {turn.env!r} is configured"
            raise Refusal("INVALID_ENVIRONMENT", problem, facts={"env_id": turn.env})
        context = turn_context(turn, environments)
        fast = await fast_confirmation_tool(turn.text, environments)
        snapshot, routing, role = await asyncio.gather(
            self._graph.aget_state(thread_of(turn)),
            self._routing(turn, fast, context.env),
            self._role(turn),
        )
        if snapshot.interrupts:
            raise Refusal(
                "CONFIRMATION_PENDING", "confirm or reject the pending action first", "needs_confirmation"
            )
        message_id = str(uuid.uuid4())
        try:  # kept before anything runs: a turn convo cannot record does not happen
            _, uploads, prefetched = await asyncio.gather(
                self._convo.record_user_message(turn.user_token, turn.conversation_id, message_id, turn.text),
                read_uploads(files, self._docparse),
                self._prefetch(turn, context, routing),
            )
        except ConvoUnavailable as problem:
            raise Refusal("CONVO_UNAVAILABLE", str(problem)) from None
        said = [
            Event.of(ContextEvent(env_id=context.env, env_source=context.env_source)),
            Event.of(RoutingEvent(tools=routing.tools, tier=routing.tier, model=self._model_name)),
        ]
        # The thread keeps only what a window can still show (convo keeps the whole history).
        messages: list[BaseMessage] = [*beyond_reach(snapshot.values.get("messages", []))]
        for upload in uploads:
            if upload.problem is not None:  # said, and the message goes on without the file
                said.append(Event.of(upload.problem, upload.problem.message))
            else:
                messages.append(HumanMessage(upload.context, additional_kwargs={"document": upload.name}))
        # The turn's routed tools stay with its message: a resumed run binds the same ones.
        messages.append(HumanMessage(turn.text, id=message_id, additional_kwargs={ROUTED_KEY: routing.tools}))
        if fast is not None:  # an explicit command: its call is made, the model is not asked
            messages.append(AIMessage("", tool_calls=[fast], response_metadata={"fast_path": True}))
        run = RunContext(
            user_token=turn.user_token,
            username=turn.username,
            lang=turn.lang,
            tool_names=tuple(routing.tools),
            env_id=turn.env_id or context.env,
            ui_env_id=turn.ui_env_id,
            user_role=role,
            turn=context,
            prefetched=prefetched,  # the model keeps search_dashboards: for another env, another page
        )
        return Prepared({"messages": messages}, run, tuple(said))

    async def answer(self, turn: Turn, answer: Answer, facts: AuditFacts) -> Prepared | list[Event]:
        """The paused call the answer resumes, ready to run in the environment the card showed —
        whatever the page has selected since; or, for a card answered before, what that answer
        was told (nothing runs again)."""
        snapshot = await self._graph.aget_state(thread_of(turn))
        paused = card_answered(snapshot, answer)
        if isinstance(paused, ToolMessage):
            return replayed(snapshot.values.get("messages", []), paused)
        card: dict[str, Any] = paused.value
        facts.card = card
        if turn.action == "confirm" and answer.args:
            await self._check_edits(turn, card, answer.args)
        try:  # the role as ops has it now: a demotion counts from this very confirm
            role = await self._accounts.role(turn.username, turn.user_token, fresh=True)
        except AccountRefused as refused:
            raise Refusal("UNAUTHORIZED", str(refused)) from None
        except AccountUnknown as problem:
            raise Refusal("OPS_UNAVAILABLE", f"your role could not be checked: {problem}") from None
        resume = {"action": turn.action, "digest": answer.digest, "args": answer.args}
        env = card.get("env_id") or None
        context = turn_context(turn, await self._environments(turn), env)
        run = RunContext(
            user_token=turn.user_token,
            username=turn.username,
            lang=as_lang(card.get("lang")) or turn.lang,
            tool_names=tuple(resumed_tools(snapshot.values.get("messages", []), card)),
            env_id=env or context.env,
            ui_env_id=None if env else turn.ui_env_id,  # a card names where it runs
            user_role=role,
            turn=context,
        )
        return Prepared(Command(resume={paused.id: resume}), run)

    async def _check_edits(self, turn: Turn, card: dict[str, Any], edits: dict[str, Any]) -> None:
        """Edited arguments must make a valid call of the card's tool, in configured environments."""
        try:
            await checked_arguments(
                str(card["tool_name"]),
                {**card["tool_args"], **edits},
                lambda: self._ops.environments(turn.user_token),
            )
        except Refused as refused:
            code = "INVALID_ARGUMENTS" if refused.code == "invalid_arguments" else refused.code
            raise Refusal(code, str(refused), "needs_confirmation", facts=refused.facts) from None

    async def _prefetch(self, turn: Turn, context: TurnContext, routing: Routing) -> str | None:
        """The dashboards of the environment the message names, else of the turn's; none when
        the message names several (which one it means is the model's to read)."""
        named = named_envs(turn.text, context.environments)
        env = next(iter(named)) if len(named) == 1 else None if named else context.env
        if not (routing.prefetch_dashboards and self._prefetch_limit and env):
            return None
        return await prefetch_dashboards(self._ops, turn.user_token, env, self._prefetch_limit)

    async def _routing(self, turn: Turn, fast: ToolCall | None, env: str | None) -> Routing:
        if fast is not None:
            return Routing(tools=[fast["name"]], tier="fast-path", degraded=False)
        return await self._router.route(turn.text, env, turn.focus.type if turn.focus else None)

    async def _environments(self, turn: Turn) -> tuple[Environment, ...]:
        """The environments ops has configured; none when it cannot say now (the gate asks again
        for every call and refuses it then)."""
        try:
            return environments_of(await self._ops.environments(turn.user_token))
        except OpsError as problem:
            _log.warning("environments unknown; the gate will judge each call", extra={"error": str(problem)})
            return ()

    async def _role(self, turn: Turn) -> Role | None:
        """The user's role for the gate on a send, as ops said it at most
        ``AGENT_ACCOUNT_CHECK_SECONDS`` ago; unknown when ops cannot say (ops, the authority,
        still decides every call). A user ops refuses (disabled, say) gets no turn at all."""
        try:
            return await self._accounts.role(turn.username, turn.user_token)
        except AccountRefused as refused:
            raise Refusal("UNAUTHORIZED", str(refused)) from None
        except AccountUnknown as problem:
            _log.warning("user role unknown; ops alone will judge", extra={"error": str(problem)})
            return None


def turn_context(turn: Turn, environments: tuple[Environment, ...], env: str | None = None) -> TurnContext:
    """The turn's environment — the card's on a resume, else the submitted one, the page's, else
    the default — with the rest the model is told beside the words."""
    source: EnvSource
    chosen, source = default_env(environments, None)
    if env is not None:
        chosen, source = env, "message"
    elif turn.env is not None:
        chosen, source = turn.env, "page"
    return TurnContext(environments, chosen, source, turn.lang, turn.focus)
