"""LLM providers, their status, and the two LLM tasks on a dashboard: validation (a report,
stored with the task) and documentation (chart descriptions written into Superset).

The checks that need no model — failing queries, missing descriptions, unpublished or
ownerless dashboards — always run; a configured OpenAI-compatible endpoint adds its review
and writes the descriptions. Without one, the built-in offline provider describes each chart
from its own definition (viz type, metric, grouping, dataset), deterministically.
"""

import json
import time
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel

from sstools.common.metrics import GenAiClientMetrics
from sstools.ops.errors import OperationError
from sstools.ops.superset import dashboards, health
from sstools.ops.superset.client import SupersetClient
from sstools.ops.tasks import Report

OFFLINE = "offline"


class LlmUnavailable(OperationError):
    status = 503
    code = "llm_unavailable"


class Provider(BaseModel):
    id: str
    kind: str  # openai-compatible | offline
    model: str
    base_url: str | None
    default: bool


class ProviderStatus(BaseModel):
    id: str
    reachable: bool
    model: str
    model_listed: bool | None
    latency_ms: float | None
    error: str | None

    @property
    def error_kind(self) -> str | None:
        """The error without its detail (which may name the endpoint's address)."""
        return None if self.error is None else self.error.split("(", 1)[0]


@dataclass(frozen=True)
class LlmEndpoint:
    base_url: str
    api_key: str
    model: str
    timeout_seconds: float
    metrics: GenAiClientMetrics
    max_tokens: int
    temperature: float
    stop: tuple[str, ...] = ()

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def providers(self) -> list[Provider]:
        offline = Provider(
            id=OFFLINE, kind="offline", model="sstools-offline-rules", base_url=None, default=True
        )
        if not self.configured:
            return [offline]
        configured = Provider(
            id="default", kind="openai-compatible", model=self.model, base_url=self.base_url, default=True
        )
        return [configured, offline.model_copy(update={"default": False})]

    async def status(self) -> ProviderStatus:
        if not self.configured:
            return ProviderStatus(
                id=OFFLINE,
                reachable=True,
                model="sstools-offline-rules",
                model_listed=None,
                latency_ms=0.0,
                error=None,
            )
        started = time.perf_counter()
        try:
            async with httpx.AsyncClient(timeout=min(self.timeout_seconds, 10.0)) as http:
                response = await http.get(f"{self.base_url.rstrip('/')}/models", headers=self._headers())
                response.raise_for_status()
                listed = {item.get("id") for item in response.json().get("data", [])}
        except (httpx.HTTPError, ValueError, AttributeError) as error:
            return ProviderStatus(
                id="default",
                reachable=False,
                model=self.model,
                model_listed=None,
                latency_ms=None,
                error=repr(error)[:300],
            )
        latency = (time.perf_counter() - started) * 1000
        return ProviderStatus(
            id="default",
            reachable=True,
            model=self.model,
            model_listed=self.model in listed,
            latency_ms=latency,
            error=None,
        )

    async def complete(self, system: str, user: str) -> str:
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "max_completion_tokens": self.max_tokens,
            **({"stop": list(self.stop)} if self.stop else {}),
        }
        try:
            with self.metrics.chat(self.model) as usage:
                async with httpx.AsyncClient(timeout=self.timeout_seconds) as http:
                    response = await http.post(
                        f"{self.base_url.rstrip('/')}/chat/completions", json=body, headers=self._headers()
                    )
                    response.raise_for_status()
                answer = response.json()
                text = str(answer["choices"][0]["message"]["content"]).strip()
                if isinstance(counted := answer.get("usage"), dict):  # servers may leave it out
                    usage.input, usage.output = counted.get("prompt_tokens"), counted.get("completion_tokens")
                return text
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as error:
            raise LlmUnavailable(f"the LLM at {self.base_url} failed: {error!r}"[:500]) from None


