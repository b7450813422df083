"""Issue 17: tiers tell the truth. Every tool of the catalogue is called for real, through the chat,
against the whole stack with both Superset instances, and what it changed is read from outside
the services (:mod:`sstools.devstack.sideeffects`: ops' rows, backup files, the exports
repository, Superset's objects, the example database) before and after the call.

- A tool whose tier is ``read`` (DESIGN.md's table, :mod:`sstools.devstack.policy_table`) must
  change nothing at all, and must run without a card.
- A write or dangerous tool pauses for confirmation; the sweep confirms it as ``root`` (admin) so
  it really runs, and it must change all it exists to change and nothing else (:data:`STEPS` says
  what and why, and what it may change besides where the session's shared Superset decides it):
  that is also how the sweep proves it can see a change at all.

The calls are ordered so that every write succeeds here: the branch before the commit on it, the
deploy before the copy and the documentation of what it deployed, the maintenance window started
before it is ended, and the reads in between, where there is something for them to read (a task,
an open window). Superset objects the writes create are removed afterwards, and the table the
mutating statement created is dropped, so the session's instances are left as they were found.
"""

import asyncio
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from gradio_client import Client

from sstools.common.catalogue import Tier
from sstools.devstack.agentstack import AgentStack, dump, new_conversation
from sstools.devstack.agentstack import Reply as ChatReply
from sstools.devstack.fake_llm import FakeLlm, Reply, ToolCall
from sstools.devstack.policy_table import MUTATING_SQL, POLICY_TABLE
from sstools.devstack.sideeffects import (
    Scope,
    Snapshot,
    areas,
    describe,
    diff,
    remove_new_objects,
    settled,
)
from sstools.devstack.superset import Instance

SWEEP_TABLE = "sweep_side_effect"  # what the confirmed mutating statement creates
SWEEP_BRANCH = "side-effect-sweep"
DEPLOYED_SLUG = "orders-events"  # the dev dashboard (id 2) the sweep deploys into prod

Args = dict[str, Any] | Callable[[Snapshot], dict[str, Any]]


@dataclass(frozen=True)
class Step:
    tool: str
    args: Args
    # For a write: the areas of the snapshot the call must change, all of them (with why) ...
    changes: tuple[str, ...] = ()
    why: str = ""
    # ... and those it may change besides, depending on what earlier suites of the session left
    # in the shared Superset instances; it changes nothing else.
    may_change: tuple[str, ...] = ()
    # superset_execute_sql with a statement that writes: DESIGN.md's policy for such SQL.
    mutating_sql: bool = False

    @property
    def tier(self) -> Tier:
        """DESIGN.md's tier, from the table written out by hand (not from the catalogue)."""
        return (MUTATING_SQL if self.mutating_sql else POLICY_TABLE[self.tool])[0]

    @property
    def label(self) -> str:
        return f"{self.tool}{' (mutating SQL)' if self.mutating_sql else ''}"


def _prod_dashboard(slug: str) -> Callable[[Snapshot], int]:
    """The id prod's Superset gave the dashboard with this slug (deployed by an earlier step)."""

    def find(snapshot: Snapshot) -> int:
        for key, marker in snapshot.areas["superset.prod.dashboard"].items():
            if json.loads(marker).get("slug") == slug:
                return int(key)
        raise AssertionError(f"no dashboard {slug!r} in prod: {snapshot.areas['superset.prod.dashboard']}")

    return find


def _latest_task(snapshot: Snapshot) -> dict[str, Any]:
    tasks = [json.loads(marker) for marker in snapshot.areas["ops.ops_tasks"].values()]
    assert tasks, "no ops task to ask about: the writes before should have made some"
    return {"task_id": max(tasks, key=lambda task: str(task["created_at"]))["id"]}


DEPLOYED = _prod_dashboard(DEPLOYED_SLUG)
TASK = ("ops.ops_tasks",)
# A confirmed change is recorded under its Idempotency-Key, so that a resent one is not run twice.
CONFIRMED = ("ops.ops_idempotency",)
# Importing over a dashboard an earlier suite of the session deployed overwrites it, but its
# charts and datasets need not show a new change time; into a prod without them, they are new.
IMPORTED_CONTENT = ("superset.prod.chart", "superset.prod.dataset")

