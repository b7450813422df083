"""The router's labelled request sets, shipped in this package.

Each line: {"q", "lang", "kind", "needed": [tools], "forbidden": [tools]}. ``TUNING`` is what the
router learns from: its keyword rules were tuned on it, and its requests that need one tool alone
are the embedding tier's examples of that tool. ``HOLDOUT`` was written apart from it and is only
measured (the eval, the floor the tests hold it to, the accuracy the router exports), never read
to route.
"""

import json
from collections import defaultdict
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

TUNING = resources.files("sstools.router") / "samples" / "tuning.jsonl"
HOLDOUT = resources.files("sstools.router") / "samples" / "holdout.jsonl"


@dataclass(frozen=True)
class Case:
    query: str
    lang: str
    kind: str
    needed: frozenset[str]
    forbidden: frozenset[str]


def load_cases(path: Traversable) -> list[Case]:
    cases = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            raw = json.loads(line)
            cases.append(
                Case(
                    raw["q"],
                    raw["lang"],
                    raw["kind"],
                    frozenset(raw["needed"]),
                    frozenset(raw.get("forbidden", [])),
                )
            )
    return cases


def tool_examples(cases: list[Case]) -> dict[str, tuple[str, ...]]:
    """Each tool's example requests: the cases that need that tool alone and refuse none."""
    examples: dict[str, list[str]] = defaultdict(list)
    for case in cases:
        if len(case.needed) == 1 and not case.forbidden:
            (tool,) = case.needed
            examples[tool].append(case.query)
    return {tool: tuple(queries) for tool, queries in examples.items()}
