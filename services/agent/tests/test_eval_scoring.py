"""How the public request set judges a turn, and that the set itself is well formed."""

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from sstools.agent.eval import (
    DOMAIN_HOLDOUT,
    HOLDOUT,
    REQUESTS,
    Cost,
    Request,
    Turn,
    cost_summary,
    heavy_reads,
    load,
    right_language,
    understood,
)
from sstools.common.catalogue import ARGS, TOOLS, tool
from sstools.ops.telemetry import HeavyReadMetrics

IDS = {("dashboard", "Sales Overview", "dev"): 1, ("database", "examples", "prod"): 7}


def _resolve(kind: str, name: str, env: str) -> Any:
    return IDS.get((kind, name, env))


def _changes(name: str) -> bool:
    return tool(name).may_change


def _request(expect: dict[str, Any], lang: str = "en", page: str = "ru") -> Request:
    return Request("x", "…", page, None, lang, expect, "deploy")  # type: ignore[arg-type]


def _turn(*messages: dict[str, Any]) -> Turn:
    return Turn.of([{"content": message.pop("content", ""), "metadata": message} for message in messages])


def test_a_call_with_at_least_the_expected_arguments_is_understood() -> None:
    expect = {
        "tool": "deploy_dashboard",
        "args": {"env_id": "prod", "dashboard_id": {"$dashboard": "Sales Overview"}},
    }
    card = {
        "type": "confirm_required",
        "tool_name": "deploy_dashboard",
        "tool_args": {"env_id": "prod", "source_env": "dev", "dashboard_id": 1},
    }
    assert understood(_request(expect), _turn(card), _resolve, _changes)
    wrong = {**card, "tool_args": {"env_id": "prod", "dashboard_id": 2}}
    assert not understood(_request(expect), _turn(wrong), _resolve, _changes)
    elsewhere = {**card, "tool_args": {"env_id": "dev", "dashboard_id": 1}}
    assert not understood(_request(expect), _turn(elsewhere), _resolve, _changes)


def test_sql_and_databases_are_matched_by_pattern_and_by_the_target_s_id() -> None:
    expect = {
        "tool": "superset_execute_sql",
        "args": {
            "database_id": {"$database": "examples"},
            "sql": {"$regex": "count\\(\\*\\)[\\s\\S]*orders"},
        },
    }
    arguments = {"env_id": "prod", "database_id": 7, "sql": "SELECT COUNT(*) FROM orders"}
    ran = {"type": "tool_start", "tool": "superset_execute_sql", "input": arguments}
    assert understood(_request(expect), _turn(ran), _resolve, _changes)
    in_dev = {**ran, "input": {**arguments, "env_id": "dev"}}  # the id 7 is prod's database
    assert not understood(_request(expect), _turn(in_dev), _resolve, _changes)


def test_a_question_back_must_not_act_and_nothing_asked_must_call_nothing() -> None:
    asked = {"type": "state", "state": "needs_clarification"}
    assert understood(_request({"state": "needs_clarification"}), _turn(asked), _resolve, _changes)
    acting = {"type": "confirm_required", "tool_name": "run_backup", "tool_args": {"env_id": "prod"}}
    assert not understood(
        _request({"state": "needs_clarification"}), _turn(acting, asked), _resolve, _changes
    )
    searched = {"type": "tool_start", "tool": "search_dashboards", "input": {"env_id": "dev"}}
    assert understood(_request({"state": "needs_clarification"}), _turn(searched, asked), _resolve, _changes)
    assert not understood(_request({"tool": None}), _turn(searched), _resolve, _changes)
    assert understood(
        _request({"tool": None}), _turn({"type": "token", "content": "Хорошо."}), _resolve, _changes
    )


def test_the_answer_s_language_is_that_of_its_words() -> None:
    russian = _turn({"type": "token", "content": "Отменено: ничего не выполнено."})
    assert right_language(_request({"tool": None}, lang="ru", page="en"), russian)
    assert not right_language(_request({"tool": None}, lang="en", page="en"), russian)


def test_a_request_costs_the_heavy_reads_ops_counted_while_it_ran() -> None:
    registry = CollectorRegistry()
    ops = HeavyReadMetrics(registry)  # ops' own counter, read from its /metrics page as the runner does
    ops.count("get_health_summary", "spent")
    before = heavy_reads(generate_latest(registry).decode())
    assert before == {"spent": 1}
    for tool_name in ("superset_explore_database", "superset_explore_database", "superset_execute_sql"):
        ops.count(tool_name, "spent")
    ops.count("superset_execute_sql", "over_budget")  # refused, yet counted against the budget
    after = heavy_reads(generate_latest(registry).decode())
    assert Cost.between(before, after) == Cost(reads=4, over_budget=1)
    assert Cost.between(after, after) == Cost(reads=0, over_budget=0)
    costs = [Cost(0, 0), Cost(4, 1), Cost(1, 0), Cost(9, 3)]
    assert cost_summary(costs) == {"median": 2.5, "max": 9, "total": 14, "over_budget": 4}


@pytest.mark.parametrize(
    ("path", "least"),
    [(REQUESTS, 150), (HOLDOUT, 80), (DOMAIN_HOLDOUT, 100)],
    ids=["public", "holdout", "domain-holdout"],
)
def test_each_set_is_large_enough_and_names_only_real_tools_and_arguments(path: Path, least: int) -> None:
    requests = load(path)
    assert len(requests) >= least
    assert {request.lang for request in requests} == {"ru", "en"}
    ids = [request.id for request in requests]
    assert len(ids) == len(set(ids))
    names = {spec.name for spec in TOOLS}
    for request in requests:
        assert request.follows is None or ids.index(request.follows) < ids.index(request.id), request.id
        if request.expect.get("tool"):
            assert request.expect["tool"] in names, request.id
            fields = ARGS[request.expect["tool"]].model_fields
            known = set(fields) | {info.alias for info in fields.values() if info.alias}
            assert set(request.expect["args"]) <= known, request.id
