"""The router's own metrics, on the service's registry."""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sstools.common.routing.router import RouteResult
from sstools.router.embedding.relate import Relation


class RouterMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.route_seconds = Histogram(
            "sstools_router_route_seconds",
            "Time to route one message, by the tiers that answered.",
            ["tier"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.25, 1.0),
            registry=registry,
        )
        self.fallbacks = Counter(
            "sstools_router_embedding_fallbacks_total",
            "Messages the embedding tier ran for (every one by default; see ROUTER_FALLBACK_BELOW).",
            registry=registry,
        )
        self.degraded_routes = Counter(
            "sstools_router_degraded_routes_total",
            "Messages routed by keywords alone because the embedding model is unavailable.",
            registry=registry,
        )
        self.tools_returned = Histogram(
            "sstools_router_tools_returned",
            "Tools offered per message.",
            buckets=(1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 24),
            registry=registry,
        )
        self.relate_seconds = Histogram(
            "sstools_router_relate_seconds",
            "Time to relate one message's phrases to a schema's names (Relate).",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=registry,
        )
        self.relate_labels = Counter(
            "sstools_router_relate_labels_total",
            "Distinct schema names Relate scored: their vectors kept (hit) or embedded (miss).",
            ["cache"],
            registry=registry,
        )
        self.degraded_relates = Counter(
            "sstools_router_degraded_relates_total",
            "Relate calls answered without scores because the embedding model is unavailable.",
            registry=registry,
        )
        self.model_load_seconds = Gauge(
            "sstools_router_model_load_seconds",
            "Time to load the embedding model and embed the catalogue at start.",
            registry=registry,
        )
        self.model_available = Gauge(
            "sstools_router_model_available",
            "1 when the embedding model is loaded, 0 when the router runs keyword-only.",
            registry=registry,
        )
        self.model_load_failures = Counter(
            "sstools_router_model_load_failures_total",
            "Start-ups at which the embedding model could not be loaded.",
            registry=registry,
        )
        self.tool_selection_accuracy = Gauge(
            "sstools_router_tool_selection_accuracy",
            "Share of the packaged labelled sample's cases whose needed tools were all offered, at the "
            "last replay (SC-001).",
            registry=registry,
        )
        self.tool_selection_cases = Gauge(
            "sstools_router_tool_selection_cases",
            "Cases of the labelled sample the last accuracy replay routed.",
            registry=registry,
        )
        self.tool_selection_checked = Gauge(
            "sstools_router_tool_selection_checked_timestamp_seconds",
            "When the last accuracy replay ended (Unix time).",
            registry=registry,
        )

    def record_accuracy(self, accuracy: float, cases: int) -> None:
        self.tool_selection_accuracy.set(accuracy)
        self.tool_selection_cases.set(cases)
        self.tool_selection_checked.set_to_current_time()

    def record_model(self, load_seconds: float | None) -> None:
        """What start-up found: the model's load time, or that it could not be loaded."""
        self.model_available.set(0 if load_seconds is None else 1)
        if load_seconds is None:
            self.model_load_failures.inc()
        else:
            self.model_load_seconds.set(load_seconds)

    def observe(self, result: RouteResult, seconds: float) -> None:
        self.route_seconds.labels(result.tier.value).observe(seconds)
        self.tools_returned.observe(len(result.tools))
        if result.tier == "hybrid":
            self.fallbacks.inc()
        if result.degraded:
            self.degraded_routes.inc()

    def observe_relate(self, relation: Relation | None, seconds: float) -> None:
        """A Relate call's answer, None when degraded."""
        self.relate_seconds.observe(seconds)
        if relation is None:
            self.degraded_relates.inc()
            return
        self.relate_labels.labels("hit").inc(relation.labels_kept)
        self.relate_labels.labels("miss").inc(relation.labels_embedded)
