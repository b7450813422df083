"""The chart's alerting rules, proven with Prometheus' own promtool: the PrometheusRule rendered
with the production values passes `promtool check rules`, and the unit tests in
tests/fixtures/alert-rules/ (series that must fire each alert, and series that must not) pass
`promtool test rules` against it. A broken rule and a wrong expectation must make promtool fail.
(That the rule renders only where the cluster serves its kind: tests/test_helm.py.)"""

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from sstools.agent.telemetry import TurnMetrics
from sstools.devstack import prometheus
from sstools.devstack.manifests import CHART, render
from sstools.devstack.prometheus import PromtoolMissing, promtool, run_promtool
from sstools.router.telemetry import RouterMetrics

FIXTURES = Path(__file__).parent / "fixtures" / "alert-rules"
UNIT_TESTS = sorted(FIXTURES.glob("*.test.yaml"))
BROKEN = FIXTURES / "broken"
PRODUCTION = [CHART / "values-prod.yaml"]


def _rule(values_files: list[Path]) -> dict[str, Any]:
    """The one PrometheusRule rendered (release "sstools", namespace "default", as the unit tests'
    series are labelled)."""
    (rule,) = [
        document for document in render(values_files=values_files) if document["kind"] == "PrometheusRule"
    ]
    return rule


@pytest.fixture(scope="module")
def rule() -> dict[str, Any]:
    return _rule(PRODUCTION)


def _alerts(rule: dict[str, Any]) -> set[str]:
    return {entry["alert"] for group in rule["spec"]["groups"] for entry in group["rules"]}


def _with_rules(rule: dict[str, Any], directory: Path, unit_tests: list[Path]) -> list[Path]:
    """The rule's groups as a Prometheus rules file, rules.yaml, beside copies of ``unit_tests``
    (which name it): the copies' paths."""
    (directory / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    return [Path(shutil.copy(path, directory)) for path in unit_tests]


def test_without_promtool_the_failure_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(prometheus, "DEBIAN_PROMTOOL", tmp_path / "promtool")
    with pytest.raises(PromtoolMissing, match="apt-get install prometheus"):
        promtool()


def test_the_alerts_people_need_are_in_the_rule(rule: dict[str, Any]) -> None:
    assert _alerts(rule) == {
        "SSToolsServiceDown",
        "SSToolsGrpcErrors",
        "SSToolsHttpErrors",
        "SSToolsRouterModelUnavailable",
        "SSToolsSupersetUnreachable",
        "SSToolsMigrationFailed",
        "SSToolsFirstTokenSlow",
        "SSToolsRouterSlow",
        "SSToolsFirstTokenBudgetBurnFast",
        "SSToolsFirstTokenBudgetBurnSlow",
        "SSToolsRouterBudgetBurnFast",
        "SSToolsRouterBudgetBurnSlow",
    }
    for group in rule["spec"]["groups"]:
        for entry in group["rules"]:
            assert entry["labels"]["severity"] in {"critical", "warning"}, entry["alert"]
            assert set(entry["annotations"]) == {"summary", "description", "runbook"}, entry["alert"]


def test_the_rendered_rules_pass_promtool_check(rule: dict[str, Any], tmp_path: Path) -> None:
    _with_rules(rule, tmp_path, [])
    checked = run_promtool("check", "rules", tmp_path / "rules.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(_alerts(rule))} rules found" in checked.stdout


def test_the_rules_fire_and_stay_quiet_as_the_unit_tests_say(rule: dict[str, Any], tmp_path: Path) -> None:
    tested = run_promtool("test", "rules", *_with_rules(rule, tmp_path, UNIT_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert tested.stdout.count("SUCCESS") == len(UNIT_TESTS)


def test_every_alert_has_a_case_that_fires_it_and_one_that_must_not(rule: dict[str, Any]) -> None:
    """An alert without both could fire always, or never, and its unit tests would not say so."""
    firing: set[str] = set()
    quiet: set[str] = set()
    for path in UNIT_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for expectation in case["alert_rule_test"]:
                (firing if expectation["exp_alerts"] else quiet).add(expectation["alertname"])
    assert firing == _alerts(rule)
    assert quiet == _alerts(rule)


@pytest.mark.parametrize(
    ("budgets", "buckets"),
    [({}, {"1.5", "0.05"}), ({"firstTokenP95Seconds": 2, "routerP99Seconds": 0.1}, {"2.0", "0.1"})],
    ids=["goals", "other budgets"],
)
def test_the_budgets_are_bucket_boundaries_the_services_export(
    budgets: dict[str, float], buckets: set[str], tmp_path: Path
) -> None:
    """The burn alerts count a bucket by its `le`: a budget that names no bucket of the histogram,
    or names it otherwise than the services write it (2 for 2.0), would never fire."""
    values = tmp_path / "budgets.yaml"
    values.write_text(yaml.safe_dump({"prometheusRule": budgets}))
    rule = _rule([*PRODUCTION, values])
    registry = CollectorRegistry()
    TurnMetrics(registry, []).first_token_seconds.observe(1.0)
    RouterMetrics(registry).route_seconds.labels("keyword").observe(0.01)
    exported = set(re.findall(r'^(\w+_bucket)\{.*?le="([^"]+)"', generate_latest(registry).decode(), re.M))
    queried = {
        (metric, le)
        for group in rule["spec"]["groups"]
        for entry in group["rules"]
        if "BudgetBurn" in entry["alert"]
        for metric, le in re.findall(r'(\w+_bucket)\{[^}]*le="([^"]+)"', entry["expr"])
    }
    assert {le for _, le in queried} == buckets | {"+Inf"}
    assert queried <= exported


def test_an_invalid_expression_fails_promtool_check() -> None:
    checked = run_promtool("check", "rules", BROKEN / "invalid-expression.rules.yaml")
    assert checked.returncode != 0
    assert "SSToolsBroken" in checked.stdout + checked.stderr


def test_a_unit_test_expecting_an_alert_the_rules_do_not_fire_fails(
    rule: dict[str, Any], tmp_path: Path
) -> None:
    tested = run_promtool("test", "rules", *_with_rules(rule, tmp_path, [BROKEN / "unfired.test.yaml"]))
    assert tested.returncode != 0
    said = tested.stdout + tested.stderr
    assert "alertname: SSToolsServiceDown, time: 10m" in said
    assert re.search(r"got:\[\]\s*$", said), said  # failed because nothing fired