STEPS: tuple[Step, ...] = (
    Step(
        "create_branch",
        {"name": SWEEP_BRANCH},
        ("git", *CONFIRMED),
        "a new ref in the exports repository (the first git call also creates the repository)",
    ),
    Step(
        "commit_changes",
        {"env_id": "dev", "branch": SWEEP_BRANCH, "dashboard_ids": [1], "message": "sweep"},
        ("git", *CONFIRMED),
        "dashboard 1's export committed on the new branch: new objects, the branch moves",
    ),
    Step(
        "run_backup",
        {"env_id": "dev"},
        (*TASK, "ops.ops_backups", "backups", *CONFIRMED),
        "a backup task, its record and its zip",
    ),
    Step(
        "deploy_dashboard",
        {"env_id": "prod", "dashboard_id": 2, "source_env": "dev"},
        (*TASK, "ops.ops_backups", "backups", "superset.prod.dashboard", *CONFIRMED),
        "prod is backed up, then dev's 'Orders and Events' is imported into it",
        may_change=IMPORTED_CONTENT,
    ),
    Step(
        "execute_migration",
        {"env_id": "prod", "source_env": "dev", "dashboard_ids": [2]},
        (*TASK, "ops.ops_backups", "backups", "superset.prod.dashboard", *CONFIRMED),
        "a migration task that backs prod up before importing (again) into it",
        may_change=IMPORTED_CONTENT,
    ),
    Step(
        "superset_create_dashboard",
        {"env_id": "prod", "title": "Side-effect sweep"},
        ("superset.prod.dashboard", *CONFIRMED),
        "a new dashboard",
    ),
    Step(
        "superset_copy_dashboard",
        lambda snapshot: {"env_id": "prod", "dashboard_id": DEPLOYED(snapshot), "title": "Sweep copy"},
        ("superset.prod.dashboard", "superset.prod.chart", *CONFIRMED),
        "a copy of the deployed dashboard, sharing its charts (each now on both dashboards)",
    ),
    Step(
        "superset_execute_sql",
        {"env_id": "dev", "database_id": 1, "sql": f"CREATE TABLE {SWEEP_TABLE} (id INTEGER)"},
        ("examples", *CONFIRMED),
        "a confirmed statement that writes: a new table in the example database",
        mutating_sql=True,
    ),
    Step(
        "superset_create_dataset",
        {"env_id": "dev", "database_id": 1, "table_name": SWEEP_TABLE},
        ("superset.dev.dataset", *CONFIRMED),
        "a dataset for the table the statement above created (no suite has one for it)",
    ),
    Step(
        "run_llm_validation",
        {"env_id": "dev", "dashboard_id": 1},
        (*TASK, *CONFIRMED),
        "a validation task keeps its report",
    ),
    Step(
        "run_llm_documentation",
        lambda snapshot: {"env_id": "prod", "dashboard_id": DEPLOYED(snapshot)},
        (*TASK, "superset.prod.chart", *CONFIRMED),
        "a documentation task that writes descriptions into the deployed dashboard's charts",
    ),
    Step(
        "start_maintenance",
        {"env_id": "dev", "reason": "side-effect sweep"},
        ("ops.ops_maintenance", *CONFIRMED),
        "an open maintenance window",
    ),
    # The reads, with something to read: tasks, backups, an open window, a deployed dashboard.
    Step("show_capabilities", {}),
    Step("search_dashboards", {"env_id": "dev", "query": "Sales"}),
    Step("search_dashboards", {"env_id": "prod"}),
    Step("get_health_summary", {"env_id": "dev"}),
    Step("list_environments", {}),
    Step("get_task_status", _latest_task),
    Step("list_llm_providers", {}),
    Step("get_llm_status", {}),
    Step("list_maintenance_events", {}),
    Step("list_maintenance_events", {"env_id": "dev"}),
    Step(
        "superset_execute_sql",
        {"env_id": "dev", "database_id": 1, "sql": "SELECT region, SUM(amount) FROM sales GROUP BY region"},
    ),
    Step("superset_explore_database", {"env_id": "dev"}),
    Step(
        "superset_explore_database", {"env_id": "dev", "database_id": 1, "schema": "main", "table": "sales"}
    ),
    Step("superset_audit_permissions", {"env_id": "dev", "dashboard_id": 1}),
    Step("superset_audit_permissions", {"env_id": "dev", "dataset_id": 1}),
    Step("superset_format_sql", {"sql": "select region, sum(amount) from sales group by region"}),
    Step(
        "end_maintenance",
        {"env_id": "dev"},
        ("ops.ops_maintenance", *CONFIRMED),
        "the window started above is closed",
    ),
)


