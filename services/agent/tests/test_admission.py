"""Admission (admission.py): what a confirm's message must name and which paused call it may
resume — judged on snapshots of a small real LangGraph graph that pauses on cards as the gate
does —, the per-conversation locks, and the per-user turn limit and conversation leases against
a real convo service started in-process on a scratch database."""

import asyncio
import json
import logging
import math
import os
import re
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import pytest
import pytest_asyncio
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Interrupt, Send, StateSnapshot, interrupt
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.agent.admission import (
    Answer,
    ConversationLocks,
    Leases,
    Refusal,
    answer_of,
    answered_result,
    card_answered,
)
from sstools.agent.clients.convo import AuditRecord, ConvoClient, TurnBudget, TurnEnd
from sstools.agent.turn.gather import ROUTED_KEY, resumed_tools
from sstools.common.db import create_engine
from sstools.common.grpc_auth import FixedServiceToken
from sstools.convo.main import assemble as assemble_convo
from sstools.convo.store import MIGRATIONS
from sstools.devstack.agentstack import convo_settings_for
from sstools.devstack.keys import service_token, user_token
from sstools.devstack.testing import free_port, scratch_database, started_service, wait_until

AGENT_TOKEN = FixedServiceToken(service_token())  # the service token ops gives the agent

# One convo (and one event loop for it) serves the module's tests of it; each test has its own
# users and conversations, so none sees another's state.
on_convo_loop = pytest.mark.asyncio(loop_scope="module")

CARD_1 = {"call_id": "call-1", "digest": "d1" * 32, "tool_name": "create_dashboard"}
CARD_2 = {"call_id": "call-2", "digest": "d2" * 32, "tool_name": "delete_dashboard"}


def _refusal_of(snapshot: StateSnapshot, answer: Answer) -> tuple[str, str]:
    with pytest.raises(Refusal) as refused:
        card_answered(snapshot, answer)
    return refused.value.code, refused.value.state


# ---- answer_of ---------------------------------------------------------------------------------


def test_an_answer_names_its_card() -> None:
    message = json.dumps({"call_id": "c1", "digest": "d" * 64, "args": {"title": "x"}})
    assert answer_of("confirm", message) == Answer("confirm", "c1", "d" * 64, {"title": "x"})
    # no edits: args may be left out
    assert answer_of("reject", '{"call_id": "c1", "digest": "d"}') == Answer("reject", "c1", "d", {})
    for unbound in (
        "",
        "{}",
        '{"call_id": "c1"}',
        '{"digest": "d"}',
        '{"call_id": 1, "digest": "d"}',
        '{"call_id": "c", "digest": 2}',
        '{"call_id": "c", "digest": "d", "args": []}',
        '{"call_id": "c", "digest": "d", "args": null}',
        "[1]",
        "null",
    ):
        with pytest.raises(Refusal) as refused:
            answer_of("confirm", unbound)
        assert (refused.value.code, refused.value.state) == ("CONFIRMATION_UNBOUND", "failed"), unbound
        # the refusal tells an API client which fields a confirm must carry
        assert re.findall(r'"(\w+)"', str(refused.value)) == ["call_id", "digest", "args"]


# ---- Refusal -----------------------------------------------------------------------------------


def test_a_refusal_adds_retry_after_to_its_error_only_when_it_has_one() -> None:
    assert Refusal("BUSY", "busy").details() == {}
    assert Refusal("RATE_LIMITED", "later", retry_after=7).details() == {"retry_after": 7}
    named = Refusal("INVALID_ENVIRONMENT", "no qa", facts={"env_id": "qa"})
    assert (named.details(), named.facts) == ({"env_id": "qa"}, {"env_id": "qa"})
    both = Refusal("RATE_LIMITED", "later", retry_after=3, facts={"env_id": "dev"})
    assert both.details() == {"env_id": "dev", "retry_after": 3}
    plain = Refusal("NOTHING_PENDING", "nothing")
    assert (plain.code, plain.state, plain.retry_after, str(plain), plain.facts) == (
        "NOTHING_PENDING",
        "failed",
        None,
        "nothing",
        {},
    )


