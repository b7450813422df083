"""Liveness and readiness: one readiness state per process, read by HTTP probes and gRPC health.

``/healthz`` answers 200 while the process can answer at all. ``/readyz`` answers 200 only once
the service is warm (its start-up work done) and every dependency check passes, and goes back to
503 the moment shutdown begins, so a load balancer stops sending before the listeners close.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from fastapi import APIRouter, FastAPI
from fastapi.responses import JSONResponse
from prometheus_client import CollectorRegistry
from starlette.responses import Response

from sstools.common.metrics import metrics_response

ReadinessCheck = Callable[[], Awaitable[None]]
"""A dependency probe: returns when the dependency answers, raises when it does not."""

_log = logging.getLogger(__name__)


@dataclass
class Readiness:
    warm: bool = False
    draining: bool = False
    checks: dict[str, ReadinessCheck] = field(default_factory=dict)
    check_timeout_seconds: float = 2.0

    @property
    def accepting(self) -> bool:
        return self.warm and not self.draining

    async def report(self) -> tuple[bool, dict[str, str]]:
        """Run every dependency check; return whether ready and a status word per part."""
        status: dict[str, str] = {
            "startup": "ok" if self.warm else "warming",
            "shutdown": "draining" if self.draining else "ok",
        }
        for name, check in self.checks.items():
            try:
                await asyncio.wait_for(check(), self.check_timeout_seconds)
                status[name] = "ok"
            except Exception as error:  # noqa: BLE001 — any failure means not ready; say which
                _log.warning("readiness check failed", extra={"check": name, "error": repr(error)})
                status[name] = "failing"
        return self.accepting and all(word == "ok" for word in status.values()), status


def health_router(readiness: Readiness) -> APIRouter:
    """The probe endpoints, for the admin port and for any service's own HTTP app."""
    router = APIRouter()

    @router.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        ready, parts = await readiness.report()
        return JSONResponse({"ready": ready, "checks": parts}, status_code=200 if ready else 503)

    return router


def admin_app(readiness: Readiness, registry: CollectorRegistry) -> FastAPI:
    """The app on the metrics port: probes plus Prometheus exposition."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.include_router(health_router(readiness))

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return metrics_response(registry)

    return app
