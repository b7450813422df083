import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from opentelemetry import trace

import grpc
from sstools.common.routing.router import RouteContext, Router, RouteResult, Source, Tier
from sstools.router.embedding.relate import RelateLimitError, Relater, Relation, check_limits
from sstools.router.telemetry import RouterMetrics
from sstools.router.v1 import router_pb2, router_pb2_grpc

MAX_QUERY_BYTES = 1_000_000
_SOURCES = {
    Source.ALWAYS: router_pb2.MATCH_SOURCE_ALWAYS,
    Source.KEYWORD: router_pb2.MATCH_SOURCE_KEYWORD,
    Source.EMBEDDING: router_pb2.MATCH_SOURCE_EMBEDDING,
}
_TIERS = {Tier.KEYWORD: router_pb2.ROUTE_TIER_KEYWORD, Tier.HYBRID: router_pb2.ROUTE_TIER_HYBRID}


class RouterServicer(router_pb2_grpc.RouterServiceServicer):
    """Thin edge: validates, runs the router on its one inference thread, records metrics."""

    def __init__(self, metrics: RouterMetrics) -> None:
        self._router: Router | None = None
        self._relater: Relater | None = None
        self._metrics = metrics
        # The model runs on one thread (two collapse latency on 2 cores); routing waits its turn
        # there while the event loop stays free for health checks and other calls.
        self._inference = ThreadPoolExecutor(max_workers=1, thread_name_prefix="route")

    async def Route(
        self, request: router_pb2.RouteRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> router_pb2.RouteResponse:
        if self._router is None:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "router is warming up")
        if len(request.query.encode()) > MAX_QUERY_BYTES:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"query longer than {MAX_QUERY_BYTES} bytes"
            )
        route_context = RouteContext(request.context.env_id, request.context.object_type)
        started = time.perf_counter()
        result = await self._route(request.query, request.max_tools, route_context)
        self._metrics.observe(result, time.perf_counter() - started)
        trace.get_current_span().set_attributes(
            {
                "router.tier": result.tier.value,
                "router.tools": len(result.tools),
                "router.degraded": result.degraded,
            }
        )
        return to_proto(result)

    async def Relate(
        self, request: router_pb2.RelateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> router_pb2.RelateResponse:
        if self._router is None:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "router is warming up")
        try:
            check_limits(request.queries, request.labels)
        except RelateLimitError as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        relater = self._relater
        started = time.perf_counter()
        relation = (
            None
            if relater is None
            else await asyncio.get_running_loop().run_in_executor(
                self._inference, relater.relate, list(request.queries), list(request.labels)
            )
        )
        self._metrics.observe_relate(relation, time.perf_counter() - started)
        trace.get_current_span().set_attributes(
            {
                "relate.queries": len(request.queries),
                "relate.labels": len(request.labels),
                "relate.labels_embedded": 0 if relation is None else relation.labels_embedded,
                "router.degraded": relation is None,
            }
        )
        if relation is None:
            return router_pb2.RelateResponse(degraded=True)
        return relation_to_proto(relation)

    async def offered(self, query: str) -> list[str]:
        """The tools Route offers for ``query`` without context, routed the same way; a replay
        of the labelled sample, not traffic, so left out of the routing metrics."""
        return (await self._route(query, 0, RouteContext())).names

    async def _route(self, query: str, max_tools: int, context: RouteContext) -> RouteResult:
        assert self._router is not None
        return await asyncio.get_running_loop().run_in_executor(
            self._inference, self._router.route, query, max_tools, context
        )

    def serve_with(self, router: Router, relater: Relater | None) -> None:
        """Start answering with what start-up built; ``relater`` is None when the model did not load."""
        self._router = router
        self._relater = relater

    async def close(self) -> None:
        await asyncio.to_thread(self._inference.shutdown, wait=True)


def register(server: grpc.aio.Server, servicer: RouterServicer) -> list[str]:
    router_pb2_grpc.add_RouterServiceServicer_to_server(servicer, server)
    return [router_pb2.DESCRIPTOR.services_by_name["RouterService"].full_name]


def to_proto(result: RouteResult) -> router_pb2.RouteResponse:
    return router_pb2.RouteResponse(
        tools=[
            router_pb2.RoutedTool(name=tool.name, source=_SOURCES[tool.source], score=tool.score)
            for tool in result.tools
        ],
        tier=_TIERS[result.tier],
        keyword_ms=result.keyword_ms,
        embedding_ms=result.embedding_ms,
        degraded=result.degraded,
        model=result.model,
        prefetch_dashboards=result.prefetch_dashboards,
        negated=result.negated,
    )


def relation_to_proto(relation: Relation) -> router_pb2.RelateResponse:
    rows, columns = relation.scores.shape
    return router_pb2.RelateResponse(
        scores=relation.scores.ravel().tolist(), rows=rows, columns=columns, model=relation.model
    )