# ---- card_answered and answered_result on a real paused graph -----------------------------------


class _Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    cards: list[Any]


async def _gate(card: Any) -> dict[str, Any]:
    """Pauses on a card as the agent's gate does, and records on the result the digest of the
    card answered and the answer (gate.ANSWERED), as the gate does once a person answered.
    A card that is no dict stands for any other pause a graph may make (a question, say)."""
    answer = interrupt(card)
    result = ToolMessage(
        content=f"{card['tool_name']}: {answer['action']}",
        tool_call_id=card["call_id"],
        artifact={"answered": {"digest": card["digest"], "action": answer["action"]}},
    )
    return {"messages": [result]}


def _cards_asked(state: _Chat) -> list[Send]:
    return [Send("gate", card) for card in state["cards"]]


def _paused_graph() -> CompiledStateGraph[Any, Any, Any, Any]:
    builder = StateGraph(_Chat)
    builder.add_node("gate", RunnableLambda(_gate))  # its input is the card a Send carries
    builder.add_conditional_edges(START, _cards_asked, ["gate"])
    return builder.compile(checkpointer=InMemorySaver())


@dataclass
class _Thread:
    """One conversation on the paused graph."""

    graph: CompiledStateGraph[Any, Any, Any, Any]
    thread_id: str

    @property
    def config(self) -> RunnableConfig:
        return {"configurable": {"thread_id": self.thread_id}}

    async def ask(self, *cards: Any) -> StateSnapshot:
        """A turn whose calls each wait on their card."""
        await self.graph.ainvoke({"messages": [HumanMessage("go")], "cards": list(cards)}, self.config)
        return await self.snapshot()

    async def answer(self, card: dict[str, str], action: str) -> StateSnapshot:
        snapshot = await self.snapshot()
        (paused,) = [waiting for waiting in snapshot.interrupts if waiting.value == card]
        resume = {"action": action, "digest": card["digest"]}
        await self.graph.ainvoke(Command(resume={paused.id: resume}), self.config)
        return await self.snapshot()

    async def snapshot(self) -> StateSnapshot:
        return await self.graph.aget_state(self.config)


@pytest.fixture
def thread() -> _Thread:
    return _Thread(_paused_graph(), str(uuid.uuid4()))


async def test_an_answer_resumes_the_paused_call_it_names(thread: _Thread) -> None:
    snapshot = await thread.ask(CARD_1, CARD_2)
    assert sorted(paused.value["call_id"] for paused in snapshot.interrupts) == ["call-1", "call-2"]
    for card in (CARD_1, CARD_2):
        expected: list[Interrupt] = [paused for paused in snapshot.interrupts if paused.value == card]
        answered = card_answered(snapshot, Answer("confirm", card["call_id"], card["digest"], {}))
        assert [answered] == expected


async def test_an_answer_to_another_card_of_a_waiting_call_is_refused(thread: _Thread) -> None:
    snapshot = await thread.ask(CARD_1, CARD_2)
    stale = Answer("confirm", "call-2", CARD_1["digest"], {})
    assert _refusal_of(snapshot, stale) == ("CONFIRMATION_MISMATCH", "needs_confirmation")


async def test_an_answer_naming_no_waiting_call_is_refused_while_a_card_waits(thread: _Thread) -> None:
    snapshot = await thread.ask(CARD_1)
    other = Answer("confirm", "call-9", CARD_1["digest"], {})
    assert _refusal_of(snapshot, other) == ("CONFIRMATION_MISMATCH", "needs_confirmation")


async def test_a_pause_that_is_no_card_is_never_what_an_answer_resumes(thread: _Thread) -> None:
    snapshot = await thread.ask("which environment?", CARD_1)
    assert [paused.value for paused in snapshot.interrupts] == ["which environment?", CARD_1]
    resumed = card_answered(snapshot, Answer("confirm", "call-1", CARD_1["digest"], {}))
    assert resumed == snapshot.interrupts[1]
    other = Answer("confirm", "call-9", CARD_1["digest"], {})
    assert _refusal_of(snapshot, other) == ("CONFIRMATION_MISMATCH", "needs_confirmation")


