"""Health of an environment's dashboards: which charts' data queries fail, and where they sit.

Each chart's saved query is asked for as Superset answers a person who opens it: from its cache
where it has the result (a query that failed is not cached, so a broken chart shows as broken).
``force`` re-runs every query past the cache — a success cached before a table went is then
found too — at the cost of the whole environment's chart load on its databases, so ops lets only
operators ask for it. Charts are checked a few at a time, so a large environment does not swamp
Superset with queries. A check of some dashboards first finds each of them as the person: one
that is not there (or that Superset hides from them) is Superset's "not found", never a check of
nothing that passed.
"""

import asyncio
from typing import Any

from pydantic import BaseModel

from sstools.ops.store.tasks import Task
from sstools.ops.superset import dashboards
from sstools.ops.superset.client import SupersetClient, SupersetError, SupersetNotFound, SupersetUnavailable

CONCURRENCY = 4


class ChartProblem(BaseModel):
    chart_id: int
    chart_name: str
    error: str
    dashboards: list[int]


class DashboardHealth(BaseModel):
    dashboard_id: int
    title: str
    broken_charts: list[int]


class DashboardName(BaseModel):
    dashboard_id: int
    title: str


class HealthSummary(BaseModel):
    env_id: str
    charts_checked: int
    broken_charts: list[ChartProblem]
    dashboards_with_problems: list[DashboardHealth]
    dashboards_checked: int
    # the dashboards asked about, by name, when the check was of some only (an answer names them)
    only: list[DashboardName] = []
    # those of them that have no charts: nothing of theirs was checked
    unchecked: list[DashboardName] = []


class ValidationRun(BaseModel):
    task_id: str
    dashboard_id: int | None
    status: str
    valid: bool | None
    errors: int | None
    at: str

    @classmethod
    def of(cls, task: Task) -> "ValidationRun":
        result = task.result or {}
        return cls(
            task_id=str(task.id),
            dashboard_id=task.params.get("dashboard_id"),
            status=task.status.value,
            valid=result.get("valid"),
            errors=result.get("errors"),
            at=task.updated_at.isoformat(),
        )


class HealthReport(HealthSummary):
    """What get_health_summary answers: the summary, and the latest validation runs."""

    last_validations: list[ValidationRun]


async def _all_charts(client: SupersetClient, dashboard_ids: list[int] | None) -> list[dict[str, Any]]:
    charts: list[dict[str, Any]] = []
    page = 0
    columns = ["id", "slice_name", "dashboards.id", "dashboards.dashboard_title"]
    while True:
        listing = await client.get("/api/v1/chart/", q={"columns": columns, "page": page, "page_size": 100})
        batch = listing.get("result", [])
        charts += batch
        if len(batch) < 100:
            break
        page += 1
    if dashboard_ids is not None:
        wanted = set(dashboard_ids)
        charts = [
            chart for chart in charts if wanted & {board["id"] for board in chart.get("dashboards", [])}
        ]
    return charts


async def _failure(
    client: SupersetClient, chart_id: int, gate: asyncio.Semaphore, *, force: bool
) -> str | None:
    async with gate:
        try:
            result = await client.get(
                f"/api/v1/chart/{chart_id}/data/", params={"force": "true" if force else "false"}
            )
        except SupersetUnavailable:
            raise  # Superset itself is down: that is not a broken chart
        except SupersetError as error:
            return error.message
    errors = [query.get("error") for query in result.get("result", []) if query.get("error")]
    return "; ".join(map(str, errors)) or None


async def summary(
    client: SupersetClient, dashboard_ids: list[int] | None = None, *, force: bool = False
) -> HealthSummary:
    named: dict[int, str] = {}
    if dashboard_ids is not None:
        named = await dashboards.titles(client, dashboard_ids)
        if missing := [str(board) for board in dashboard_ids if board not in named]:
            raise SupersetNotFound(
                client.env_id, f"no dashboard {', '.join(missing)} in {client.env_id} (or you may not see it)"
            )
    charts = await _all_charts(client, dashboard_ids)
    gate = asyncio.Semaphore(CONCURRENCY)
    failures = await asyncio.gather(
        *(_failure(client, int(chart["id"]), gate, force=force) for chart in charts)
    )
    problems: list[ChartProblem] = []
    boards: dict[int, DashboardHealth] = {}
    titles = {
        board["id"]: board["dashboard_title"] for chart in charts for board in chart.get("dashboards", [])
    }
    for chart, failure in zip(charts, failures, strict=True):
        if failure is None:
            continue
        holders = [int(board["id"]) for board in chart.get("dashboards", [])]
        problems.append(
            ChartProblem(
                chart_id=chart["id"], chart_name=chart["slice_name"], error=failure, dashboards=holders
            )
        )
        for board_id in holders:
            health = boards.setdefault(
                board_id, DashboardHealth(dashboard_id=board_id, title=titles[board_id], broken_charts=[])
            )
            health.broken_charts.append(int(chart["id"]))
    return HealthSummary(
        env_id=client.env_id,
        charts_checked=len(charts),
        broken_charts=problems,
        dashboards_with_problems=sorted(boards.values(), key=lambda board: board.dashboard_id),
        dashboards_checked=len(titles),
        only=[DashboardName(dashboard_id=board, title=title) for board, title in named.items()],
        unchecked=[
            DashboardName(dashboard_id=board, title=title)
            for board, title in named.items()
            if board not in titles
        ],
    )