@dataclass
class Outcome:
    step: Step
    args: dict[str, Any]
    replies: list[ChatReply] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        replies = "\n    ".join(dump(reply)[:1500] for reply in self.replies)
        return f"{self.step.label} {json.dumps(self.args)}: " + "; ".join(self.problems) + f"\n    {replies}"


async def _call(
    stack: AgentStack, llm: FakeLlm, session: Client, name: str, args: dict[str, Any]
) -> list[ChatReply]:
    """The model asks for the call; a card, if any, is confirmed in the same conversation."""
    llm.script.clear()
    llm.says(Reply(tool_calls=(ToolCall(name, args),)), Reply(content="Готово."))
    conversation = new_conversation()
    replies = [await stack.say(f"sweep {name}", conversation, client=session)]
    if replies[0].of("confirm_required"):
        replies.append(await stack.say("", conversation, action="confirm", client=session))
    return replies


def _ran(name: str, replies: list[ChatReply]) -> str | None:
    """Why the call did not run to its end, or None if it did."""
    last = replies[-1]
    if [event["tool"] for event in last.of("tool_start")] != [name]:
        return "it never started"
    if last.of("tool_error"):
        return f"it failed: {last.of('tool_error')[0].get('error')}"
    if [event["tool"] for event in last.of("tool_end")] != [name]:
        return "it did not end"
    return None


@pytest.mark.timeout(900)
async def test_every_tool_changes_only_what_its_tier_allows(
    llm_stack: AgentStack, llm: FakeLlm, supersets: dict[str, Instance], tmp_path: Path
) -> None:
    assert {step.tool for step in STEPS} == set(POLICY_TABLE), "the sweep must call every tool"
    unjustified = [step.label for step in STEPS if step.tier is not Tier.READ and not step.changes]
    assert not unjustified, f"say what these writes must change: {unjustified}"
    scope = Scope.of(llm_stack.database_url, tmp_path, supersets)
    session = await asyncio.to_thread(llm_stack.client, "root")
    await settled(scope.database_url)
    start = before = await Snapshot.take(scope)
    outcomes = []
    left: list[str] = []
    try:
        for step in STEPS:
            args = step.args(before) if callable(step.args) else step.args
            outcome = Outcome(step, args)
            outcome.replies = await _call(llm_stack, llm, session, step.tool, args)
            await settled(scope.database_url)
            after = await Snapshot.take(scope)
            changes = diff(before, after)
            before = after
            carded = bool(outcome.replies[0].of("confirm_required"))
            if (why := _ran(step.tool, outcome.replies)) is not None:
                outcome.problems.append(f"the call did not run, so it proves nothing: {why}")
            if step.tier is Tier.READ:
                if carded:
                    outcome.problems.append("a read asked for confirmation")
                if changes:
                    outcome.problems.append(f"its tier is read, yet it changed:{describe(changes)}")
            else:
                if not carded:
                    outcome.problems.append(f"a {step.tier} call ran without a confirmation card")
                changed = areas(changes)
                # all it exists to change, and nothing beyond what it may
                if not set(step.changes) <= changed <= {*step.changes, *step.may_change}:
                    outcome.problems.append(
                        f"it should change {', '.join(sorted(step.changes))} ({step.why}), and may change"
                        f" {', '.join(step.may_change) or 'nothing else'}; it changed:{describe(changes)}"
                    )
            outcomes.append(outcome)
    finally:
        left = await remove_new_objects(scope, start)
        examples = sqlite3.connect(scope.examples)
        try:
            examples.execute(f"DROP TABLE IF EXISTS {SWEEP_TABLE}")
            examples.commit()
        finally:
            examples.close()
    failed = [str(outcome) for outcome in outcomes if outcome.problems]
    failed += [f"left behind in Superset: {problem}" for problem in left]
    assert not failed, f"{len(failed)} of {len(outcomes)} calls:\n" + "\n".join(failed)
