"""The chart's Grafana board without a Prometheus (tests/test_stack.py evaluates it against a live
one): every query parses as Grafana sends it, every series is scoped by the namespace variable,
the goals are drawn where the spec and the alerts put them; and `make run`'s Prometheus scrapes
every service the supervisor runs."""

import json
import re
from pathlib import Path
from typing import Any

import yaml

from sstools.devstack.monitoring import BOARD, as_grafana_sends, board_queries, scrape_configuration
from sstools.devstack.prometheus import run_promtool
from sstools.devstack.running import free_listeners
from sstools.devstack.stack import SETTINGS, addresses

BROKEN_BOARD = Path(__file__).parent / "fixtures" / "broken-board" / "grafana-dashboard.json"
VALUES = BOARD.parent.parent / "values.yaml"
_SERIES = re.compile(r"\b(?:sstools_|gen_ai_client_)[a-z0-9_]+(\{[^}]*\})?")


def _check_as_rules(board: Path, folder: Path) -> tuple[int, str]:
    """promtool's verdict on every query of ``board``, each as a recording rule."""
    rules = [
        {"record": f"board:query_{index}", "expr": as_grafana_sends(query.expr, 300)}
        for index, query in enumerate(board_queries(board))
    ]
    path = folder / "board.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "board", "rules": rules}]}))
    checked = run_promtool("check", "rules", path)
    return checked.returncode, checked.stdout + checked.stderr


def test_every_query_of_the_board_parses_as_grafana_sends_it(tmp_path: Path) -> None:
    returncode, said = _check_as_rules(BOARD, tmp_path)
    assert returncode == 0, said
    returncode, said = _check_as_rules(BROKEN_BOARD, tmp_path)
    assert returncode != 0
    assert "board:query_0" in said, said  # the unbalanced one, and it alone


def test_every_series_the_board_reads_is_scoped_by_the_namespace_variable() -> None:
    board = json.loads(BOARD.read_text())
    (namespace,) = [variable for variable in board["templating"]["list"] if variable["name"] == "namespace"]
    assert namespace["includeAll"]
    assert namespace["allValue"] == ".*"
    for query in board_queries():
        selectors = [match.group(1) or "" for match in _SERIES.finditer(query.expr)]
        assert selectors, query
        assert all(selector.startswith('{namespace=~"$namespace"') for selector in selectors), query


def _lines(panel: dict[str, Any]) -> list[float]:
    defaults = panel["fieldConfig"]["defaults"]
    assert defaults["custom"]["thresholdsStyle"]["mode"] == "line", panel["title"]
    return [step["value"] for step in defaults["thresholds"]["steps"] if step["value"] is not None]


def test_the_board_draws_the_goals() -> None:
    panels = {panel["title"]: panel for panel in json.loads(BOARD.read_text())["panels"]}
    alerts = yaml.safe_load(VALUES.read_text())["prometheusRule"]
    # SC-002 where its alert fires; SC-001 and the budgets as the spec and bench/agent.py set them
    assert (
        _lines(panels["SC-002 first token latency (p50 / p95)"]) == [alerts["firstTokenP95Seconds"]] == [1.5]
    )
    assert _lines(panels["SC-001 tool-selection accuracy"]) == [0.92]
    assert _lines(panels["Router latency per tier (p99)"]) == [0.001, 0.02]
    assert _lines(panels["Agent first event (p99)"]) == [0.1]
    wanted = (
        "Superset calls per environment",
        "Ops task outcomes",
        "Model server",
        "SC-007 document parsing",
        "Turns and active conversations",
    )
    assert set(wanted) <= set(panels)


def test_make_runs_prometheus_scrapes_every_service_the_supervisor_runs() -> None:
    services = addresses(free_listeners())
    configuration = scrape_configuration({service.name: service.metrics_target for service in services})
    jobs = {job["job_name"]: job["static_configs"][0]["targets"] for job in configuration["scrape_configs"]}
    assert set(jobs) == set(SETTINGS)
    assert all(jobs[service.name] == [service.metrics_target] for service in services)
