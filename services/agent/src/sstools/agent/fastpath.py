"""The fast path (FR-035): a short, explicit command for a write or dangerous tool goes straight
to its confirmation card, without a model round trip — "задеплой дашборд 17 в prod". It only
proposes the call: the guard and the confirmation still stand between it and the tool.

Anything negated ("не деплой", "don't deploy", "отмена") is left to the model, as is anything
long or spread over lines, and anything whose arguments are not all in the words themselves.
"""

import re
import uuid
from collections.abc import Mapping

from langchain_core.messages import ToolCall
from pydantic import BaseModel

from sstools.agent.planner import arguments_for, extract

NEGATION = re.compile(r"\b(?:не|нет|no|don't|do not|stop|отмена|отмени)\b", re.IGNORECASE)
_ID_PREFIX = "fast_"  # tells a fast-path call from a model's in the thread
_MAX_COMMAND_CHARS = 200
_DASHBOARD = r"(?:дашборд\w*|дэшборд\w*|dashboards?)"
_COMMANDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("deploy_dashboard", re.compile(rf"^(?:задеплой|деплой|разверни|выкати|deploy)\b.*\b{_DASHBOARD}", re.I)),
    ("execute_migration", re.compile(rf"^(?:мигрируй|перенеси|migrate)\b.*\b{_DASHBOARD}", re.I)),
    (
        "run_backup",
        re.compile(r"^(?:сделай|запусти|создай|run|make|take)\b.*\b(?:бэкап\w*|бекап\w*|backup)", re.I),
    ),
    ("create_branch", re.compile(r"^(?:создай|заведи|create|make)\b.*\b(?:ветк\w*|branch)\b", re.I)),
)
# Where the command must name its environment itself rather than borrow the page's.
_NEEDS_ENV = {"deploy_dashboard", "execute_migration", "run_backup"}


def fast_confirmation_tool(text: str, schemas: Mapping[str, type[BaseModel]]) -> ToolCall | None:
    """The tool call an explicit command asks for, or None to let the model read it."""
    command = text.strip()
    if not command or len(command) > _MAX_COMMAND_CHARS or "\n" in command or NEGATION.search(command):
        return None
    for name, pattern in _COMMANDS:
        if not pattern.search(command):
            continue
        facts = extract(command)
        arguments = arguments_for(schemas[name], facts, command)
        if arguments is None or (name in _NEEDS_ENV and not facts.env):
            return None
        return ToolCall(name=name, args=arguments, id=f"{_ID_PREFIX}{uuid.uuid4().hex[:16]}")
    return None
