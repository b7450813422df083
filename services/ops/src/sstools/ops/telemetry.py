"""Ops' own metrics, on the service's registry: how its calls to each Superset fare, and the
heavy calls counted against people's budgets."""

from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Histogram

# ok: Superset answered below 500, whatever it decided (a 403 or 404 is Superset working);
# http_error: a 5xx, Superset or its gateway failed; unreachable: no answer at all.
Outcome = Literal["ok", "http_error", "unreachable"]


class SupersetMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.request_seconds = Histogram(
            "sstools_ops_superset_request_seconds",
            "Time of one HTTP request to a Superset, by environment and outcome (ok: an answer "
            "below 500; http_error: a 5xx; unreachable: refused, timed out or cut off).",
            ["env", "outcome"],
            # up to OPS_SUPERSET_TIMEOUT_SECONDS' default (30 s) and past it: SQL asks for its own
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
            registry=registry,
        )

    def observe(self, env_id: str, outcome: Outcome, seconds: float) -> None:
        self.request_seconds.labels(env_id, outcome).observe(seconds)


# spent: within the budget, the call runs; over_budget: refused (429), yet counted all the same.
HeavyOutcome = Literal["spent", "over_budget"]


class HeavyReadMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        # By tool, never by person: a label per user would grow with the accounts, and the
        # budget itself is already kept per person in the database.
        self.calls = Counter(
            "sstools_ops_heavy_reads_total",
            "Heavy calls (health checks, SQL statements, database explorations) counted against "
            "their person's budget a minute, by tool and outcome (spent: run; over_budget: refused).",
            ["tool", "outcome"],
            registry=registry,
        )

    def count(self, tool: str, outcome: HeavyOutcome) -> None:
        self.calls.labels(tool, outcome).inc()
