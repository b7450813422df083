"""The public request set (``services/agent/eval/requests.jsonl``) and how an answer is judged:
understood when the turn called the expected tool with at least the expected arguments (a read
run, or a write stopped at its card), asked back when it should, or called nothing when nothing
was asked for; in the right language when its answer's words are in the expected one. What each
request cost is the heavy reads ops counted for it against the person's budget a minute.

``python -m sstools.agent.eval`` runs the set through a running stack (see ``__main__``).
"""

import json
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from sstools.agent.language import Lang, language_of

# The set lives beside the package's sources (services/agent/eval/), not inside the package.
REQUESTS = Path(__file__).resolve().parents[4] / "eval" / "requests.jsonl"
# Written apart from the planner and from REQUESTS, by someone who read neither: only measured.
HOLDOUT = REQUESTS.with_name("holdout.jsonl")
# Written apart too, from the tools' declarations alone, over a demo database of another domain
# (eval/domain/): the planner must read any Superset, not the demo's words.
DOMAIN_HOLDOUT = REQUESTS.with_name("holdout_domain.jsonl")
Resolve = Callable[[str, str, str], Any]  # (kind, name, env) → id
# Ops' count of heavy reads (health checks, statements, explorations) by tool and outcome, on its
# /metrics page: what the budget a minute counted, read from ops rather than from the agent's
# stream, which shows only the calls the agent reports as tools.
HEAVY_READS = "sstools_ops_heavy_reads_total"


@dataclass(frozen=True)
class Request:
    id: str
    text: str
    page_lang: Lang
    env: str | None
    lang: Lang
    expect: dict[str, Any]
    kind: str
    follows: str | None = None


def load(path: Path = REQUESTS) -> list[Request]:
    requests = []
    for line in path.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        requests.append(
            Request(
                item["id"],
                item["text"],
                item["page_lang"],
                item["env"],
                item["lang"],
                item["expect"],
                item["kind"],
                item.get("follows"),
            )
        )
    return requests


@dataclass(frozen=True)
class Call:
    tool: str
    args: Mapping[str, Any]


@dataclass(frozen=True)
class Turn:
    """What one turn did, from its stream: the calls it made or proposed, its state, its answer."""

    calls: tuple[Call, ...]
    state: str
    text: str
    errors: tuple[str, ...] = ()

    @classmethod
    def of(cls, messages: Iterable[Mapping[str, Any]]) -> "Turn":
        calls, state, text, errors = [], "", "", []
        for message in messages:
            metadata = message.get("metadata") or {}
            kind = metadata.get("type")
            if kind == "tool_start":
                calls.append(Call(str(metadata["tool"]), metadata.get("input") or {}))
            elif kind == "confirm_required":
                calls.append(Call(str(metadata["tool_name"]), metadata.get("tool_args") or {}))
            elif kind == "error":
                errors.append(str(metadata.get("code")))
            elif kind == "state":
                state = str(metadata["state"])
            elif kind == "token":
                text += str(message.get("content") or "")
        return cls(tuple(calls), state, text, tuple(errors))

    def then(self, answer: "Turn") -> "Turn":
        """This turn followed by the answer to its card: the card's call counts, the state is the
        send's (what the request led to), the words are both."""
        words = f"{self.text}\n{answer.text}".strip()
        return Turn(self.calls + answer.calls, self.state, words, self.errors + answer.errors)


def _matches(expected: Any, given: Any, env: str, resolve: Resolve) -> bool:
    if isinstance(expected, dict) and "$regex" in expected:
        return isinstance(given, str) and re.search(expected["$regex"], given, re.I) is not None
    if isinstance(expected, dict) and "$dashboard" in expected:
        return bool(given == resolve("dashboard", expected["$dashboard"], "dev"))
    if isinstance(expected, dict) and "$database" in expected:
        return bool(given == resolve("database", expected["$database"], env))
    if isinstance(expected, list):
        return (
            isinstance(given, list)
            and len(given) == len(expected)
            and all(_matches(want, got, env, resolve) for want, got in zip(expected, given, strict=True))
        )
    return bool(expected == given)


def understood(request: Request, turn: Turn, resolve: Resolve, changes: Callable[[str], bool]) -> bool:
    """Whether the turn did what the request asked (``changes``: whether a tool may change
    something, for "asked back without acting")."""
    expect = request.expect
    if "state" in expect:
        return turn.state == expect["state"] and not any(changes(call.tool) for call in turn.calls)
    if expect["tool"] is None:
        return not turn.calls
    wanted = expect["args"]
    for call in turn.calls:
        env = str(call.args.get("env_id") or request.env or "dev")
        if call.tool == expect["tool"] and all(
            key in call.args and _matches(value, call.args[key], env, resolve)
            for key, value in wanted.items()
        ):
            return True
    return False


def heavy_reads(exposition: str) -> dict[str, float]:
    """Ops' heavy reads so far, every tool's summed by outcome (``spent``, ``over_budget``), from
    its /metrics page."""
    counted: dict[str, float] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name == HEAVY_READS:
                outcome = sample.labels["outcome"]
                counted[outcome] = counted.get(outcome, 0.0) + sample.value
    return counted


@dataclass(frozen=True)
class Cost:
    """The heavy reads one request cost: every one the budget counted, and of those the ones
    refused for being over it."""

    reads: int
    over_budget: int

    @classmethod
    def between(cls, before: Mapping[str, float], after: Mapping[str, float]) -> "Cost":
        """What ops counted between two readings of :func:`heavy_reads`."""
        spent = {outcome: round(after[outcome] - before.get(outcome, 0.0)) for outcome in after}
        return cls(sum(spent.values()), spent.get("over_budget", 0))


def cost_summary(costs: Sequence[Cost]) -> dict[str, float]:
    """The heavy reads per request (median and max) and in all, and how many were over budget."""
    reads = [cost.reads for cost in costs]
    return {
        "median": statistics.median(reads),
        "max": max(reads),
        "total": sum(reads),
        "over_budget": sum(cost.over_budget for cost in costs),
    }


def right_language(request: Request, turn: Turn) -> bool:
    """Whether the answer is in the expected language (an answer of no words of its own — a
    table of names, say — counts as the page's)."""
    return language_of(turn.text, request.page_lang) == request.lang
