"""The router's command line (in process and through a running server) and its evaluation."""

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.routing.router import Router
from sstools.devstack.keys import PUBLIC_KEYS, service_token
from sstools.devstack.testing import started_service
from sstools.router.cli import run, through_server
from sstools.router.eval import evaluate, main
from sstools.router.labelled import HOLDOUT, TUNING, Case, load_cases, tool_examples
from sstools.router.main import assemble
from sstools.router.settings import RouterSettings


def test_cli_routes_json_lines_in_process() -> None:
    lines = '{"q": "покажи окружения"}\n{"q": "не делай бэкап"}\n'
    result = subprocess.run(
        [sys.executable, "-m", "sstools.router", "route"],
        input=lines,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    first, second = (json.loads(line) for line in result.stdout.splitlines())
    assert first["q"] == "покажи окружения"
    assert first["tools"][0] == "list_environments"
    assert first["tier"] in ("keyword", "hybrid")
    assert first["ms"] >= 0
    assert "run_backup" not in second["tools"]


async def test_cli_routes_through_a_running_server(tracer_provider: TracerProvider) -> None:
    settings = RouterSettings(grpc_port=0, metrics_port=0, jwt_public_keys=PUBLIC_KEYS)
    async with started_service(settings, assemble, tracer_provider) as service:
        output = io.StringIO()
        route = through_server(f"127.0.0.1:{service.ports['grpc']}", service_token())
        lines = ['{"q": "deploy dashboard 42 to prod"}', "", "not json", '{"q": 5}']
        failures = await asyncio.to_thread(run, lines, route, output)
    answers = [json.loads(line) for line in output.getvalue().splitlines()]
    assert failures == 2
    assert len(answers) == 3  # the empty line is skipped, not answered
    assert answers[0]["q"] == "deploy dashboard 42 to prod"
    assert "deploy_dashboard" in answers[0]["tools"]
    # each bad line is answered with its number and why, and the lines after it are still read
    assert answers[1:] == [
        {"line": 3, "error": "bad input line: JSONDecodeError('Expecting value: line 1 column 1 (char 0)')"},
        {"line": 4, "error": "bad input line: TypeError('q must be a string')"},
    ]


def test_evaluate_counts_recall_tools_and_forbidden() -> None:
    cases = [
        Case("a", "en", "plain", frozenset({"run_backup"}), frozenset()),
        Case("b", "ru", "negation", frozenset({"list_environments"}), frozenset({"run_backup"})),
        Case("c", "ru", "two_intent", frozenset({"run_backup", "deploy_dashboard"}), frozenset()),
    ]
    offered = {"a": ["run_backup"], "b": ["list_environments", "run_backup"], "c": ["run_backup"]}
    report = evaluate(cases, lambda query: offered[query])
    assert report["overall"]["recall"] == 0.75
    assert report["overall"]["case_recall"] == round(2 / 3, 4)
    assert report["overall"]["mean_tools_offered"] == round(4 / 3, 2)
    assert report["overall"]["forbidden_offered"] == 1
    assert report["by_lang"]["en"]["recall"] == 1.0
    assert report["misses"] == [{"q": "c", "missing": ["deploy_dashboard"], "offered": ["run_backup"]}]


def test_tuning_set_meets_the_routing_targets(router: Router) -> None:
    cases = load_cases(TUNING)
    assert len(cases) >= 150
    report = evaluate(cases, lambda query: router.route(query).names)
    overall = report["overall"]
    assert overall["recall"] >= 0.97, report["misses"]
    assert all(report["by_lang"][lang]["recall"] >= 0.95 for lang in ("ru", "en")), report["by_lang"]
    assert overall["mean_tools_offered"] <= 7
    assert overall["schema_token_reduction"] >= 0.70


def test_holdout_set_the_router_never_reads_meets_the_floor(router: Router) -> None:
    """SC-001 on requests the router was not tuned on: every needed tool offered in 95 % of cases,
    overall and in each language, with no more tools offered than the tuning set allows and at
    most one negated tool offered."""
    cases = load_cases(HOLDOUT)
    assert len(cases) >= 80
    tuned_on = {case.query.casefold() for case in load_cases(TUNING)}
    assert not [case.query for case in cases if case.query.casefold() in tuned_on]  # apart, really
    report = evaluate(cases, lambda query: router.route(query).names)
    assert report["overall"]["case_recall"] >= 0.95, report["misses"]
    assert all(report["by_lang"][lang]["case_recall"] >= 0.95 for lang in ("ru", "en")), report["by_lang"]
    assert report["overall"]["mean_tools_offered"] <= 7
    assert report["overall"]["forbidden_offered"] <= 1, report["forbidden_hits"]


def test_a_tools_examples_are_the_tuning_requests_that_need_it_alone() -> None:
    cases = [
        Case("back it up", "en", "plain", frozenset({"run_backup"}), frozenset()),
        Case(
            "back up, don't deploy",
            "en",
            "negation",
            frozenset({"run_backup"}),
            frozenset({"deploy_dashboard"}),
        ),
        Case(
            "back up and deploy",
            "en",
            "two_intent",
            frozenset({"run_backup", "deploy_dashboard"}),
            frozenset(),
        ),
        Case("сделай бэкап", "ru", "plain", frozenset({"run_backup"}), frozenset()),
    ]
    assert tool_examples(cases) == {"run_backup": ("back it up", "сделай бэкап")}
    examples = tool_examples(load_cases(TUNING))
    assert len(examples) >= 20  # nearly every tool has requests of its own to be found by


def test_eval_takes_a_set_by_name_or_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    own = tmp_path / "own.jsonl"
    own.write_text(
        '{"q": "покажи окружения", "lang": "ru", "kind": "plain", "needed": ["list_environments"]}\n'
    )
    main([str(own), "--no-misses"])
    assert json.loads(capsys.readouterr().out)["overall"]["cases"] == 1
    main(["--no-misses"])
    assert json.loads(capsys.readouterr().out)["overall"]["cases"] == len(load_cases(HOLDOUT))
