"""What a confirmation card says will change, in the card's language: the object named (the
dashboards by title beside their id), where from and where to. The words are part of the card,
so part of its digest: a person confirms exactly the change they read. Each tool's text is
part of its declaration in the catalogue."""

from collections.abc import Mapping, Sequence
from typing import Any

from sstools.agent.language import Lang, say
from sstools.agent.wording import Facts
from sstools.common.catalogue import tool


def dashboards_named(dashboards: Sequence[Mapping[str, Any]]) -> str:
    """ "«Sales Overview» (#1), #7": each by its title where it has one, always by its id."""
    return ", ".join(
        f"«{board['title']}» (#{board['id']})" if board.get("title") else f"#{board['id']}"
        for board in dashboards
    )


def change(
    tool_name: str, lang: Lang, args: Mapping[str, Any], dashboards: Sequence[Mapping[str, Any]]
) -> str:
    """What running ``tool_name`` with ``args`` changes; names and values fill the text as values only."""
    texts = tool(tool_name).change
    if texts is None:
        return say(
            lang,
            f"Выполняется {tool_name} с аргументами ниже.",
            f"{tool_name} runs with the arguments below.",
        )
    return say(lang, *texts).format_map(Facts({**args, "what": dashboards_named(dashboards)}))