async def test_a_state_that_keeps_no_messages_is_judged_all_the_same(thread: _Thread) -> None:
    # the same pause, as a graph whose state has no messages channel would save it
    paused = await thread.ask(CARD_1)
    snapshot = paused._replace(values={"cards": [CARD_1]})
    assert card_answered(snapshot, Answer("confirm", "call-1", CARD_1["digest"], {})) == paused.interrupts[0]
    other = Answer("confirm", "call-9", CARD_1["digest"], {})
    assert _refusal_of(snapshot, other) == ("CONFIRMATION_MISMATCH", "needs_confirmation")
    assert _refusal_of(snapshot._replace(interrupts=()), other) == ("NOTHING_PENDING", "failed")


async def test_an_answer_in_a_conversation_without_state_finds_the_checkpoint_expired(
    thread: _Thread,
) -> None:
    snapshot = await thread.snapshot()
    answer = Answer("confirm", "call-1", CARD_1["digest"], {})
    assert _refusal_of(snapshot, answer) == ("CHECKPOINT_EXPIRED", "failed")
    with pytest.raises(Refusal) as refused:  # what the person reads under the card
        card_answered(snapshot, answer)
    assert str(refused.value) == "nothing to resume: this conversation has no saved state"


async def test_the_same_answer_again_gets_the_first_ones_result(thread: _Thread) -> None:
    await thread.ask(CARD_1)
    snapshot = await thread.answer(CARD_1, "confirm")
    assert snapshot.interrupts == ()
    first_result = snapshot.values["messages"][-1]
    again = card_answered(snapshot, Answer("confirm", "call-1", CARD_1["digest"], {}))
    assert isinstance(again, ToolMessage)  # a result to replay, no pause to resume
    assert (again.id, again.content) == (first_result.id, "create_dashboard: confirm")


@pytest.mark.parametrize(
    "answer",
    [
        Answer("reject", "call-1", CARD_1["digest"], {}),  # another action on the answered card
        Answer("confirm", "call-1", CARD_2["digest"], {}),  # another card of that call
        Answer("confirm", "call-9", CARD_1["digest"], {}),  # a call never asked about
    ],
)
async def test_another_answer_once_nothing_waits_finds_nothing_pending(
    thread: _Thread, answer: Answer
) -> None:
    await thread.ask(CARD_1)
    snapshot = await thread.answer(CARD_1, "confirm")
    assert _refusal_of(snapshot, answer) == ("NOTHING_PENDING", "failed")


async def test_a_repeated_answer_gets_its_result_even_while_a_later_card_waits(thread: _Thread) -> None:
    await thread.ask(CARD_1)
    await thread.answer(CARD_1, "reject")
    snapshot = await thread.ask(CARD_2)
    again = card_answered(snapshot, Answer("reject", "call-1", CARD_1["digest"], {}))
    assert isinstance(again, ToolMessage)
    assert (again.content, again.tool_call_id) == ("create_dashboard: reject", "call-1")
    # the other action on that card is not the answer it had: the card now shown must be answered
    other = Answer("confirm", "call-1", CARD_1["digest"], {})
    assert _refusal_of(snapshot, other) == ("CONFIRMATION_MISMATCH", "needs_confirmation")


def _result(call_id: str, artifact: Any) -> ToolMessage:
    return ToolMessage(content=f"result of {call_id}", tool_call_id=call_id, artifact=artifact)


def test_only_a_result_recording_this_very_answer_is_returned() -> None:
    confirmed = {"answered": {"digest": "d1", "action": "confirm"}}
    answer = Answer("confirm", "call-1", "d1", {})
    asked = AIMessage("", tool_calls=[{"id": "call-1", "name": "create_dashboard", "args": {}}])
    found = _result("call-1", confirmed)
    assert answered_result([asked, found, _result("call-2", None)], answer) is found
    assert answered_result([asked], answer) is None  # asked, not answered yet
    assert answered_result([_result("call-1", None)], answer) is None  # ran without a card
    assert answered_result([_result("call-1", {"other": 1})], answer) is None
    assert answered_result([_result("call-1", {"answered": {"digest": "d1"}})], answer) is None
    assert answered_result([_result("call-1", "answered")], answer) is None


