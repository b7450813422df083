"""The one audit record a command leaves in convo, from what its stream said."""

import json
from typing import Any

from sstools.agent.clients.convo import AuditRecord
from sstools.agent.stream import Event
from sstools.agent.uploads import UPLOAD_NOT_FOUND
from sstools.common.grpc_errors import CONVERSATION_ARCHIVED

# Errors that turn a command away before anything of it runs.
REFUSALS = {
    "BUSY",
    "CONFIRMATION_PENDING",
    "CONFIRMATION_UNBOUND",
    "CONFIRMATION_MISMATCH",
    "NOTHING_PENDING",
    "CHECKPOINT_EXPIRED",
    CONVERSATION_ARCHIVED,
    "NOT_READY",
    "CONVO_UNAVAILABLE",
    "OPS_UNAVAILABLE",
    "PAYLOAD_TOO_LARGE",
    "INVALID_ARGUMENTS",
    "INVALID_UI_CONTEXT",
    "INVALID_ENVIRONMENT",
    "INVALID_CONVERSATION_ID",
    UPLOAD_NOT_FOUND,
}


def audit_record(
    *,
    user: str,
    conversation_id: str,
    action: str,
    edited_args: dict[str, Any],
    events: list[Event],
    latency_seconds: float,
    service_identity: str,
) -> AuditRecord:
    kinds = {event.metadata["type"]: event.metadata for event in reversed(events)}  # first of each
    state = kinds.get("state", {})
    refused = kinds.get("error", {}).get("code") in REFUSALS
    subject: tuple[str, dict[str, Any]]
    if "permission_denied" in kinds:
        decision = "denied"
        subject = kinds["permission_denied"]["tool_name"], {}
    elif refused:
        decision, subject = "refused", ("", {})
    elif action in ("confirm", "reject"):
        decision = "confirmed" if action == "confirm" else "rejected"
        started = kinds.get("tool_start", {})
        subject = str(started.get("tool", "")), dict(started.get("input") or edited_args)
    elif "confirm_required" in kinds:
        decision = "needs_confirmation"
        subject = kinds["confirm_required"]["tool_name"], dict(kinds["confirm_required"]["tool_args"])
    else:
        decision = "allowed"
        started = kinds.get("tool_start", {})
        subject = str(started.get("tool", "")), dict(started.get("input") or {})
    return AuditRecord(
        user=user,
        conversation_id=conversation_id,
        decision=decision,
        outcome=str(state.get("state", "cancelled")),
        service_identity=service_identity,
        tool_name=subject[0],
        tool_args=json.loads(json.dumps(subject[1], default=str)),
        task_id=str(state.get("task_id", "")),
        latency_seconds=latency_seconds,
    )
