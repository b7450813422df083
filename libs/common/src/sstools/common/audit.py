"""The parts of a command's audit record that the agent writes, convo keeps and the admin console
shows, declared once (the console's TypeScript types are generated from convo's API models)."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class AuditCall(BaseModel):
    """One tool call of a command: the arguments it was made with, its own decision (allowed,
    denied, refused, needs_confirmation, confirmed, rejected) and the code it was refused or
    denied with, how it ended, and the task it started however quickly that ended."""

    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    decision: str
    code: str = ""
    outcome: str = ""
    task_id: str = ""


class MalformedCall(ValueError):
    """A record's call that is not an :class:`AuditCall`."""


def audit_calls(raw: list[dict[str, Any]]) -> list[AuditCall]:
    """``raw`` as calls; :class:`MalformedCall` says which one is not and why."""
    calls = []
    for index, call in enumerate(raw):
        try:
            calls.append(AuditCall.model_validate(call))
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            raise MalformedCall(f"calls[{index}]: {problems}") from None
    return calls
