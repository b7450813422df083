"""`make run`'s Prometheus, where one is installed (Debian's `prometheus` package): it scrapes
every service of the stack, its configuration made from the same list of services the supervisor
runs; and the Grafana board's expressions, evaluated through its HTTP API as Grafana would.

The board is the chart's (helm/sstools-agent/files/grafana-dashboard.json): what a person sees
in a cluster is what a test here asks Prometheus for."""

import json
import math
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from sstools.devstack.paths import REPO_ROOT

PROMETHEUS_PORT = 9090  # SSTOOLS_PROMETHEUS_PORT
BOARD = REPO_ROOT / "helm" / "sstools-agent" / "files" / "grafana-dashboard.json"
SWITCH = "SSTOOLS_PROMETHEUS"  # "off": no local Prometheus even where one is installed
SCRAPE_SECONDS = 5
RETENTION = "2d"


@dataclass(frozen=True)
class LocalPrometheus:
    """Where the stack's Prometheus listens, and how it is started."""

    name: str
    host: str
    ports: Mapping[str, int]
    command: str

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.ports['http_port']}"

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False


def scrape_configuration(targets: Mapping[str, str]) -> dict[str, Any]:
    """One job per service (its name → its metrics' host:port), named as the service: the board
    sums ``by (job)``."""
    return {
        "global": {"scrape_interval": f"{SCRAPE_SECONDS}s", "evaluation_interval": f"{SCRAPE_SECONDS}s"},
        "scrape_configs": [
            {"job_name": name, "static_configs": [{"targets": [target]}]} for name, target in targets.items()
        ],
    }


def local_prometheus(
    environment: Mapping[str, str], folder: Path, targets: Mapping[str, str]
) -> LocalPrometheus | None:
    """The stack's Prometheus, its configuration written to ``folder``; None where none is
    installed or ``SSTOOLS_PROMETHEUS=off``."""
    binary = shutil.which("prometheus")
    if binary is None or environment.get(SWITCH) == "off":
        return None
    folder.mkdir(parents=True, exist_ok=True)
    configuration = folder / "prometheus.yml"
    configuration.write_text(yaml.safe_dump(scrape_configuration(targets)))
    port = int(environment.get("SSTOOLS_PROMETHEUS_PORT", PROMETHEUS_PORT))
    command = (
        f"exec {binary} --config.file={configuration} --storage.tsdb.path={folder / 'data'}"
        f" --storage.tsdb.retention.time={RETENTION} --web.listen-address=127.0.0.1:{port}"
    )
    return LocalPrometheus("prometheus", "127.0.0.1", {"http_port": port}, command)


@dataclass(frozen=True)
class BoardQuery:
    panel: str
    legend: str
    expr: str


def board_queries(board_file: Path = BOARD) -> list[BoardQuery]:
    """Every query of every panel of the board."""
    board = json.loads(board_file.read_text())
    return [
        BoardQuery(panel["title"], target.get("legendFormat", target["refId"]), target["expr"])
        for panel in board["panels"]
        for target in panel.get("targets", [])
    ]


def as_grafana_sends(expr: str, window_seconds: int) -> str:
    """``expr`` with the board's variables as Grafana fills them: every namespace, and rate and
    range windows that span ``window_seconds``."""
    window = f"{window_seconds}s"
    return expr.replace("$__rate_interval", window).replace("$__range", window).replace("$namespace", ".*")


@dataclass(frozen=True)
class Evaluated:
    query: BoardQuery
    error: str | None
    values: list[float]

    @property
    def shows_something(self) -> bool:
        return self.error is None and any(math.isfinite(value) for value in self.values)


def evaluate(prometheus_url: str, queries: Sequence[BoardQuery], window_seconds: int) -> list[Evaluated]:
    """Each query as an instant query now: Prometheus' error, or the values it returned."""
    results = []
    for query in queries:
        answer = httpx.get(
            f"{prometheus_url}/api/v1/query",
            params={"query": as_grafana_sends(query.expr, window_seconds), "time": time.time()},
            timeout=30,
        ).json()
        if answer["status"] != "success":
            results.append(Evaluated(query, f"{answer.get('errorType')}: {answer.get('error')}", []))
            continue
        data = answer["data"]
        samples = data["result"] if data["resultType"] == "vector" else [{"value": data["result"]}]
        results.append(Evaluated(query, None, [float(sample["value"][1]) for sample in samples]))
    return results


def board_problems(evaluated: Sequence[Evaluated], may_show_nothing: Mapping[str, str]) -> list[str]:
    """What a person would find wrong on the board: a query Prometheus refuses, or one that shows
    nothing although it should. ``may_show_nothing``: ``"<panel> / <legend>"`` → why that query
    may be empty after a healthy run (e.g. a count of failures that did not happen)."""
    names = {f"{result.query.panel} / {result.query.legend}" for result in evaluated}
    problems = [
        f"{name}: listed as allowed to show nothing but not on the board"
        for name in may_show_nothing
        if name not in names
    ]
    for result in evaluated:
        name = f"{result.query.panel} / {result.query.legend}"
        if result.error is not None:
            problems.append(f"{name}: {result.error}")
        elif not result.shows_something and name not in may_show_nothing:
            problems.append(f"{name}: shows nothing ({result.query.expr})")
    return problems
