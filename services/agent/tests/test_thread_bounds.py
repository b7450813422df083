"""A long conversation's thread stays the size of one window, and what the model sees is the same
as if nothing had been removed."""

import random
from collections.abc import Sequence
from typing import cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph.message import Messages, add_messages

from sstools.agent.graph import CONTEXT_TOKENS, _approximate_tokens, beyond_reach, context_window


def _added(thread: Sequence[BaseMessage], new: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The thread after ``new``, as the graph's message channel adds it (removals included)."""
    return cast(list[BaseMessage], add_messages(cast(Messages, list(thread)), cast(Messages, list(new))))


def _turn(pace: random.Random, number: int) -> list[BaseMessage]:
    """A person's message, perhaps a document before it and a tool call in the answer, of random
    lengths (now and then one longer than a whole window)."""

    def words(most: int) -> str:
        return f"{number} " + "слово " * pace.randint(1, most)

    messages: list[BaseMessage] = []
    if pace.random() < 0.15:
        messages.append(HumanMessage(words(3000), additional_kwargs={"document": "отчёт.pdf"}))
    messages.append(HumanMessage(words(400)))
    if pace.random() < 0.5:
        call = f"call-{number}"
        messages.append(AIMessage("", tool_calls=[{"name": "search_dashboards", "args": {}, "id": call}]))
        messages.append(ToolMessage(words(6000 if pace.random() < 0.1 else 900), tool_call_id=call))
    messages.append(AIMessage(words(500)))
    return messages


def test_every_window_is_the_same_with_the_thread_kept_short() -> None:
    for seed in range(20):
        pace = random.Random(seed)
        whole: list[BaseMessage] = []
        kept: list[BaseMessage] = []
        for number in range(60):
            turn = _turn(pace, number)
            asked = next(i for i, message in enumerate(turn) if not message.additional_kwargs.get("document"))
            question = turn[: asked + 1]
            whole = _added(whole, question)
            # as the agent starts a turn: the removals, then the new message, in one input
            kept = _added(kept, [*beyond_reach(kept), *question])
            assert context_window(kept) == context_window(whole), (seed, number)
            answer = turn[len(question) :]
            whole, kept = _added(whole, answer), _added(kept, answer)
        # the kept thread: at most a window of earlier turns and the last one; the whole one grew
        last = _approximate_tokens(turn)
        assert _approximate_tokens(kept) <= CONTEXT_TOKENS + last, seed
        assert _approximate_tokens(whole) > 10 * CONTEXT_TOKENS, seed


def test_the_thread_is_cut_between_turns_only() -> None:
    """No tool result is kept without the call it answers, no answer without its question."""
    pace = random.Random(7)
    kept: list[BaseMessage] = []
    for number in range(80):
        kept = _added(kept, [*beyond_reach(kept), *_turn(pace, number)])
        first = kept[0]
        assert isinstance(first, HumanMessage), (number, first)
        calls = {call["id"] for m in kept if isinstance(m, AIMessage) for call in m.tool_calls}
        assert {m.tool_call_id for m in kept if isinstance(m, ToolMessage)} <= calls


def test_a_thread_within_a_window_is_left_whole() -> None:
    thread: list[BaseMessage] = _added(
        [], [HumanMessage("покажи дашборды"), AIMessage("Вот они."), HumanMessage("а в prod?")]
    )
    assert beyond_reach(thread) == []
    assert beyond_reach([]) == []