def test_the_latest_result_of_a_call_is_the_one_judged() -> None:
    earlier = _result("call-1", {"answered": {"digest": "d1", "action": "confirm"}})
    later = _result("call-1", {"answered": {"digest": "d2", "action": "confirm"}})
    assert answered_result([earlier, later], Answer("confirm", "call-1", "d1", {})) is None
    assert answered_result([earlier, later], Answer("confirm", "call-1", "d2", {})) is later


# ---- ConversationLocks -------------------------------------------------------------------------


async def test_locks_are_exclusive_and_forgotten_when_unused() -> None:
    locks = ConversationLocks()
    async with locks.held("a") as first:
        assert first
        async with locks.held("a") as second:
            assert not second  # no wait: busy
        async with locks.held("a", wait_seconds=0.05) as waited:
            assert not waited  # waited, still busy
        async with locks.held("b") as other:
            assert other  # another conversation is not held up
        assert len(locks) == 1
    assert len(locks) == 0

    async def hold_briefly() -> None:
        async with locks.held("a") as held:
            assert held
            await asyncio.sleep(0.05)

    holding = asyncio.create_task(hold_briefly())
    await asyncio.sleep(0)
    async with locks.held("a", wait_seconds=1.0) as after:
        assert after  # a confirm waits for the stream that is closing
    await holding
    assert len(locks) == 0


# ---- Leases and the turn budget against a real convo----------------------------------------------


@dataclass(frozen=True)
class _Convo:
    target: str
    database_url: str
    engine: AsyncEngine

    async def lease(self, conversation_id: str) -> dict[str, Any] | None:
        """The conversation's lease row as convo keeps it, with the database's clock beside it."""
        async with self.engine.connect() as connection:
            row = (
                await connection.execute(
                    text(
                        "SELECT holder, expires_at, now() AS now FROM agent_conversation_leases"
                        " WHERE conversation_id = :id"
                    ),
                    {"id": conversation_id},
                )
            ).one_or_none()
        return None if row is None else dict(row._mapping)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def convo(database_url: str) -> AsyncIterator[_Convo]:
    """The whole convo service, in-process on free ports, on a database of this module's own."""
    with scratch_database(database_url) as url:
        await asyncio.to_thread(MIGRATIONS.upgrade, url)
        engine = create_engine(url)
        try:
            async with started_service(convo_settings_for(url), assemble_convo, TracerProvider()) as service:
                yield _Convo(f"127.0.0.1:{service.ports['grpc']}", url, engine)
        finally:
            await engine.dispose()


@pytest_asyncio.fixture(loop_scope="module")
async def client(convo: _Convo) -> AsyncIterator[ConvoClient]:
    """The agent's own convo client."""
    convo_client = ConvoClient(convo.target, 5.0, TracerProvider(), AGENT_TOKEN)
    yield convo_client
    await convo_client.close()


@pytest_asyncio.fixture(loop_scope="module")
async def down() -> AsyncIterator[ConvoClient]:
    """The agent's convo client pointed at a port nothing listens on: convo is down."""
    convo_client = ConvoClient(f"127.0.0.1:{free_port()}", 5.0, TracerProvider(), AGENT_TOKEN)
    yield convo_client
    await convo_client.close()


def _held_here(holder: str) -> bool:
    """Whether a lease holder is a command of this process: its host and pid (read now, not at
    import: a forked test runner has another pid), then the command's own 12 hex digits."""
    this_pod = re.escape(f"{socket.gethostname()}:{os.getpid()}")
    return re.fullmatch(rf"{this_pod}:[0-9a-f]{{12}}", holder) is not None


