"""What the chat accepts at its edge: a message's length (FR-028), the page's ``ui_context``
(data model §1) and the environment a turn names. A message too long is cut, with a warning; a
context that is too big or malformed, or an environment that is not an environment id, is
refused with a typed error and nothing runs."""

import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sstools.agent.language import Lang
from sstools.common.tool_args import EnvId, is_env_id

MAX_MESSAGE_CHARS = 100_000
TRUNCATION_MARK = "[...truncated]"
MAX_UI_CONTEXT_BYTES = 4096
# A cut at a sentence end is preferred when one lies this close to the limit.
_SENTENCE_SEARCH_CHARS = 2_000
_SENTENCE_END = re.compile(r"[.!?…](?:[\"'»”)\]]*)\s|\n")


class InputRejected(Exception):
    """The submit cannot be taken as it is; ``code`` is the stream's error code."""

    def __init__(self, code: str, message: str, **facts: str) -> None:
        super().__init__(message)
        self.code = code
        self.facts = facts  # what the person's words name: the environment that is not one


def truncate_message(text: str) -> tuple[str, bool]:
    """The message cut to at most ``MAX_MESSAGE_CHARS`` characters (the mark included), at the
    last sentence end near the limit when there is one; and whether it was cut."""
    if len(text) <= MAX_MESSAGE_CHARS:
        return text, False
    limit = MAX_MESSAGE_CHARS - len(TRUNCATION_MARK) - 1
    window_start = limit - _SENTENCE_SEARCH_CHARS
    ends = [match.end() for match in _SENTENCE_END.finditer(text, window_start, limit)]
    cut = ends[-1] if ends else limit
    return f"{text[:cut].rstrip()} {TRUNCATION_MARK}", True


class UiContext(BaseModel):
    """Where the person was when they opened the chat; static for the visit but ``envId``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    # what the page or the drawer inside Superset shows (FR-023 adds the chart and SQL Lab)
    objectType: Literal["dashboard", "dataset", "migration", "chart", "sqllab"] | None = None  # noqa: N815
    objectId: str | None = Field(default=None, pattern=r"^\d{1,18}$")  # noqa: N815
    objectName: str | None = Field(default=None, max_length=256)  # noqa: N815
    envId: EnvId | None = None  # noqa: N815
    route: str = Field(default="", max_length=512)
    lang: Lang | None = None  # the page's language: answers to words of no language of their own
    contextVersion: int = Field(default=1, ge=1, le=1)  # noqa: N815


def parse_ui_context(raw: str) -> UiContext | None:
    """The submit's ``ui_context`` JSON, validated; ``None`` when there is none."""
    if not raw.strip():
        return None
    size = len(raw.encode())
    if size > MAX_UI_CONTEXT_BYTES:
        raise InputRejected(
            "PAYLOAD_TOO_LARGE", f"ui_context is {size} bytes; at most {MAX_UI_CONTEXT_BYTES} are accepted"
        )
    try:
        parsed = json.loads(raw)
    except ValueError:
        raise InputRejected("INVALID_UI_CONTEXT", "ui_context is not JSON") from None
    if parsed is None:
        return None
    try:
        return UiContext.model_validate(parsed)
    except ValidationError as error:
        if any(issue["loc"][:1] == ("envId",) for issue in error.errors()):
            raise InputRejected("INVALID_ENVIRONMENT", "ui_context.envId is not an environment id") from None
        problems = "; ".join(
            f"{'.'.join(str(part) for part in issue['loc']) or 'ui_context'}: {issue['msg']}"
            for issue in error.errors()
        )
        raise InputRejected("INVALID_UI_CONTEXT", f"ui_context: {problems}") from None


def parse_env_id(raw: str) -> str | None:
    """The turn's environment (empty: none), refused unless it is an environment id."""
    if not raw:
        return None
    if not is_env_id(raw):
        raise InputRejected(
            "INVALID_ENVIRONMENT", f"env_id {raw[:80]!r} is not an environment id", env_id=raw[:80]
        )
    return raw
