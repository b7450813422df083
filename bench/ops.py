"""Ops' overhead over Superset: dashboard search and the health summary, p50/p99 through ops
(dual-identity JWTs, RBAC, audit row, typed client) beside the same Superset calls made directly
with a bearer token, alternating in one run against the same local Superset.

    .venv/bin/python bench/ops.py [--requests 100] [--health-requests 20]

Starts real Superset (dev seeded, prod empty; installed into .data/superset on first use), a
PostgreSQL database (DATABASE_URL or an embedded server) and `sstools-ops` as a process.
"""

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from stats import percentiles

from sstools.devstack.demo import PASSWORD_ENV, environments, local_supersets
from sstools.devstack.keys import PRIVATE_KEY, PUBLIC_KEYS
from sstools.devstack.paths import DATA_DIR
from sstools.devstack.postgres import database_url
from sstools.devstack.superset import default_home
from sstools.devstack.testing import free_port, scratch_database, service_process
from sstools.ops.store import MIGRATIONS
from sstools.ops.superset.client import rison

ADMIN_PASSWORD = "bench-admin-password"
AGENT_SECRET = "bench-agent-secret-0123"
SEARCH = {
    "filters": [{"col": "dashboard_title", "opr": "title_or_slug", "value": "sales"}],
    "columns": ["id", "dashboard_title", "slug", "url", "published", "changed_on_utc", "owners.first_name"],
    "page": 0,
    "page_size": 25,
}


async def alternate(
    through_ops: Callable[[], Awaitable[None]], direct: Callable[[], Awaitable[None]], requests: int
) -> dict[str, Any]:
    """Both paths in turn, so that drift on a noisy machine hits them alike."""
    await through_ops()
    await direct()  # warm both
    samples: dict[str, list[float]] = {"ops": [], "direct": []}
    for _ in range(requests):
        for name, call in (("ops", through_ops), ("direct", direct)):
            started = time.perf_counter()
            await call()
            samples[name].append((time.perf_counter() - started) * 1000)
    ops, superset = percentiles(samples["ops"]), percentiles(samples["direct"])
    return {
        "through_ops": ops,
        "superset_direct": superset,
        "overhead_ratio_p50": round(ops["p50_ms"] / superset["p50_ms"], 2),
        "overhead_p50_ms": round(ops["p50_ms"] - superset["p50_ms"], 2),
    }


async def direct_health(superset: httpx.AsyncClient) -> None:
    """What the health summary asks Superset: every chart, then each chart's query, four at a time."""
    columns = ["id", "slice_name", "dashboards.id", "dashboards.dashboard_title"]
    charts = (
        await superset.get("/api/v1/chart/", params={"q": rison({"columns": columns, "page_size": 100})})
    ).json()
    gate = asyncio.Semaphore(4)

    async def run(chart_id: int) -> None:
        async with gate:
            await superset.get(f"/api/v1/chart/{chart_id}/data/", params={"force": "true"})

    await asyncio.gather(*(run(chart["id"]) for chart in charts["result"]))


async def measure(ops_url: str, superset_url: str, requests: int, health_requests: int) -> dict[str, Any]:
    async with (
        httpx.AsyncClient(base_url=ops_url, timeout=60) as ops,
        httpx.AsyncClient(base_url=superset_url, timeout=60) as superset,
    ):
        user = (
            await ops.post("/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
        ).json()
        agent = (
            await ops.post(
                "/api/auth/service-token", json={"client_id": "agent", "client_secret": AGENT_SECRET}
            )
        ).json()
        ops.headers.update(
            {
                "Authorization": f"Bearer {agent['access_token']}",
                "X-User-Authorization": f"Bearer {user['access_token']}",
            }
        )
        login = {"username": "admin", "password": os.environ[PASSWORD_ENV], "provider": "db"}
        token = (await superset.post("/api/v1/security/login", json=login)).json()["access_token"]
        superset.headers["Authorization"] = f"Bearer {token}"

        async def search_ops() -> None:
            (await ops.get("/api/envs/dev/dashboards", params={"query": "sales"})).raise_for_status()

        async def search_direct() -> None:
            (await superset.get("/api/v1/dashboard/", params={"q": rison(SEARCH)})).raise_for_status()

        async def health_ops() -> None:
            (await ops.get("/api/envs/dev/health")).raise_for_status()

        return {
            "dashboard_search": await alternate(search_ops, search_direct, requests),
            "health_summary": await alternate(health_ops, lambda: direct_health(superset), health_requests),
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--health-requests", type=int, default=20)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="bench-ops-") as folder,
        local_supersets(default_home(), Path(folder), {"dev": free_port(), "prod": free_port()}) as instances,
        database_url(DATA_DIR / "pg-bench") as server_url,
        scratch_database(server_url) as url,
    ):
        MIGRATIONS.upgrade(url)
        http_port, metrics_port = free_port(), free_port()
        env = {
            "DATABASE_URL": url,
            "JWT_PRIVATE_KEY": PRIVATE_KEY,
            "JWT_PUBLIC_KEYS": PUBLIC_KEYS,
            "CONFIRMATION_SECRET": "bench-confirmations-" + "c" * 40,
            "LOG_LEVEL": "WARNING",
            "ENVIRONMENTS": environments(instances, PASSWORD_ENV),
            "OPS_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "OPS_SERVICE_CLIENTS": f"agent:{AGENT_SECRET}",
            "OPS_HTTP_PORT": str(http_port),
            "OPS_METRICS_PORT": str(metrics_port),
            "OPS_BACKUP_DIR": str(Path(folder) / "backups"),
            "OPS_GIT_REPO": str(Path(folder) / "exports"),
        }
        with service_process("ops", env, metrics_port):
            time.sleep(1)  # the admin is created in the background right after readiness
            results = asyncio.run(
                measure(
                    f"http://127.0.0.1:{http_port}", instances["dev"].url, args.requests, args.health_requests
                )
            )
    print(
        json.dumps(
            {"benchmark": "ops", "baseline": "the same Superset calls made directly", **results}, indent=2
        )
    )


if __name__ == "__main__":
    main()
