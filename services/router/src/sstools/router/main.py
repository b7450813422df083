"""Router process: gRPC on ``ROUTER_GRPC_PORT``, probes and metrics on ``ROUTER_METRICS_PORT``.

Not ready until the model is loaded and the catalogue embedded; if the model cannot load, it
becomes ready anyway and routes by keywords alone, saying ``degraded`` in every answer. Once
ready it measures its own tool-selection accuracy in the background (:mod:`.accuracy`).
"""

import asyncio

from sstools.common.runtime import Service, service_main
from sstools.router.accuracy import accuracy_loop
from sstools.router.grpc.servicer import RouterServicer, register
from sstools.router.labelled import HOLDOUT, load_cases
from sstools.router.settings import RouterSettings
from sstools.router.telemetry import RouterMetrics
from sstools.router.warmup import build_router


def assemble(settings: RouterSettings, service: Service) -> None:
    metrics = RouterMetrics(service.registry)
    servicer = RouterServicer(metrics)

    async def warm_up() -> None:
        built = await asyncio.to_thread(build_router, settings)
        metrics.record_model(built.load_seconds)
        servicer.serve_with(built.router, built.relater)

    service.add_grpc(
        settings.grpc_port, lambda server: register(server, servicer), callers=settings.grpc_callers()
    )
    service.add_warmup(warm_up)
    sample = load_cases(HOLDOUT)
    service.add_background(
        lambda: accuracy_loop(sample, servicer.offered, metrics, settings.accuracy_interval_seconds)
    )
    service.add_cleanup(servicer.close)


def main() -> None:
    service_main(RouterSettings, assemble)