def _describe(chart: dict[str, Any]) -> str:
    """The offline description: what the chart's own definition says it shows."""
    form = chart.get("form_data") or {}
    metrics = form.get("metrics") or ([form["metric"]] if form.get("metric") else [])
    labels = [str(metric.get("label")) if isinstance(metric, dict) else str(metric) for metric in metrics]
    groupby = form.get("groupby") or []
    shown = ", ".join(labels) or "rows"
    text = f"{chart.get('slice_name', 'Chart')}: {form.get('viz_type', 'chart')} of {shown}"
    if groupby:
        text += f" by {', '.join(map(str, groupby))}"
    return text + "."


async def _facts(
    client: SupersetClient, dashboard_id: int
) -> tuple[dict[str, Any], list[dict[str, Any]], health.HealthSummary]:
    dashboard = await dashboards.get(client, dashboard_id)
    charts = await dashboards.charts(client, dashboard_id)
    summary = await health.summary(client, [dashboard_id])
    return dashboard, charts, summary


def _findings(
    dashboard: dict[str, Any], charts: list[dict[str, Any]], summary: health.HealthSummary
) -> list[dict[str, Any]]:
    findings: list[dict[str, Any]] = [
        {
            "severity": "error",
            "chart_id": problem.chart_id,
            "message": f"{problem.chart_name}: query fails: {problem.error}",
        }
        for problem in summary.broken_charts
    ]
    if not charts:
        findings.append({"severity": "warning", "chart_id": None, "message": "the dashboard has no charts"})
    if not dashboard.get("published"):
        findings.append(
            {"severity": "info", "chart_id": None, "message": "the dashboard is a draft (not published)"}
        )
    if not dashboard.get("owners"):
        findings.append({"severity": "warning", "chart_id": None, "message": "the dashboard has no owners"})
    findings += [
        {"severity": "info", "chart_id": chart["id"], "message": f"{chart['slice_name']}: no description"}
        for chart in charts
        if not chart.get("description")
    ]
    return findings


async def validate(
    endpoint: LlmEndpoint, client: SupersetClient, dashboard_id: int, report: Report
) -> dict[str, Any]:
    dashboard, charts, summary = await _facts(client, dashboard_id)
    await report(50)
    findings = _findings(dashboard, charts, summary)
    review = None
    if endpoint.configured:
        review = await endpoint.complete(
            "You review Apache Superset dashboards. Answer with a short list of concrete problems and fixes.",
            json.dumps(
                {
                    "dashboard": dashboard.get("dashboard_title"),
                    "charts": [{"name": c["slice_name"], "definition": c.get("form_data")} for c in charts],
                    "findings": findings,
                },
                ensure_ascii=False,
                default=str,
            ),
        )
    errors = sum(1 for finding in findings if finding["severity"] == "error")
    return {
        "env_id": client.env_id,
        "dashboard_id": dashboard_id,
        "title": dashboard.get("dashboard_title"),
        "valid": errors == 0,
        "errors": errors,
        "findings": findings,
        "llm_review": review,
        "provider": "default" if endpoint.configured else OFFLINE,
    }


async def document(
    endpoint: LlmEndpoint, client: SupersetClient, dashboard_id: int, report: Report
) -> dict[str, Any]:
    charts = await dashboards.charts(client, dashboard_id)
    written = []
    for index, chart in enumerate(charts):
        if endpoint.configured:
            description = await endpoint.complete(
                "Write a one-sentence description of this Superset chart for its viewers. Plain text only.",
                json.dumps({"name": chart["slice_name"], "definition": chart.get("form_data")}, default=str),
            )
        else:
            description = _describe(chart)
        await client.put(f"/api/v1/chart/{chart['id']}", {"description": description[:2000]})
        written.append({"chart_id": chart["id"], "description": description[:2000]})
        await report(int(100 * (index + 1) / max(len(charts), 1)))
    return {
        "env_id": client.env_id,
        "dashboard_id": dashboard_id,
        "charts_documented": written,
        "provider": "default" if endpoint.configured else OFFLINE,
    }