def _grpc_status(error: str) -> str:
    """The gRPC status a convo client's error names (``convo: <STATUS>: <details>``)."""
    service, status, _ = error.split(": ", 2)
    return status if service == "convo" else f"not convo's: {error}"


def _user() -> str:
    """A new person's user token (convo takes who they are from it)."""
    return user_token(f"user-{uuid.uuid4().hex[:8]}")


async def _refused(block: Awaitable[Any]) -> Refusal:
    with pytest.raises(Refusal) as refused:
        await block
    return refused.value


@asynccontextmanager
async def _turn(
    leases: Leases, client: ConvoClient, user: str, conversation: str, **held: Any
) -> AsyncIterator[TurnEnd]:
    """A command holding the conversation's lease for the block, given back by its end's one
    call to convo as the chat service ends every command (ChatService.run)."""
    end = TurnEnd(conversation)
    try:
        async with leases.held(user, end, **held):
            yield end
    finally:
        if end.holder:
            record = AuditRecord(user="", conversation_id=conversation, decision="allowed", outcome="success")
            await client.end_turn(user, end, record)


async def _send(client: ConvoClient, user: str, budget: TurnBudget, conversation: str = "") -> None:
    """A new message that ran: its lease taken with the person's budget, and given back."""
    conversation = conversation or str(uuid.uuid4())
    async with _turn(
        Leases(client, ttl_seconds=30), client, user, conversation, first_text="hello", budget=budget
    ):
        pass


@on_convo_loop
async def test_turns_past_the_limit_are_rate_limited_with_the_wait(
    client: ConvoClient, convo: _Convo
) -> None:
    budget = TurnBudget(turns=2, window_seconds=60)
    user, kept = _user(), str(uuid.uuid4())
    started = time.monotonic()
    await _send(client, user, budget, kept)
    await _send(client, user, budget)
    refused = str(uuid.uuid4())
    refusal = await _refused(_send(client, user, budget, refused))
    spent = math.ceil(time.monotonic() - started)  # whole seconds of the window used (0 or 1 as a rule)
    assert (refusal.code, refusal.state) == ("RATE_LIMITED", "failed")
    assert refusal.retry_after is not None
    assert 60 - spent <= refusal.retry_after <= 60  # the rest of the window
    assert refusal.details() == {"retry_after": refusal.retry_after}
    # the message the person reads gives the same wait
    assert re.findall(r"\d+", str(refusal)) == [str(refusal.retry_after)]
    assert await convo.lease(refused) is None  # nothing taken for the refused message
    # a confirm is no new message: the budget does not hold it back
    await _hold(client, user, kept)


@on_convo_loop
async def test_the_limit_counts_each_user_alone(client: ConvoClient) -> None:
    budget = TurnBudget(turns=1, window_seconds=60)
    first, second = _user(), _user()
    await _send(client, first, budget)
    await _send(client, second, budget)
    assert (await _refused(_send(client, first, budget))).code == "RATE_LIMITED"


@on_convo_loop
async def test_a_send_waiting_for_the_lease_is_counted_once(client: ConvoClient) -> None:
    user, conversation = _user(), str(uuid.uuid4())
    budget = TurnBudget(turns=1, window_seconds=60)
    leases = Leases(client, ttl_seconds=30)
    assert await client.acquire_lease(user, conversation, "other-tab", 1, first_text="hello")  # lapses in 1 s
    async with _turn(leases, client, user, conversation, first_text="hello", budget=budget, wait_seconds=10):
        pass  # it tried ten times a second until the other tab's lease lapsed: one turn all the same
    assert (await _refused(_send(client, user, budget))).code == "RATE_LIMITED"


@on_convo_loop
async def test_turns_cannot_be_counted_while_convo_is_down(down: ConvoClient) -> None:
    refusal = await _refused(_send(down, _user(), TurnBudget(turns=5, window_seconds=60)))
    assert (refusal.code, refusal.state, refusal.retry_after) == ("CONVO_UNAVAILABLE", "failed", None)
    assert _grpc_status(str(refusal)) == "UNAVAILABLE"  # the message tells what convo answered


