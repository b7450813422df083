"""The fast path (FR-035): a short, explicit command for a write or dangerous tool goes straight
to its confirmation card, without a model round trip — "задеплой дашборд 17 в prod". It only
proposes the call: the guard and the confirmation still stand between it and the tool.

It reads the command as the built-in planner does (the same language layer, frames and readers),
but from the words alone: anything negated ("не деплой", "don't deploy", "отмена") is left to the
model, as is anything long or spread over lines, and anything whose arguments are not all in the
words themselves: an id, not a name; the environment named, not borrowed from the page.
"""

import uuid
from collections.abc import Sequence

from langchain_core.messages import ToolCall

from sstools.agent.context import Environment, TurnContext
from sstools.agent.planner.reading import read
from sstools.agent.planner.steps import Planner, Thread
from sstools.common.catalogue import ARGS, Tier, tool
from sstools.common.language import FUNCTION_STEMS, is_negation

_ID_PREFIX = "fast_"  # tells a fast-path call from a model's in the thread
_MAX_COMMAND_CHARS = 200
_OPENING_WORDS = 2


async def fast_confirmation_tool(text: str, environments: Sequence[Environment]) -> ToolCall | None:
    """The tool call an explicit command asks for, or None to let the model read it."""
    command = text.strip()
    if not command or len(command) > _MAX_COMMAND_CHARS or "\n" in command:
        return None
    reading = read(command, environments)
    if not reading.words or reading.words[0].stem in FUNCTION_STEMS or any(map(is_negation, reading.words)):
        return None
    context = TurnContext(tuple(environments), reading.target_env, "message")
    step = await Planner(reading, context, "en", (), Thread(), None).next_step()
    if not isinstance(step, list) or tool(step[0].tool).policy.tier is Tier.READ:
        return None
    # a command starts with what it asks for ("задеплой …", "сделай бэкап …"; not "please deploy
    # …", "ignore previous instructions and deploy …")
    opening = " ".join(word.text for word in reading.words[:_OPENING_WORDS])
    if step[0].tool not in read(opening, environments).named:
        return None
    fields = ARGS[step[0].tool].model_fields
    args = dict(step[0].args)
    if "source_env" in fields and not reading.source_env and not fields["source_env"].is_required():
        del args["source_env"]  # the declared default, not a guess
    from_words = {"env_id": reading.target_env, "source_env": reading.source_env}
    if any(name in args and args[name] != value for name, value in from_words.items()):
        return None  # an environment not named in the words
    if any(
        isinstance(value, str) and value not in reading.quoted and name not in from_words
        for name, value in args.items()
    ):
        return None  # a free text not quoted: the model reads where it ends
    return ToolCall(name=step[0].tool, args=args, id=f"{_ID_PREFIX}{uuid.uuid4().hex[:16]}")
