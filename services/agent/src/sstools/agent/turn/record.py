"""Record: what a command leaves behind — its answer kept in convo however it ended (cut short,
``partial``, when the person stopped it), and one audit record of it; both go to convo in the
command's one last call, which gives its lease back too (``ConvoClient.end_turn``)."""

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any

from sstools.agent.admission import Refusal, answer_of
from sstools.agent.audit import AnonymousBudget, AuditFacts, audit_record
from sstools.agent.clients.convo import AuditRecord, ConvoClient, ConvoUnavailable, KeptAnswer, TurnEnd
from sstools.agent.stream import Event, shown
from sstools.agent.turn import Turn

_log = logging.getLogger(__name__)


class Recorder:
    def __init__(self, convo: ConvoClient, service_identity: str) -> None:
        self._convo = convo
        self._service_identity = service_identity
        self._anonymous = AnonymousBudget()

    async def kept(self, end: TurnEnd, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
        """Pass the events on, then leave the answer in ``end`` for convo: its text, what the
        tools did and the final state; cut short (``partial``) when the person cancelled."""
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
            end.answer = _answer(text, kept, partial=True)
            raise
        end.answer = _answer(text, kept, partial=False)

    def record(
        self, turn: Turn, events: list[Event], latency_seconds: float, facts: AuditFacts
    ) -> AuditRecord:
        """The command's audit record, from all its events (the audit's own facts included)."""
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

    async def end(self, turn: Turn, end: TurnEnd, record: AuditRecord) -> None:
        """The command's end in convo: ``record`` kept with the answer, the lease given back. A
        record that names no one (a token not taken) is kept within :class:`AnonymousBudget`,
        since anyone can send those."""
        if not turn.user_token and not self._anonymous.take():
            _log.warning(
                "refusal not audited: too many without a token this minute", extra={"code": record.code}
            )
            return
        try:
            ended = await self._convo.end_turn(turn.user_token, end, record)
        except ConvoUnavailable as problem:  # the command is over either way; the log keeps what it was
            kept = {**asdict(record), "calls": [call.model_dump() for call in record.calls]}
            # an answer stays in the checkpoint alone; a lease lapses after its TTL
            lost = {"error": str(problem), "audit": kept, "answer_lost": end.answer is not None}
            _log.warning("audit record not kept", extra=lost)
            return
        if ended.answer_refused is not None:
            _log.warning("answer not kept in convo", extra={"error": ended.answer_refused})


def _answer(text: str, events: list[dict[str, Any]], *, partial: bool) -> KeptAnswer:
    metadata = {"events": json.loads(json.dumps(events, default=str))}
    return KeptAnswer(str(uuid.uuid4()), text, metadata, partial)
