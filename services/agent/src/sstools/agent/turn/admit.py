"""Admit: whether a command runs now. Each check refuses with a ``Refusal`` before anything of
the command ran; the mechanisms (locks, leases, the message budget, a card's answer) are
:mod:`sstools.agent.admission`'s."""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

from sstools.agent.admission import (
    RESUME_WAIT_SECONDS,
    Answer,
    ConversationLocks,
    Leases,
    Refusal,
    answer_of,
)
from sstools.agent.checkpoints import CheckpointsNotReady
from sstools.agent.clients.convo import (
    ConvoClient,
    ConvoUnavailable,
    TurnBudget,
    TurnEnd,
    UploadedFile,
    UploadNotFound,
)
from sstools.agent.turn import Turn
from sstools.agent.uploads import UPLOAD_NOT_FOUND, fetch_uploads

_log = logging.getLogger(__name__)


class Admission:
    def __init__(
        self,
        checkpoints_ready: Callable[[], object],
        convo: ConvoClient,
        *,
        lease_ttl_seconds: int,
        turn_budget: TurnBudget,
    ) -> None:
        self._checkpoints_ready = checkpoints_ready  # raises CheckpointsNotReady until they are
        self._convo = convo
        self._locks = ConversationLocks()
        self._leases = Leases(convo, lease_ttl_seconds)
        self._turn_budget = turn_budget
        self._sessions: set[tuple[str, str]] = set()  # (user, Gradio session) sending now

    def _ready(self) -> None:
        try:
            self._checkpoints_ready()
        except CheckpointsNotReady as problem:
            raise Refusal("NOT_READY", str(problem)) from None

    @contextlib.asynccontextmanager
    async def send(self, turn: Turn, end: TurnEnd) -> AsyncIterator[list[UploadedFile]]:
        """A new message, held for the block: one at a time per page session, alone in its
        conversation here and across pods (convo's lease, left in ``end`` to be given back),
        counted against the user's budget as convo gives its lease (one call: a turn refused
        before it is not counted). Yields the files it names, each this user's upload for this
        conversation (one that is not refuses it all); they are deleted once the block ends,
        however it ended."""
        self._ready()
        session = (turn.username, turn.session_id)
        if session in self._sessions:
            raise Refusal("BUSY", "one message at a time: the previous one is still being answered")
        self._sessions.add(session)
        try:
            async with self._locks.held(turn.conversation_id) as held:
                if not held:
                    raise Refusal("BUSY", "this conversation is answering another message")
                files = await self._uploads(turn)
                try:
                    async with self._leases.held(
                        turn.user_token, end, first_text=turn.text, budget=self._turn_budget
                    ):
                        yield files
                finally:
                    if turn.files:
                        await asyncio.shield(self._forget_uploads(turn))
        finally:
            self._sessions.discard(session)

    @contextlib.asynccontextmanager
    async def answer(self, turn: Turn, end: TurnEnd) -> AsyncIterator[Answer]:
        """A confirm or reject, held for the block (the lease left in ``end``): it waits a moment
        for the conversation's answer under way to end (a double click, a card answered as it
        appears)."""
        self._ready()
        answer = answer_of(turn.action, turn.text)
        async with self._locks.held(turn.conversation_id, RESUME_WAIT_SECONDS) as held:
            if not held:
                raise Refusal("BUSY", "the conversation is still streaming; try again")
            async with self._leases.held(
                turn.user_token, end, first_text=None, wait_seconds=RESUME_WAIT_SECONDS
            ):
                yield answer

    async def _uploads(self, turn: Turn) -> list[UploadedFile]:
        """The files the turn names, fetched from convo before anything of the turn is recorded."""
        try:
            return await fetch_uploads(self._convo, turn.user_token, turn.conversation_id, turn.files)
        except UploadNotFound:
            raise Refusal(
                UPLOAD_NOT_FOUND,
                "an attached file is not an upload of yours in this conversation (or it expired): "
                "upload it again",
            ) from None
        except ConvoUnavailable as problem:
            raise Refusal("CONVO_UNAVAILABLE", str(problem)) from None

    async def _forget_uploads(self, turn: Turn) -> None:
        try:
            await self._convo.delete_uploads(turn.user_token, turn.conversation_id, list(turn.files))
        except ConvoUnavailable as problem:  # they expire by themselves; say so in the log
            _log.warning("uploads not deleted", extra={"error": str(problem)})
