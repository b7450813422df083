"""A model's names for what the planner reads by type: an environment by any word for it, a
dashboard by its title — read by the planner's own readers, so that a model's "Sales Overview"
or "production" reaches the very dashboard and environment the planner's would."""

from collections.abc import Mapping, Sequence
from typing import Any

from sstools.agent.context import Environment, env_aliases
from sstools.agent.planner.grounded import find
from sstools.agent.planner.steps import Ground
from sstools.common.catalogue import ARGS
from sstools.common.language import words

_ENV_FIELDS = ("env_id", "source_env")


async def with_names_read(
    name: str, args: Mapping[str, Any], environments: Sequence[Environment], ground: Ground | None
) -> dict[str, Any]:
    """Tool ``name``'s ``args`` with each environment and dashboard given by name replaced by its
    id; a name that spells none, or several, is left as given for the gate to refuse."""
    aliases = env_aliases(environments)
    read = dict(args)
    for field in _ENV_FIELDS:
        # exactly a word for it: "PROD" or "prod\n" is a crafted id, refused by the gate
        if isinstance(value := read.get(field), str):
            read[field] = aliases.get(value, value)
    given: list[Any] = read["dashboard_ids"] if isinstance(read.get("dashboard_ids"), list) else []
    named = [item for item in [read.get("dashboard_id"), *given] if isinstance(item, str)]
    # where the dashboard is now: a copy between environments reads it where it comes from
    fields = ARGS[name].model_fields if name in ARGS else {}  # an unknown tool is the gate's to refuse
    home = read.get("source_env") if "source_env" in fields else read.get("env_id")
    # a model's text never reaches ops: only a configured environment's titles are read
    known = {env.id for env in environments}
    if not named or ground is None or home not in known or not (titles := await ground.titles(str(home))):
        return read
    if isinstance(read.get("dashboard_id"), str):
        read["dashboard_id"] = await _dashboard(read["dashboard_id"], titles)
    if given:
        read["dashboard_ids"] = [
            await _dashboard(item, titles) if isinstance(item, str) else item for item in given
        ]
    return read


async def _dashboard(name: str, titles: Mapping[int, str]) -> int | str:
    if name.strip().isdigit():
        return int(name)
    said = words(name)
    found = await find(said, range(len(said)), list(titles.values()), None)
    named = [board for board, title in titles.items() if title in {item.label for item in found}]
    return named[0] if len(named) == 1 else name
