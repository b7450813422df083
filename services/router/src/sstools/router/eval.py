"""`python -m sstools.router.eval [SET]`: how well the router picks tools on a labelled set.

SET: ``holdout`` (the default), ``tuning`` (:mod:`sstools.router.labelled`) or a file whose lines
are {"q", "lang", "kind", "needed": [tools], "forbidden": [tools]}. Prints JSON:
recall of the needed tools (per tool and per whole case), mean tools offered, how often a
forbidden (negated) tool was offered, schema tokens offered against the full catalogue, and
the same per language and per kind. Routes in-process, configured by ROUTER_* like the service.
"""

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from sstools.common.catalogue import TOOLS
from sstools.common.runtime import load_settings
from sstools.router.labelled import HOLDOUT, TUNING, Case, load_cases
from sstools.router.settings import RouterSettings
from sstools.router.warmup import build_router

_TOKEN = re.compile(r"\w+|[^\w\s]")
_SETS = {"holdout": HOLDOUT, "tuning": TUNING}


def schema_tokens() -> dict[str, int]:
    """Tokens each tool's function schema costs in a prompt (name and description; the argument
    schemas arrive with the agent's tools and would add to every tool alike)."""
    costs = {}
    for spec in TOOLS:
        schema = {"type": "function", "function": {"name": spec.name, "description": spec.description_en}}
        costs[spec.name] = len(_TOKEN.findall(json.dumps(schema)))
    return costs


def case_recall(cases: Sequence[Case], offered: Sequence[Iterable[str]]) -> float:
    """The share of cases whose needed tools were all offered."""
    return sum(case.needed <= set(tools) for case, tools in zip(cases, offered, strict=True)) / len(cases)


def _summary(
    cases: Sequence[Case], offered: Sequence[Sequence[str]], costs: dict[str, int]
) -> dict[str, Any]:
    needed_total = sum(len(case.needed) for case in cases)
    found = sum(len(case.needed & set(tools)) for case, tools in zip(cases, offered, strict=True))
    negations = [(case, tools) for case, tools in zip(cases, offered, strict=True) if case.forbidden]
    full_catalogue = sum(costs.values())
    return {
        "cases": len(cases),
        "recall": round(found / needed_total, 4) if needed_total else None,
        "case_recall": round(case_recall(cases, offered), 4),
        "mean_tools_offered": round(statistics.mean(len(tools) for tools in offered), 2),
        "forbidden_offered": sum(bool(case.forbidden & set(tools)) for case, tools in negations),
        "negation_cases": len(negations),
        "schema_token_reduction": round(
            1 - statistics.mean(sum(costs[name] for name in tools) for tools in offered) / full_catalogue, 4
        ),
    }


def evaluate(cases: Sequence[Case], route: Callable[[str], Sequence[str]]) -> dict[str, Any]:
    """Route every case and report overall, per language and per kind, and the misses."""
    costs = schema_tokens()
    offered = [list(route(case.query)) for case in cases]
    report: dict[str, Any] = {"overall": _summary(cases, offered, costs)}
    for field in ("lang", "kind"):
        groups: dict[str, list[int]] = defaultdict(list)
        for index, case in enumerate(cases):
            groups[getattr(case, field)].append(index)
        report[f"by_{field}"] = {
            name: _summary([cases[i] for i in indexes], [offered[i] for i in indexes], costs)
            for name, indexes in sorted(groups.items())
        }
    report["misses"] = [
        {"q": case.query, "missing": sorted(case.needed - set(tools)), "offered": tools}
        for case, tools in zip(cases, offered, strict=True)
        if not case.needed <= set(tools)
    ]
    report["forbidden_hits"] = [
        {"q": case.query, "offered_forbidden": sorted(case.forbidden & set(tools))}
        for case, tools in zip(cases, offered, strict=True)
        if case.forbidden & set(tools)
    ]
    return report


def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m sstools.router.eval",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "set", nargs="?", default="holdout", help="holdout (the default), tuning, or a file of labelled cases"
    )
    parser.add_argument("--no-misses", action="store_true", help="leave the list of misses out")
    args = parser.parse_args(list(argv) if argv is not None else None)
    router = build_router(load_settings(RouterSettings)).router
    report = evaluate(
        load_cases(_SETS.get(args.set) or Path(args.set)), lambda query: router.route(query).names
    )
    report["router"] = {
        "model": router.model_name or "keyword-only (degraded)",
        "threshold": router.threshold,
    }
    if args.no_misses:
        report.pop("misses")
    json.dump(report, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
