"""One chat command: a message sent, or a person's answer to a card.

A send is admitted (:mod:`sstools.agent.admission`: one at a time per session and per
conversation, with convo's lease), routed, and run through the graph, whose gate
(:mod:`sstools.agent.gate`) decides every tool call; what happens is streamed as the design's
events (:mod:`sstools.agent.stream`) and leaves one audit record (:mod:`sstools.agent.audit`).

A confirm or reject names the card it answers. It resumes exactly that paused call, in the
environment the card showed — whatever the page has selected since — with the role ops gives
the user now; edited arguments are checked against the tool's model and the configured
environments before anything resumes.
"""

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.types import Command
from opentelemetry.trace import SpanKind, Tracer
from pydantic import BaseModel

from sstools.agent.admission import (
    RESUME_WAIT_SECONDS,
    Answer,
    ConversationLocks,
    Leases,
    Refusal,
    TurnLimit,
    answer_of,
    card_answered,
)
from sstools.agent.audit import AnonymousBudget, AuditFacts, audit_record
from sstools.agent.checkpoints import CheckpointsNotReady
from sstools.agent.clients.convo import (
    AuditRecord,
    ConvoClient,
    ConvoUnavailable,
    UploadedFile,
    UploadNotFound,
)
from sstools.agent.clients.docparse import DocparseClient
from sstools.agent.clients.ops import OpsClient, OpsError
from sstools.agent.clients.router import Routing, ToolRouter
from sstools.agent.context import (
    Environment,
    EnvSource,
    Focus,
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
from sstools.agent.language import DEFAULT_LANG, Lang, as_lang, language_of
from sstools.agent.prefetch import prefetch_dashboards
from sstools.agent.stream import Event, error, graph_events, in_language, replayed, shown, state
from sstools.agent.telemetry import TurnMetrics
from sstools.agent.uploads import UPLOAD_NOT_FOUND, fetch_uploads, read_uploads
from sstools.common.accounts import AccountRefused, Accounts, AccountUnknown
from sstools.common.catalogue import Role

_log = logging.getLogger(__name__)
# Refusals whose cause is a service the agent needs, not the person: each is logged as well.
UNAVAILABLE_PEERS = frozenset({"CONVO_UNAVAILABLE", "OPS_UNAVAILABLE"})


@dataclass(frozen=True)
class Turn:
    username: str
    user_token: str
    conversation_id: str
    text: str = ""
    action: str = "send"  # send | confirm | reject
    env_id: str | None = None
    ui_env_id: str | None = None
    focus: Focus | None = None  # the object the page shows
    page_lang: Lang = DEFAULT_LANG
    session_id: str = ""  # the Gradio session: one send at a time in each
    files: tuple[str, ...] = ()  # ids of this user's uploads in convo attached to the message

    @cached_property
    def lang(self) -> Lang:
        """The language the person is answered in: their message's; the page's for a card's
        answer. Read once a turn (the events, the config and the card all use it)."""
        return language_of(self.text, self.page_lang) if self.action == "send" else self.page_lang

    @property
    def env(self) -> str | None:
        """The environment the turn is about: the one submitted, else the page's context."""
        return self.env_id or self.ui_env_id


ROUTED_KEY = "routed_tools"  # in a turn's HumanMessage: the tools the router picked for it


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


@dataclass(frozen=True)
class Clients:
    router: ToolRouter
    convo: ConvoClient
    ops: OpsClient
    docparse: DocparseClient
    accounts: Accounts


class ChatService:
    def __init__(
        self,
        graph: Callable[[], AgentGraph],
        tools: Mapping[str, BaseTool],
        clients: Clients,
        model_name: str,
        tracer: Tracer,
        metrics: TurnMetrics,
        *,
        lease_ttl_seconds: int,
        turn_limit: TurnLimit,
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
        self._accounts = clients.accounts
        self._prefetch_limit = prefetch_limit
        self._model_name = model_name
        self._tracer = tracer
        self._metrics = metrics
        self._service_identity = service_identity
        self._locks = ConversationLocks()
        self._leases = Leases(clients.convo, lease_ttl_seconds)
        self._turn_limit = turn_limit
        self._sessions: set[tuple[str, str]] = set()  # (user, Gradio session) sending now
        self._anonymous = AnonymousBudget()

    @property
    def _graph(self) -> AgentGraph:
        return self._graph_of()

    @staticmethod
    def _thread(turn: Turn) -> RunnableConfig:
        """The run's config: the conversation, the checkpointer's key (the rest is its context)."""
        return {"configurable": {"thread_id": turn.conversation_id}}

    async def run(self, turn: Turn) -> AsyncIterator[Event]:
        """One command, one trace: routing, the model, the tools and what they call are its
        children. Whatever happens, it leaves one audit record."""
        attributes = {"sstools.conversation_id": turn.conversation_id, "sstools.action": turn.action}
        started = time.monotonic()
        seen: list[Event] = []
        facts = AuditFacts()
        first_event: float | None = None
        first_token: float | None = None
        with (
            self._tracer.start_as_current_span("chat turn", kind=SpanKind.SERVER, attributes=attributes),
            self._metrics.active_turns.track_inprogress(),
        ):
            try:
                async for said in self._admitted(turn, facts):
                    event = in_language(said, turn.lang)
                    if first_event is None:
                        first_event = time.monotonic() - started
                    if first_token is None and event.metadata["type"] == "token":
                        first_token = time.monotonic() - started
                    seen.append(event)  # the audit's, whole
                    yield shown(event)
            finally:
                record = self._record(turn, seen, time.monotonic() - started, facts)
                self._metrics.observe(record, (event.metadata for event in seen), first_event, first_token)
                await asyncio.shield(self._audit(record, turn.user_token))

    async def refuse(self, turn: Turn, code: str, message: str, **facts: str) -> AsyncIterator[Event]:
        """A submit the edge could not take as it was (too big, malformed, its token not taken):
        said, and audited — one that names no one within :class:`AnonymousBudget`."""
        started = time.monotonic()
        events = [in_language(error(code, message, **facts), turn.lang), state("failed")]
        for event in events:
            yield event
        record = self._record(turn, events, time.monotonic() - started, AuditFacts(refused=code))
        self._metrics.observe(record, (event.metadata for event in events), None, None)
        if turn.user_token or self._anonymous.take():
            await self._audit(record, turn.user_token)
        else:
            _log.warning("refusal not audited: too many without a token this minute", extra={"code": code})

    def _record(
        self, turn: Turn, events: list[Event], latency_seconds: float, facts: AuditFacts
    ) -> AuditRecord:
        edits: dict[str, Any] = {}
        if turn.action == "confirm":
            with contextlib.suppress(Refusal):  # said in the stream already
                edits = answer_of(turn.action, turn.text).args
        return audit_record(
            user=turn.username,
            conversation_id=turn.conversation_id,
            action=turn.action,
            edited_args=edits,
            events=events,
            latency_seconds=latency_seconds,
            service_identity=self._service_identity,
            facts=facts,
        )

    async def _audit(self, record: AuditRecord, user_token: str) -> None:
        try:
            await self._convo.record_audit(record, user_token)
        except ConvoUnavailable as problem:  # the turn is over either way; the log keeps what it was
            _log.warning("audit record not kept", extra={"error": str(problem), "audit": asdict(record)})

    async def _admitted(self, turn: Turn, facts: AuditFacts) -> AsyncIterator[Event]:
        try:
            try:
                self._graph_of()
            except CheckpointsNotReady as problem:
                raise Refusal("NOT_READY", str(problem)) from None
            if turn.action in ("confirm", "reject"):
                answer = answer_of(turn.action, turn.text)
                async with self._locks.held(turn.conversation_id, RESUME_WAIT_SECONDS) as held:
                    if not held:
                        raise Refusal("BUSY", "the conversation is still streaming; try again")
                    async with self._leases.held(
                        turn.user_token,
                        turn.conversation_id,
                        first_text=None,
                        wait_seconds=RESUME_WAIT_SECONDS,
                    ):
                        async for event in self._resume(turn, answer, facts):
                            yield event
                return
            session = (turn.username, turn.session_id)
            if session in self._sessions:
                raise Refusal("BUSY", "one message at a time: the previous one is still being answered")
            await self._turn_limit.count(self._convo, turn.user_token)
            self._sessions.add(session)
            try:
                async with self._locks.held(turn.conversation_id) as held:
                    if not held:
                        raise Refusal("BUSY", "this conversation is answering another message")
                    async for event in self._with_uploads(turn):
                        yield event
            finally:
                self._sessions.discard(session)
        except Refusal as refusal:
            facts.refused = refusal.code
            if refusal.code in UNAVAILABLE_PEERS:  # the person sees the cause; operators the detail
                _log.warning("turn refused", extra={"code": refusal.code, "error": str(refusal)})
            yield error(refusal.code, str(refusal), **refusal.details())
            yield state(refusal.state)

    async def _with_uploads(self, turn: Turn) -> AsyncIterator[Event]:
        """The files the turn names, fetched from convo before anything of the turn is recorded:
        one that is not this user's upload for this conversation refuses the whole turn. Once
        the turn has run, its uploads are deleted, however it ended."""
        try:
            files = await fetch_uploads(self._convo, turn.user_token, turn.conversation_id, turn.files)
        except UploadNotFound:
            raise Refusal(
                UPLOAD_NOT_FOUND,
                "an attached file is not an upload of yours in this conversation (or it expired): "
                "upload it again",
            ) from None
        except ConvoUnavailable as problem:
            raise Refusal("CONVO_UNAVAILABLE", str(problem)) from None
        try:
            async with self._leases.held(turn.user_token, turn.conversation_id, first_text=turn.text):
                async for event in self._send(turn, files):
                    yield event
        finally:
            if turn.files:
                await asyncio.shield(self._forget_uploads(turn))

    async def _forget_uploads(self, turn: Turn) -> None:
        try:
            await self._convo.delete_uploads(turn.user_token, turn.conversation_id, list(turn.files))
        except ConvoUnavailable as problem:  # they expire by themselves; say so in the log
            _log.warning("uploads not deleted", extra={"error": str(problem)})

    async def _send(self, turn: Turn, files: list[UploadedFile]) -> AsyncIterator[Event]:
        environments = await self._environments(turn)
        if turn.env is not None and environments and turn.env not in {env.id for env in environments}:
            problem = f"no environment {turn.env!r} is configured"
            raise Refusal("INVALID_ENVIRONMENT", problem, facts={"env_id": turn.env})
        context = self._context(turn, environments)
        # What needs only reading runs side by side: the checkpoint (a pause pending?), the
        # router's choice and the user's role.
        fast = fast_confirmation_tool(turn.text, environments)
        snapshot, routing, role = await asyncio.gather(
            self._graph.aget_state(self._thread(turn)),
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
        yield Event.of(ContextEvent(env_id=context.env, env_source=context.env_source))
        yield Event.of(RoutingEvent(tools=routing.tools, tier=routing.tier, model=self._model_name))
        # The thread keeps only what a window can still show (convo keeps the whole history).
        messages: list[BaseMessage] = [*beyond_reach(snapshot.values.get("messages", []))]
        for upload in uploads:
            if upload.problem is not None:  # said, and the message goes on without the file
                yield Event.of(upload.problem, upload.problem.message)
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
        events = graph_events(self._graph, {"messages": messages}, self._thread(turn), run)
        async for event in self._recorded(turn, events):
            yield event

    def _context(
        self, turn: Turn, environments: tuple[Environment, ...], env: str | None = None
    ) -> TurnContext:
        """The turn's environment — the card's on a resume, else the submitted one, the page's,
        else the default — with the rest the model is told beside the words."""
        source: EnvSource
        chosen, source = default_env(environments, None)
        if env is not None:
            chosen, source = env, "message"
        elif turn.env is not None:
            chosen, source = turn.env, "page"
        return TurnContext(environments, chosen, source, turn.lang, turn.focus)

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

    async def _resume(self, turn: Turn, answer: Answer, facts: AuditFacts) -> AsyncIterator[Event]:
        snapshot = await self._graph.aget_state(self._thread(turn))
        paused = card_answered(snapshot, answer)
        if isinstance(paused, ToolMessage):  # answered before: the same answer, nothing run again
            for event in replayed(snapshot.values.get("messages", []), paused):
                yield event
            return
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
        # The card's environment, not the page's current one: the call runs what was shown.
        env = card.get("env_id") or None
        context = self._context(turn, await self._environments(turn), env)
        routed = resumed_tools(snapshot.values.get("messages", []), card)
        run = RunContext(
            user_token=turn.user_token,
            username=turn.username,
            lang=as_lang(card.get("lang")) or turn.lang,
            tool_names=tuple(routed),
            env_id=env or context.env,
            ui_env_id=None if env else turn.ui_env_id,  # a card names where it runs
            user_role=role,
            turn=context,
        )
        events = graph_events(self._graph, Command(resume={paused.id: resume}), self._thread(turn), run)
        async for event in self._recorded(turn, events):
            yield event

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
                    kept.append(
                        {key: value for key, value in shown(event).metadata.items() if key != "output"}
                    )
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
                turn.user_token,
                turn.conversation_id,
                str(uuid.uuid4()),
                text,
                {"events": json.loads(json.dumps(events, default=str))},
                partial=partial,
            )
        except ConvoUnavailable as problem:  # the answer stays in the checkpoint; say so in the log
            _log.warning("answer not kept in convo", extra={"error": str(problem)})