async def _hold(
    client: ConvoClient,
    user: str,
    conversation_id: str,
    wait_seconds: float = 0.0,
    leases: Leases | None = None,
) -> None:
    """A confirm's lease taken and given back at once (a command that ran), by ``leases`` (this
    pod's) or in a pod of its own."""
    leases = leases or Leases(client, ttl_seconds=30)
    async with _turn(leases, client, user, conversation_id, first_text=None, wait_seconds=wait_seconds):
        pass


@on_convo_loop
async def test_a_send_creates_its_conversation_and_holds_its_lease_in_convo(
    client: ConvoClient, convo: _Convo
) -> None:
    user, conversation = _user(), str(uuid.uuid4())
    async with _turn(Leases(client, ttl_seconds=30), client, user, conversation, first_text="hello") as end:
        lease = await convo.lease(conversation)
        assert lease is not None
        assert lease["holder"] == end.holder  # left for the command's end to give back
        # it names this pod (to find who holds it) and this one command in it
        assert _held_here(lease["holder"]), lease["holder"]
        # for its TTL (a few seconds of it may have passed under load)
        assert 20 < (lease["expires_at"] - lease["now"]).total_seconds() <= 30
    assert await convo.lease(conversation) is None  # given back at the end


@on_convo_loop
async def test_a_held_lease_makes_another_command_busy(client: ConvoClient) -> None:
    user, conversation = _user(), str(uuid.uuid4())
    this_pod = Leases(client, ttl_seconds=30)
    async with _turn(this_pod, client, user, conversation, first_text="hello"):
        refusal = await _refused(_hold(client, user, conversation, leases=this_pod))
        assert (refusal.code, refusal.state) == ("BUSY", "failed")  # another tab
        refusal = await _refused(_hold(client, user, conversation))  # another pod
        assert (refusal.code, refusal.state) == ("BUSY", "failed")
        started = time.monotonic()
        refusal = await _refused(_hold(client, user, conversation, wait_seconds=0.3))
        assert refusal.code == "BUSY"
        assert time.monotonic() - started >= 0.3  # it waited that long first
    await _hold(client, user, conversation)  # given back at the command's end: the next one gets it


@on_convo_loop
async def test_a_lease_is_left_to_the_commands_end_however_its_block_ended(
    client: ConvoClient, convo: _Convo
) -> None:
    user, conversation = _user(), str(uuid.uuid4())
    end = TurnEnd(conversation)
    with pytest.raises(RuntimeError):
        async with Leases(client, ttl_seconds=30).held(user, end, first_text="hello"):
            raise RuntimeError("the turn broke")
    lease = await convo.lease(conversation)
    assert lease is not None
    assert lease["holder"] == end.holder
    record = AuditRecord(user="", conversation_id=conversation, decision="allowed", outcome="failed")
    assert (await client.end_turn(user, end, record)).released
    assert await convo.lease(conversation) is None


@on_convo_loop
async def test_a_waiting_command_gets_the_lease_a_dead_holder_left_to_lapse(
    client: ConvoClient, convo: _Convo
) -> None:
    user, conversation = _user(), str(uuid.uuid4())
    # a pod that died holding the lease for one second, never to give it back
    assert await client.acquire_lease(user, conversation, "dead-pod", 1, first_text="hello")
    leases = Leases(client, ttl_seconds=30)
    async with _turn(leases, client, user, conversation, first_text=None, wait_seconds=10):
        lease = await convo.lease(conversation)
        assert lease is not None
        assert _held_here(lease["holder"]), lease["holder"]


