"""Admission's plain parts, without a server: what a confirm's message must name, and the
per-conversation locks, which are forgotten once nobody holds or waits for them."""

import asyncio
import json

import pytest

from sstools.agent.admission import Answer, ConversationLocks, Refusal, answer_of


def test_an_answer_names_its_card() -> None:
    message = json.dumps({"call_id": "c1", "digest": "d" * 64, "args": {"title": "x"}})
    assert answer_of("confirm", message) == Answer("confirm", "c1", "d" * 64, {"title": "x"})
    for unbound in (
        "",
        "{}",
        '{"call_id": "c1"}',
        '{"call_id": 1, "digest": "d"}',
        '{"call_id": "c", "digest": "d", "args": []}',
        "[1]",
    ):
        with pytest.raises(Refusal) as refused:
            answer_of("confirm", unbound)
        assert refused.value.code == "CONFIRMATION_UNBOUND", unbound


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
