"""The fast path (FR-035): a short, explicit command for a write or dangerous tool goes straight
to its confirmation card, without a model round trip — "задеплой дашборд 17 в prod". It only
proposes the call: the guard and the confirmation still stand between it and the tool.

Anything negated ("не деплой", "don't deploy", "отмена") is left to the model, as is anything
long or spread over lines, and anything whose arguments are not all in the words themselves: an
id, not a name; the environment named, not borrowed from the page.
"""

import re
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolCall

from sstools.agent.context import Environment
from sstools.agent.planner.reading import Request, read_request

# Broader than a negation of one verb: any sign of doubt leaves the command to the model.
NEGATION = re.compile(r"\b(?:не|нет|no|don't|do not|stop|отмена|отмени)\b", re.IGNORECASE)
_ID_PREFIX = "fast_"  # tells a fast-path call from a model's in the thread
_MAX_COMMAND_CHARS = 200
_DASHBOARD = r"(?:дашборд\w*|дэшборд\w*|dashboards?)"
_COMMANDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "deploy_dashboard",
        re.compile(rf"^(?:задеплой|деплой|разверни|выкати|перенеси|deploy)\b.*\b{_DASHBOARD}", re.I),
    ),
    ("execute_migration", re.compile(rf"^(?:мигрируй|migrate)\b.*\b{_DASHBOARD}", re.I)),
    (
        "run_backup",
        re.compile(r"^(?:сделай|запусти|создай|run|make|take)\b.*\b(?:бэкап\w*|бекап\w*|backup)", re.I),
    ),
    ("create_branch", re.compile(r"^(?:создай|заведи|create|make)\b.*\b(?:ветк\w*|branch)\b", re.I)),
)


def _arguments(name: str, request: Request) -> dict[str, Any] | None:
    """The command's arguments when its words hold every one of them."""
    target, ids = request.target_env, list(request.dashboard_ids)
    if name == "create_branch":  # the quoted name beside "branch"; a quoted text elsewhere may be a message
        return {"name": request.branch} if request.branch and request.branch in request.quoted else None
    if target is None:
        return None
    if name == "run_backup":
        return {"env_id": target}
    if len(ids) != 1:
        return None
    source = {"source_env": request.source_env} if request.source_env else {}
    if name == "deploy_dashboard":
        return {"env_id": target, "dashboard_id": ids[0], **source}
    return {"env_id": target, "dashboard_ids": ids, **source} if source else None


def fast_confirmation_tool(text: str, environments: Sequence[Environment]) -> ToolCall | None:
    """The tool call an explicit command asks for, or None to let the model read it."""
    command = text.strip()
    if not command or len(command) > _MAX_COMMAND_CHARS or "\n" in command or NEGATION.search(command):
        return None
    for name, pattern in _COMMANDS:
        if not pattern.search(command):
            continue
        arguments = _arguments(name, read_request(command, environments))
        return (
            None
            if arguments is None
            else ToolCall(name=name, args=arguments, id=f"{_ID_PREFIX}{uuid.uuid4().hex[:16]}")
        )
    return None
