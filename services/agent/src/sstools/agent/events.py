"""The stream's events, declared once: what a turn tells the page and keeps in its history.

Each is a Gradio ChatMessage whose ``metadata`` is one of these models (``type`` first) and
whose ``content`` is its text. The page's TypeScript types are generated from them
(``sstools-web-types``; CI fails while ``web/src/lib/generated/contracts.ts`` is stale), and
every turn the agent tests take is checked against them (``STREAM_EVENTS``).
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.json_schema import SkipJsonSchema

TurnState = Literal[
    "needs_clarification",
    "denied",
    "needs_confirmation",
    "started",
    "success",
    "failed",
    "cancelled",
    "issues_found",
]


class EventMetadata(BaseModel):
    """An event's metadata. A field at its default is not sent (``replayed`` only when it is
    so, ``task_id`` only when there is one); a required field is, ``null`` included."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: str

    def metadata(self) -> dict[str, Any]:
        return {"type": self.type, **self.model_dump(exclude_defaults=True, exclude={"type"})}


class ConversationEvent(EventMetadata):
    """First of every turn: the conversation it belongs to (a new one's id) and the model."""

    type: Literal["conversation"] = "conversation"
    conversation_id: str
    model: str


class ContextEvent(EventMetadata):
    """The environment the turn works in, and where that choice came from."""

    type: Literal["context"] = "context"
    env_id: str | None
    env_source: Literal["message", "page", "last", "default", "none"]


class RoutingEvent(EventMetadata):
    """The tools the router bound for this turn, the tier that chose them, the model asked."""

    type: Literal["routing"] = "routing"
    tools: list[str]
    tier: str
    model: str


class TokenEvent(EventMetadata):
    """A piece of the answer's text (its ``content``)."""

    type: Literal["token"] = "token"


class ToolStartEvent(EventMetadata):
    type: Literal["tool_start"] = "tool_start"
    tool: str
    input: dict[str, Any]
    run_id: str


class ToolEndEvent(EventMetadata):
    """A call's result; ``output`` is left out of the stored history. ``replayed``: said again
    for a repeated confirm, nothing run again."""

    type: Literal["tool_end"] = "tool_end"
    tool: str
    run_id: str
    output: Any = None
    replayed: bool = False


class ToolErrorEvent(EventMetadata):
    """A call that failed, that ops refused, or that the gate stopped (``error.code``)."""

    type: Literal["tool_error"] = "tool_error"
    tool: str
    run_id: str
    error: dict[str, Any]
    replayed: bool = False
    # The arguments of a call no check passed: for the audit alone, never shown or kept.
    unchecked_args: SkipJsonSchema[dict[str, Any] | None] = None


class ToolRetryEvent(EventMetadata):
    type: Literal["tool_retry"] = "tool_retry"
    tool: str
    attempt: int
    max_attempts: int
    error: str


class ToolTimeoutEvent(EventMetadata):
    """A call with no answer within the agent's time limit; ``retryable`` is false for a write,
    whose outcome only Superset can tell."""

    type: Literal["tool_timeout"] = "tool_timeout"
    tool: str
    timeout_seconds: float
    is_write_tool: bool
    retryable: bool
    message: str
    detail: str | None = None


class DashboardNamed(BaseModel):
    id: int
    title: str | None


class Subject(BaseModel):
    """The dashboards a call is about, named in the environment they are read from."""

    env_id: str
    dashboards: list[DashboardNamed]


class ConfirmRequiredEvent(EventMetadata):
    """A paused call (data model §2): the person confirms or rejects exactly what it shows. The
    ``digest`` covers every other field; a confirm names it and the ``call_id``."""

    type: Literal["confirm_required"] = "confirm_required"
    thread_id: str
    call_id: str
    tool_name: str
    tool_args: dict[str, Any]
    env_id: str | None
    env_context: str | None
    production: bool
    risk: str
    risk_level: str
    required_role: str
    dangerous: bool
    prompt: str
    subject: Subject | None
    change: str
    lang: Literal["ru", "en"]
    requires_confirmation: Literal[True]
    digest: str = ""


class Alternative(BaseModel):
    action: str
    prompt: str


class PermissionDeniedEvent(EventMetadata):
    """A call the person's role may not make here (data model §3), with what they may ask."""

    type: Literal["permission_denied"] = "permission_denied"
    tool_name: str
    required_role: str
    user_role: str
    env_context: str | None
    alternatives: list[Alternative]
    tool_args: dict[str, Any] = Field(default_factory=dict)


class WarningEvent(EventMetadata):
    type: Literal["warning"] = "warning"
    code: str
    kept_chars: int | None = None


class ErrorEvent(EventMetadata):
    """The turn, or a file of it, refused or failed: ``code`` says why, ``message`` in the
    person's language (``detail``: the technical words), with what the words name."""

    type: Literal["error"] = "error"
    code: str
    message: str
    detail: str | None = None
    env_id: str | None = None
    retry_after: int | None = None
    file: str | None = None
    supported: list[str] | None = None
    limit_bytes: int | None = None


class StateEvent(EventMetadata):
    """Last of every turn: how it ended, and the task it started however quickly that ended."""

    type: Literal["state"] = "state"
    state: TurnState
    task_id: str | None = None


StreamEvent = Annotated[
    ConversationEvent
    | ContextEvent
    | RoutingEvent
    | TokenEvent
    | ToolStartEvent
    | ToolEndEvent
    | ToolErrorEvent
    | ToolRetryEvent
    | ToolTimeoutEvent
    | ConfirmRequiredEvent
    | PermissionDeniedEvent
    | WarningEvent
    | ErrorEvent
    | StateEvent,
    Field(discriminator="type"),
]
STREAM_EVENTS: TypeAdapter[StreamEvent] = TypeAdapter(StreamEvent)
