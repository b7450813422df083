"""One chat command, composed of the stages of :mod:`sstools.agent.turn` — admit, gather, run
the graph, stream, record — in one trace, leaving one audit record whatever happens.

A send is admitted, gathered and run through the graph, whose gate (:mod:`sstools.agent.gate`)
decides every tool call. A confirm or reject names the card it answers and resumes exactly that
paused call, in the environment the card showed, with the role ops gives the user now; how a
confirmed change runs once at most is told in :mod:`sstools.agent.turn`.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

from opentelemetry.trace import SpanKind, Tracer

from sstools.agent.admission import Refusal
from sstools.agent.audit import AuditFacts
from sstools.agent.clients.convo import ConvoClient, TurnBudget, TurnEnd
from sstools.agent.clients.docparse import DocparseClient
from sstools.agent.clients.ops import OpsClient
from sstools.agent.clients.router import ToolRouter
from sstools.agent.graph import AgentGraph
from sstools.agent.stream import Event, error, graph_events, in_language, shown, state
from sstools.agent.telemetry import TurnMetrics
from sstools.agent.turn import Turn
from sstools.agent.turn.admit import Admission
from sstools.agent.turn.gather import Gathering, Prepared, thread_of
from sstools.agent.turn.record import Recorder
from sstools.common.accounts import Accounts

_log = logging.getLogger(__name__)
# Refusals whose cause is a service the agent needs, not the person: each is logged as well.
UNAVAILABLE_PEERS = frozenset({"CONVO_UNAVAILABLE", "OPS_UNAVAILABLE"})


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
        clients: Clients,
        model_name: str,
        tracer: Tracer,
        metrics: TurnMetrics,
        *,
        lease_ttl_seconds: int,
        turn_budget: TurnBudget,
        service_identity: str,
        prefetch_limit: int,
    ) -> None:
        self._graph_of = graph
        self._tracer = tracer
        self._metrics = metrics
        self._admission = Admission(
            graph, clients.convo, lease_ttl_seconds=lease_ttl_seconds, turn_budget=turn_budget
        )
        self._gathering = Gathering(
            graph,
            router=clients.router,
            convo=clients.convo,
            ops=clients.ops,
            docparse=clients.docparse,
            accounts=clients.accounts,
            model_name=model_name,
            prefetch_limit=prefetch_limit,
        )
        self._recorder = Recorder(clients.convo, service_identity)

    async def run(self, turn: Turn) -> AsyncIterator[Event]:
        """One command, one trace: routing, the model, the tools and what they call are its
        children. Whatever happens, it leaves one audit record."""
        attributes = {"sstools.conversation_id": turn.conversation_id, "sstools.action": turn.action}
        started = time.monotonic()
        seen: list[Event] = []
        facts = AuditFacts()
        first_event: float | None = None
        first_token: float | None = None
        end = TurnEnd(turn.conversation_id)  # what the command's last call to convo carries
        with (
            self._tracer.start_as_current_span("chat turn", kind=SpanKind.SERVER, attributes=attributes),
            self._metrics.active_turns.track_inprogress(),
        ):
            try:
                async for said in self._stages(turn, facts, end):
                    event = in_language(said, turn.lang)
                    if first_event is None:
                        first_event = time.monotonic() - started
                    if first_token is None and event.metadata["type"] == "token":
                        first_token = time.monotonic() - started
                    seen.append(event)  # the audit's, whole
                    yield shown(event)
            finally:
                record = self._recorder.record(turn, seen, time.monotonic() - started, facts)
                self._metrics.observe(record, (event.metadata for event in seen), first_event, first_token)
                await asyncio.shield(self._recorder.end(turn, end, record))

    async def refuse(self, turn: Turn, code: str, message: str, **facts: str) -> AsyncIterator[Event]:
        """A submit the edge could not take as it was (too big, malformed, its token not taken):
        said, and audited."""
        started = time.monotonic()
        events = [in_language(error(code, message, **facts), turn.lang), state("failed")]
        for event in events:
            yield event
        record = self._recorder.record(turn, events, time.monotonic() - started, AuditFacts(refused=code))
        self._metrics.observe(record, (event.metadata for event in events), None, None)
        await self._recorder.end(turn, TurnEnd(turn.conversation_id), record)

    async def _stages(self, turn: Turn, facts: AuditFacts, end: TurnEnd) -> AsyncIterator[Event]:
        """Admit → gather → run the graph → record the answer; a refusal at any stage before the
        graph runs is said as the turn's error and state. Each stage is a span of the turn's."""
        try:
            async with contextlib.AsyncExitStack() as admitted:
                if turn.action == "send":
                    with self._stage("admit"):
                        files = await admitted.enter_async_context(self._admission.send(turn, end))
                    with self._stage("gather"):
                        prepared = await self._gathering.send(turn, files)
                else:
                    with self._stage("admit"):
                        answer = await admitted.enter_async_context(self._admission.answer(turn, end))
                    with self._stage("gather"):
                        resumed = await self._gathering.answer(turn, answer, facts)
                    if isinstance(resumed, list):  # answered before: the same answer, nothing run again
                        for event in resumed:
                            yield event
                        return
                    prepared = resumed
                async for event in self._ran(turn, prepared, end):
                    yield event
        except Refusal as refusal:
            facts.refused = refusal.code
            if refusal.code in UNAVAILABLE_PEERS:  # the person sees the cause; operators the detail
                _log.warning("turn refused", extra={"code": refusal.code, "error": str(refusal)})
            yield error(refusal.code, str(refusal), **refusal.details())
            yield state(refusal.state)

    async def _ran(self, turn: Turn, prepared: Prepared, end: TurnEnd) -> AsyncIterator[Event]:
        for event in prepared.said:
            yield event
        with self._stage("graph"):
            events = graph_events(self._graph_of(), prepared.graph_input, thread_of(turn), prepared.run)
            async for event in self._recorder.kept(end, events):
                yield event

    @contextlib.contextmanager
    def _stage(self, name: str) -> Iterator[None]:
        """A span for one stage of the turn, the turn's child. Never made current: a stage spans
        the generator's yields, and a context attached across a yield cannot be detached."""
        span = self._tracer.start_span(f"turn {name}")
        try:
            yield
        finally:
            span.end()
