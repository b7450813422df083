"""Record: what a command leaves behind — its answer kept in convo however it ended (cut short,
``partial``, when the person stopped it), and one audit record of it."""

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
from sstools.agent.clients.convo import AuditRecord, ConvoClient, ConvoUnavailable
from sstools.agent.stream import Event, shown
from sstools.agent.turn import Turn

_log = logging.getLogger(__name__)


class Recorder:
    def __init__(self, convo: ConvoClient, service_identity: str) -> None:
        self._convo = convo
        self._service_identity = service_identity
        self._anonymous = AnonymousBudget()

    async def kept(self, turn: Turn, events: AsyncIterator[Event]) -> AsyncIterator[Event]:
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

    async def audit(self, record: AuditRecord, user_token: str) -> None:
        """Keep ``record``; one that names no one (a token not taken) within
        :class:`AnonymousBudget`, since anyone can send those."""
        if not user_token and not self._anonymous.take():
            _log.warning(
                "refusal not audited: too many without a token this minute", extra={"code": record.code}
            )
            return
        try:
            await self._convo.record_audit(record, user_token)
        except ConvoUnavailable as problem:  # the command is over either way; the log keeps what it was
            kept = {**asdict(record), "calls": [call.model_dump() for call in record.calls]}
            _log.warning("audit record not kept", extra={"error": str(problem), "audit": kept})

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
