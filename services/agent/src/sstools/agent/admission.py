"""Who may run a command now, and what a confirm may resume.

- A send runs alone in its Gradio session (a second one is ``BUSY``) and holds its
  conversation's lock (:class:`ConversationLocks`) and convo lease (:class:`Leases`: another
  tab or pod is ``BUSY``). A confirm or reject waits up to 2 s for them (the primary stream may
  still be closing).
- A confirm or reject names the card it answers: its call id and digest
  (:func:`answer_of`). It resumes only the paused call of that id whose card has that digest
  (:func:`card_answered`); anything else is refused, typed, and the pause stays. The same
  answer repeated (a resend of a confirm whose reply was lost) gets the first one's result
  again, nothing run twice.
"""

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from langgraph.types import Interrupt, StateSnapshot

from sstools.agent.clients.convo import (
    ConversationClosed,
    ConvoClient,
    ConvoUnavailable,
    TurnBudget,
    TurnEnd,
    TurnsUsedUp,
    UnknownConversation,
)
from sstools.agent.events import TurnState
from sstools.agent.gate import ANSWERED
from sstools.common.grpc_errors import CONVERSATION_ARCHIVED

RESUME_WAIT_SECONDS = 2.0
_log = logging.getLogger(__name__)


class Refusal(Exception):
    """A command turned away before anything of it ran; ``code`` is its stream error code."""

    def __init__(
        self,
        code: str,
        message: str,
        state: TurnState = "failed",
        *,
        retry_after: int | None = None,
        facts: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.state = state
        self.retry_after = retry_after
        self.facts = facts or {}  # what the person's words name: the environment that is not there

    def details(self) -> dict[str, int | str]:
        """What the error event adds to its code and message."""
        return {**self.facts, **({} if self.retry_after is None else {"retry_after": self.retry_after})}


@dataclass(frozen=True)
class Answer:
    """A person's answer to a card: confirm or reject, which call, which card (its digest), and
    any edits."""

    action: str
    call_id: str
    digest: str
    args: dict[str, Any]


def answer_of(action: str, message: str) -> Answer:
    """The answer a confirm or reject carries as its message: ``{"call_id", "digest", "args"?}``."""
    try:
        given = json.loads(message)
    except ValueError:
        given = None
    if not (
        isinstance(given, dict)
        and isinstance(given.get("call_id"), str)
        and isinstance(given.get("digest"), str)
        and isinstance(given.get("args", {}), dict)
    ):
        raise Refusal(
            "CONFIRMATION_UNBOUND",
            'a confirm or reject names the card it answers: {"call_id": ..., "digest": ..., "args": {...}}',
        )
    return Answer(action, given["call_id"], given["digest"], given.get("args") or {})


def card_answered(snapshot: StateSnapshot, answer: Answer) -> Interrupt | ToolMessage:
    """The paused call this answer resumes; or, when that card was answered already, the result
    that answer had. ``Refusal`` when it names no call waiting here, or a card that is not the
    one shown now."""
    if not snapshot.values:
        raise Refusal("CHECKPOINT_EXPIRED", "nothing to resume: this conversation has no saved state")
    for paused in snapshot.interrupts:
        card = paused.value if isinstance(paused.value, dict) else {}
        if card.get("call_id") != answer.call_id:
            continue
        if card.get("digest") != answer.digest:
            raise Refusal(
                "CONFIRMATION_MISMATCH",
                "this card is not the one waiting any more: answer the card shown now",
                "needs_confirmation",
            )
        return paused
    done = answered_result(snapshot.values.get("messages", []), answer)
    if done is not None:
        return done
    if snapshot.interrupts:
        raise Refusal(
            "CONFIRMATION_MISMATCH",
            "the answer names a call that is not waiting here: answer the card shown now",
            "needs_confirmation",
        )
    raise Refusal("NOTHING_PENDING", "no action is waiting for confirmation (already confirmed or rejected)")


def answered_result(messages: Sequence[BaseMessage], answer: Answer) -> ToolMessage | None:
    """The result of the call this answer names, if it is the answer that very card had."""
    for message in reversed(messages):
        if isinstance(message, ToolMessage) and message.tool_call_id == answer.call_id:
            answered = message.artifact.get(ANSWERED) if isinstance(message.artifact, dict) else None
            if answered == {"digest": answer.digest, "action": answer.action}:
                return message
            return None
    return None


class ConversationLocks:
    """One lock per conversation in this process, forgotten once nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def held(self, conversation_id: str, wait_seconds: float = 0.0) -> AsyncIterator[bool]:
        """Yields whether the lock is held, waiting for it at most ``wait_seconds``."""
        lock, users = self._locks.get(conversation_id, (asyncio.Lock(), 0))
        self._locks[conversation_id] = (lock, users + 1)
        acquired = False
        try:
            if wait_seconds:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(lock.acquire(), wait_seconds)
                    acquired = True
            elif not lock.locked():
                await lock.acquire()
                acquired = True
            try:
                yield acquired
            finally:
                if acquired:
                    lock.release()
        finally:
            lock, users = self._locks[conversation_id]
            if users > 1:
                self._locks[conversation_id] = (lock, users - 1)
            else:
                del self._locks[conversation_id]


class Leases:
    """The conversation's lease in convo, the gate between tabs and pods: held (and renewed)
    while a command runs, given back by the command's last call to convo (its ``TurnEnd``) —
    or left to lapse after its TTL if this process dies."""

    def __init__(self, convo: ConvoClient, ttl_seconds: int) -> None:
        self._convo = convo
        self._ttl = ttl_seconds
        self._holder = f"{socket.gethostname()}:{os.getpid()}"

    @contextlib.asynccontextmanager
    async def held(
        self,
        user_token: str,
        end: TurnEnd,
        *,
        first_text: str | None,
        budget: TurnBudget | None = None,
        wait_seconds: float = 0.0,
    ) -> AsyncIterator[None]:
        """Renewed for the block, and left in ``end`` to be given back; ``Refusal`` says why
        not. A send gives its text and the person's message budget: convo counts the turn (once,
        whatever the waiting) in the same call."""
        conversation_id = end.conversation_id
        holder = f"{self._holder}:{uuid.uuid4().hex[:12]}"
        deadline = time.monotonic() + wait_seconds
        try:
            while not await self._convo.acquire_lease(
                user_token, conversation_id, holder, self._ttl, first_text=first_text, budget=budget
            ):
                budget = None  # counted by the first try
                if time.monotonic() >= deadline:
                    raise Refusal("BUSY", "this conversation is answering in another tab or window")
                await asyncio.sleep(0.1)
        except TurnsUsedUp as used_up:
            raise Refusal("RATE_LIMITED", str(used_up), retry_after=used_up.retry_after) from None
        except UnknownConversation:
            if first_text is None:
                raise Refusal("CHECKPOINT_EXPIRED", "nothing to resume: no such conversation") from None
            raise Refusal("INVALID_CONVERSATION_ID", "no conversation of yours has this id") from None
        except ConversationClosed:
            raise Refusal(CONVERSATION_ARCHIVED, "the conversation is archived: restore it first") from None
        except ConvoUnavailable as error:
            raise Refusal("CONVO_UNAVAILABLE", str(error)) from None
        end.holder = holder
        renewing = asyncio.create_task(self._keep(conversation_id, holder))
        try:
            yield
        finally:
            renewing.cancel()

    async def _keep(self, conversation_id: str, holder: str) -> None:
        while True:
            await asyncio.sleep(self._ttl / 3)
            try:
                await self._convo.renew_lease(conversation_id, holder, self._ttl)
            except ConvoUnavailable as error:
                _log.warning("lease not renewed", extra={"error": str(error)})
