"""The one audit record a command leaves in convo: what it was about, every tool call in it, the
decision taken, how it ended and the task it started — from what its stream said and from what
the stream does not say (:class:`AuditFacts`)."""

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sstools.agent.clients.convo import AuditRecord
from sstools.agent.gate import UNCHECKED_ARGS
from sstools.agent.stream import Event
from sstools.common.audit import AuditCall

_ANSWERED = {"confirm": "confirmed", "reject": "rejected"}


@dataclass
class AuditFacts:
    """Gathered while a command runs: the code it was refused with before anything of it ran,
    and the card a confirm or reject answered."""

    refused: str = ""
    card: Mapping[str, Any] | None = None


class AnonymousBudget:
    """How many refusals of submits that name no one (a token not taken) are recorded a minute:
    anyone can send those, and the trail must not be theirs to fill."""

    def __init__(self, per_minute: int = 60, clock: Callable[[], float] = time.monotonic) -> None:
        self._per_minute = per_minute
        self._clock = clock
        self._minute = -1
        self._taken = 0

    def take(self) -> bool:
        minute = int(self._clock() // 60)
        if minute != self._minute:
            self._minute, self._taken = minute, 0
        self._taken += 1
        return self._taken <= self._per_minute


def _task_id(output: Any) -> str:
    """The task a tool's result is, however quickly it ended (ops' task shape)."""
    if isinstance(output, dict) and {"id", "kind", "status"} <= set(output):
        return str(output["id"])
    return ""


def _calls(events: Sequence[Event]) -> list[AuditCall]:
    """Every tool call the events tell of, in order, with its own decision and end."""
    calls: list[AuditCall] = []
    running: dict[str, AuditCall] = {}  # by run id: the calls that started
    for event in events:
        meta = event.metadata
        kind = meta["type"]
        tool, args = str(meta.get("tool", "")), dict(meta.get("input") or {})
        started = running.get(str(meta.get("run_id", "")))
        if kind == "tool_start":
            running[str(meta["run_id"])] = AuditCall(tool=tool, args=args, decision="allowed")
            calls.append(running[str(meta["run_id"])])
        elif kind == "tool_end":
            outcome = "success"
            if started is None:  # a confirm said again: the first one's result, nothing run
                started = AuditCall(tool=tool, decision="allowed")
                calls.append(started)
                outcome = "replayed" if meta.get("replayed") else outcome
            started.outcome, started.task_id = outcome, _task_id(meta.get("output"))
        elif kind == "tool_error":
            code = str((meta.get("error") or {}).get("code", ""))
            if started is None:  # stopped before it ran (the gate), or a failure said again
                tried = dict(meta.get(UNCHECKED_ARGS) or {})
                calls.append(
                    AuditCall(tool=tool, args=tried, decision="refused", code=code, outcome="failed")
                )
            else:
                started.outcome, started.code = "failed", code
        elif kind == "tool_timeout":
            for waiting in reversed(calls):
                if waiting.tool == tool and not waiting.outcome:
                    waiting.outcome, waiting.code = "timeout", "tool_timeout"
                    break
        elif kind == "permission_denied":
            args = dict(meta.get("tool_args") or {})
            calls.append(
                AuditCall(
                    tool=str(meta["tool_name"]),
                    args=args,
                    decision="denied",
                    code="permission_denied",
                    outcome="denied",
                )
            )
        elif kind == "confirm_required":
            calls.append(
                AuditCall(
                    tool=str(meta["tool_name"]), args=dict(meta["tool_args"]), decision="needs_confirmation"
                )
            )
    return calls


def _answered(
    calls: list[AuditCall], card: Mapping[str, Any], action: str, edited_args: dict[str, Any], refused: str
) -> None:
    """Mark the call a confirm or reject answered: the card's, as edited (unless the gate stopped
    the edited call: its own decision stands). A reject ran nothing, and neither did an answer
    refused (its edits invalid, the person's role unknown)."""
    decision = "refused" if refused else _ANSWERED[action]
    tool = str(card.get("tool_name", ""))
    for call in calls:
        if call.tool == tool:
            if call.decision == "allowed":
                call.decision = decision
            return
    args = {**dict(card.get("tool_args") or {}), **edited_args}
    outcome = "failed" if refused else "cancelled" if action == "reject" else ""
    calls.insert(0, AuditCall(tool=tool, args=args, decision=decision, code=refused, outcome=outcome))


def _decision(calls: list[AuditCall], facts: AuditFacts, action: str) -> tuple[str, str]:
    """The command's decision and the code it was refused or denied with."""
    if facts.refused:
        return "refused", facts.refused
    # an edited answer too may be denied, refused, or make a card the person must see again
    if any(call.decision == "denied" for call in calls):
        return "denied", "permission_denied"
    answered = _ANSWERED.get(action)
    # the card answered was decided; a card that follows it (the next change the person asked
    # for) is one of the command's calls, not its decision
    if not (answered and any(call.decision == answered for call in calls)):
        if any(call.decision == "needs_confirmation" for call in calls):
            return "needs_confirmation", ""
        if calls and all(call.decision == "refused" for call in calls):
            return "refused", calls[0].code
    if answered:  # a confirm sent again is told the first one's answer: nothing ran
        replayed = bool(calls) and all(call.outcome == "replayed" for call in calls)
        return answered, "replayed" if replayed else ""
    return "allowed", ""


def audit_record(
    *,
    user: str,
    conversation_id: str,
    action: str,
    edited_args: dict[str, Any],
    events: list[Event],
    latency_seconds: float,
    service_identity: str,
    facts: AuditFacts,
) -> AuditRecord:
    calls = _calls(events)
    if facts.card is not None and action in _ANSWERED:
        _answered(calls, facts.card, action, edited_args, facts.refused)
    decision, code = _decision(calls, facts, action)
    subject = next((call for call in calls if call.decision == decision), calls[0] if calls else None)
    state = next((event.metadata for event in events if event.metadata["type"] == "state"), {})
    return AuditRecord(
        user=user,
        conversation_id=conversation_id,
        action=action,
        decision=decision,
        code=code,
        outcome=str(state.get("state", "cancelled")),
        service_identity=service_identity,
        tool_name=subject.tool if subject else "",
        tool_args=_plain(subject.args) if subject else {},
        calls=[call.model_copy(update={"args": _plain(call.args)}) for call in calls],
        task_id=str(state.get("task_id", "")),  # the turn's own task (stream.final_state)
        latency_seconds=latency_seconds,
    )


def _plain(value: dict[str, Any]) -> dict[str, Any]:
    """JSON's own values, as convo keeps them."""
    plain: dict[str, Any] = json.loads(json.dumps(value, default=str))
    return plain