@on_convo_loop
async def test_a_held_lease_is_renewed_past_its_ttl(client: ConvoClient, convo: _Convo) -> None:
    user, conversation = _user(), str(uuid.uuid4())
    async with _turn(Leases(client, ttl_seconds=1), client, user, conversation, first_text="hello"):
        taken = await convo.lease(conversation)
        assert taken is not None

        async def first_ttl_over() -> bool:
            lease = await convo.lease(conversation)
            return lease is not None and lease["now"] > taken["expires_at"]

        await wait_until(first_ttl_over, 5, "the lease's first TTL to pass")
        lease = await convo.lease(conversation)
        assert lease is not None
        assert lease["holder"] == taken["holder"]
        # renewed by at most its TTL: if this pod died now, the lease would still lapse soon
        assert 0 < (lease["expires_at"] - lease["now"]).total_seconds() <= 1
        assert (await _refused(_hold(client, user, conversation))).code == "BUSY"


@on_convo_loop
async def test_a_confirm_in_a_conversation_convo_does_not_know_finds_the_checkpoint_expired(
    client: ConvoClient,
) -> None:
    user, conversation = _user(), str(uuid.uuid4())
    refusal = await _refused(_hold(client, user, conversation))
    assert (refusal.code, refusal.state) == ("CHECKPOINT_EXPIRED", "failed")
    # nor may another user resume someone's conversation
    await _send(client, user, TurnBudget(turns=5, window_seconds=60), conversation)
    refusal = await _refused(_hold(client, _user(), conversation))
    assert refusal.code == "CHECKPOINT_EXPIRED"


@on_convo_loop
async def test_no_lease_can_be_taken_while_convo_is_down(down: ConvoClient) -> None:
    refusal = await _refused(
        Leases(down, ttl_seconds=30).held(_user(), TurnEnd(str(uuid.uuid4())), first_text=None).__aenter__()
    )
    assert (refusal.code, refusal.state) == ("CONVO_UNAVAILABLE", "failed")


@on_convo_loop
async def test_a_lease_convo_stops_answering_for_is_reported_and_the_command_still_ends(
    convo: _Convo, caplog: pytest.LogCaptureFixture
) -> None:
    user, conversation = _user(), str(uuid.uuid4())
    caplog.set_level(logging.WARNING, logger="sstools.agent.admission")

    def not_renewed() -> list[logging.LogRecord]:
        """The warnings of renewals convo did not take (the event operators look for)."""
        return [
            record
            for record in caplog.records
            if (record.name, record.levelno, record.getMessage())
            == ("sstools.agent.admission", logging.WARNING, "lease not renewed")
        ]

    async def reported() -> bool:
        return bool(not_renewed())

    async with AsyncExitStack() as closing, AsyncExitStack() as running:
        # a convo of this test's own, to stop while the command runs
        service = await running.enter_async_context(
            started_service(convo_settings_for(convo.database_url), assemble_convo, TracerProvider())
        )
        client = ConvoClient(f"127.0.0.1:{service.ports['grpc']}", 5.0, TracerProvider(), AGENT_TOKEN)
        closing.push_async_callback(client.close)
        async with Leases(client, ttl_seconds=1).held(user, TurnEnd(conversation), first_text="hello"):
            await running.aclose()  # convo stops
            await wait_until(reported, 5, "the failed renewal to be reported")
            assert _grpc_status(not_renewed()[0].__dict__["error"]) == "UNAVAILABLE"
        # the block ended without an error although the lease could not be renewed: the command's
        # end cannot give it back either, and it lapses after its TTL


def test_a_resumed_turn_binds_its_routed_tools_and_one_kept_without_them_the_cards_tool_alone() -> None:
    card = {"tool_name": "deploy_dashboard", "tool_args": {"dashboard_id": 1, "env_id": "prod"}}
    routed = ["search_dashboards", "deploy_dashboard"]
    recorded = [HumanMessage("ship it", additional_kwargs={ROUTED_KEY: routed})]
    attached = [*recorded, HumanMessage("report text", additional_kwargs={"document": "a.pdf"})]
    assert resumed_tools(recorded, card) == routed
    assert resumed_tools(attached, card) == routed  # a document is not the turn's message
    kept_before = [HumanMessage("ship it"), AIMessage("", tool_calls=[])]
    assert resumed_tools(kept_before, card) == ["deploy_dashboard"]  # never the whole catalogue
    assert resumed_tools([], card) == ["deploy_dashboard"]
