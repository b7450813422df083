"""Which tools a message needs: the router service, or — when it cannot be reached in time —
the same keyword tier in process, so a turn never waits on a router that is down. And how near a
message's phrases are to a schema's names, by the router's model (the one process holding it)."""

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import grpc
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.grpc_auth import ServiceTokenSource
from sstools.common.grpc_client import LazyChannel
from sstools.common.routing.keywords import KeywordIndex
from sstools.common.routing.router import RouteContext, Router
from sstools.router.v1 import router_pb2, router_pb2_grpc

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Routing:
    tools: list[str]
    tier: str  # keyword | hybrid | local-keyword
    degraded: bool
    prefetch_dashboards: bool = False
    negated: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Relations:
    """Cosine similarity of each query to each label, ``rows[query][label]``."""

    rows: tuple[tuple[float, ...], ...]
    model: str

    def score(self, query_index: int, label_index: int) -> float:
        return self.rows[query_index][label_index]


class ToolRouter:
    def __init__(
        self, target: str, timeout_seconds: float, tracer_provider: TracerProvider, tokens: ServiceTokenSource
    ) -> None:
        self._channel = LazyChannel(target, tracer_provider, tokens)  # replicas balanced by the client
        self._timeout = timeout_seconds
        self._local = Router(KeywordIndex(), None)

    def _stub(self) -> "router_pb2_grpc.RouterServiceAsyncStub":  # a name of the .pyi alone
        return router_pb2_grpc.RouterServiceStub(self._channel.get())

    async def close(self) -> None:
        await self._channel.close()

    async def ask(self, text: str, env_id: str | None, object_type: str | None) -> Routing:
        """The router service's answer; its failure is raised (``grpc.aio.AioRpcError``)."""
        request = router_pb2.RouteRequest(
            query=text, context=router_pb2.RouteContext(env_id=env_id or "", object_type=object_type or "")
        )
        reply = await self._stub().Route(request, timeout=self._timeout)
        tier = "hybrid" if reply.tier == router_pb2.ROUTE_TIER_HYBRID else "keyword"
        return Routing(
            [tool.name for tool in reply.tools],
            tier,
            reply.degraded,
            reply.prefetch_dashboards,
            list(reply.negated),
        )

    async def route(self, text: str, env_id: str | None, object_type: str | None) -> Routing:
        """The router service's answer or, when it fails, the keyword tier's in process."""
        try:
            return await self.ask(text, env_id, object_type)
        except grpc.aio.AioRpcError as error:
            _log.warning("router unavailable, keyword tier in process", extra={"code": error.code().name})
            local = self._local.route(text, context=RouteContext(env_id or "", object_type or ""))
            return Routing(
                [tool.name for tool in local.tools],
                "local-keyword",
                True,
                local.prefetch_dashboards,
                list(local.negated),
            )

    async def relate(
        self, queries: Sequence[str], labels: Sequence[str], wait_seconds: float | None = None
    ) -> Relations | None:
        """The router model's similarities; None when it has no model or cannot be reached in time,
        so the planner matches by spelling alone. At most 64 queries and 512 labels of 200
        characters each (the router's bounds: beyond them, None too, and a warning logged). A
        schema's names the router has not seen cost it a few hundred milliseconds: ``timeout``
        allows for them (``wait_seconds``)."""
        request = router_pb2.RelateRequest(queries=list(queries), labels=list(labels))
        try:
            reply = await self._stub().Relate(request, timeout=wait_seconds or self._timeout)
        except grpc.aio.AioRpcError as error:
            _log.warning(
                "router cannot relate, spelling alone",
                extra={"code": error.code().name, "details": error.details()},
            )
            return None
        if reply.degraded:
            return None
        columns = reply.columns
        rows = tuple(tuple(reply.scores[row * columns : (row + 1) * columns]) for row in range(reply.rows))
        return Relations(rows, reply.model)
