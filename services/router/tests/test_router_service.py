"""The router as its process serves it: gRPC Route, readiness after warm-up, metrics, degraded
mode, and the tool-selection accuracy it measures on its packaged sample."""

import asyncio
import logging
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from sstools.common.grpc_auth import bearer
from sstools.common.routing.router import Router
from sstools.devstack.callers import answer, not_refused
from sstools.devstack.keys import PUBLIC_KEYS, service_channel, service_token
from sstools.devstack.testing import http_get, probe, started_service, wait_until
from sstools.router.accuracy import accuracy_loop
from sstools.router.eval import evaluate
from sstools.router.labelled import HOLDOUT, Case, load_cases
from sstools.router.main import assemble
from sstools.router.settings import RouterSettings
from sstools.router.telemetry import RouterMetrics
from sstools.router.v1 import router_pb2, router_pb2_grpc

SERVICE = router_pb2.DESCRIPTOR.services_by_name["RouterService"].full_name


def _settings(
    embedding_model: str = "onnx-e5", accuracy_interval_seconds: float = 3600.0, fallback_below: int = 11
) -> RouterSettings:
    return RouterSettings(
        grpc_port=0,
        metrics_port=0,
        embedding_model=embedding_model,
        jwt_public_keys=PUBLIC_KEYS,
        accuracy_interval_seconds=accuracy_interval_seconds,
        fallback_below=fallback_below,
    )


async def _route(port: int, query: str, **fields: object) -> router_pb2.RouteResponse:
    async with service_channel(f"127.0.0.1:{port}") as channel:
        request = router_pb2.RouteRequest(query=query, **fields)  # type: ignore[arg-type]
        return await router_pb2_grpc.RouterServiceStub(channel).Route(request, timeout=30)


def _samples(exposition: str) -> dict[str, float]:
    return {
        sample.name + "".join(f"|{value}" for value in sample.labels.values()): sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
    }


async def test_router_is_ready_on_grpc_and_probes(tracer_provider: TracerProvider) -> None:
    report = await probe(_settings(), assemble, tracer_provider)
    assert report.listeners == {"metrics", "grpc"}
    assert (report.readyz_status, report.grpc_status) == (200, health_pb2.HealthCheckResponse.SERVING)


async def test_route_over_grpc_ranks_tools_with_sources_timings_and_metrics(
    tracer_provider: TracerProvider,
) -> None:
    # keywords first (ROUTER_FALLBACK_BELOW=3), so that both tiers answer and are counted
    async with started_service(_settings(fallback_below=3), assemble, tracer_provider) as service:
        port = service.ports["grpc"]
        keyword = await _route(
            port, "найди дашборды с проблемами валидации", context=router_pb2.RouteContext(env_id="prod")
        )
        hybrid = await _route(port, "не делай бэкап")
        exposition = (await http_get(f"http://127.0.0.1:{service.ports['metrics']}/metrics")).text
    assert keyword.tools[0].name == "search_dashboards"
    assert keyword.tools[0].source == router_pb2.MATCH_SOURCE_KEYWORD
    assert keyword.tools[-1].name == "show_capabilities"
    assert keyword.tier == router_pb2.ROUTE_TIER_KEYWORD
    assert keyword.prefetch_dashboards
    assert keyword.keyword_ms > 0
    assert not keyword.degraded

    assert hybrid.tier == router_pb2.ROUTE_TIER_HYBRID
    assert hybrid.embedding_ms > 0
    assert hybrid.model.startswith("onnx-e5:")
    assert list(hybrid.negated) == ["run_backup"]
    assert "run_backup" not in [tool.name for tool in hybrid.tools]
    assert any(tool.source == router_pb2.MATCH_SOURCE_EMBEDDING for tool in hybrid.tools)

    samples = _samples(exposition)
    assert samples["sstools_router_route_seconds_count|keyword"] == 1
    assert samples["sstools_router_route_seconds_count|hybrid"] == 1
    assert samples["sstools_router_embedding_fallbacks_total"] == 1
    assert samples["sstools_router_degraded_routes_total"] == 0
    assert samples["sstools_router_tools_returned_count"] == 2
    assert samples["sstools_router_model_available"] == 1
    assert 0 < samples["sstools_router_model_load_seconds"] < 60


async def test_model_that_cannot_load_leaves_a_degraded_keyword_router(
    tracer_provider: TracerProvider,
) -> None:
    settings = _settings(embedding_model="st:/nowhere/no-such-model")
    async with started_service(settings, assemble, tracer_provider) as service:
        assert (await http_get(f"http://127.0.0.1:{service.ports['metrics']}/readyz")).status_code == 200
        reply = await _route(service.ports["grpc"], "сделай резерв копию прода")
        samples = _samples((await http_get(f"http://127.0.0.1:{service.ports['metrics']}/metrics")).text)
    assert reply.degraded
    assert reply.tier == router_pb2.ROUTE_TIER_KEYWORD
    assert reply.model == ""
    assert [tool.name for tool in reply.tools][-1] == "show_capabilities"
    assert samples["sstools_router_model_available"] == 0
    assert samples["sstools_router_model_load_failures_total"] == 1
    assert samples["sstools_router_degraded_routes_total"] == 1


@pytest.mark.parametrize("query", ["", "x" * 100_000, "\x00\x01\x02\ufffd" * 1000])
async def test_empty_huge_and_garbage_queries_are_answered(
    tracer_provider: TracerProvider, query: str
) -> None:
    async with started_service(_settings(), assemble, tracer_provider) as service:
        reply = await _route(service.ports["grpc"], query)
    assert reply.tools[-1].name == "show_capabilities"


async def test_query_over_the_size_limit_is_rejected_as_invalid(tracer_provider: TracerProvider) -> None:
    async with started_service(_settings(), assemble, tracer_provider) as service:
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await _route(service.ports["grpc"], "я" * 600_000)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "longer than" in (error.value.details() or "")


async def test_route_is_refused_to_a_caller_without_a_valid_service_token(
    tracer_provider: TracerProvider,
) -> None:
    async with started_service(_settings(), assemble, tracer_provider) as service:
        target = f"127.0.0.1:{service.ports['grpc']}"
        request = router_pb2.RouteRequest(query="покажи дашборды")
        refusals = await not_refused(target, SERVICE, "Route", request)
        taken = await answer(target, SERVICE, "Route", request, [bearer(service_token())])
        async with grpc.aio.insecure_channel(target) as channel:  # probes hold no token
            health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert refusals == {}
    assert taken == (grpc.StatusCode.OK, "")
    assert health.status == health_pb2.HealthCheckResponse.SERVING


ACCURACY = "sstools_router_tool_selection_accuracy"
CASES = "sstools_router_tool_selection_cases"
CHECKED = "sstools_router_tool_selection_checked_timestamp_seconds"


async def _metrics(port: int) -> dict[str, float]:
    return _samples((await http_get(f"http://127.0.0.1:{port}/metrics")).text)


async def test_tool_selection_accuracy_is_measured_on_the_packaged_sample_once_ready(
    tracer_provider: TracerProvider, router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sstools.router.accuracy")
    started = time.time()
    async with started_service(_settings(), assemble, tracer_provider) as service:
        port = service.ports["metrics"]
        before = await _metrics(port)  # ready, and the replay not yet done: it runs after

        async def measured() -> bool:
            return (await _metrics(port))[CHECKED] > 0

        await wait_until(measured, 60, "an accuracy replay")
        samples = await _metrics(port)
    lines = HOLDOUT.read_text(encoding="utf-8").splitlines()
    assert (before[CASES], before[CHECKED]) == (0, 0)
    assert samples[CASES] == len(lines) > 50
    assert started <= samples[CHECKED] <= time.time()
    # the eval's case recall of the same sample, routed the same way
    expected = evaluate(load_cases(HOLDOUT), lambda query: router.route(query).names)["overall"]
    assert 0.5 < samples[ACCURACY] <= 1
    assert samples[ACCURACY] == pytest.approx(expected["case_recall"], abs=1e-4)
    # replays are not traffic: no route was counted
    assert samples.get("sstools_router_route_seconds_count|keyword", 0) == 0
    assert samples.get("sstools_router_route_seconds_count|hybrid", 0) == 0
    (logged,) = [record for record in caplog.records if record.getMessage() == "tool selection accuracy"]
    assert (logged.accuracy, logged.cases) == (round(samples[ACCURACY], 4), len(lines))  # type: ignore[attr-defined]


async def test_tool_selection_accuracy_is_measured_again_at_its_interval(
    tracer_provider: TracerProvider,
) -> None:
    async with started_service(
        _settings(accuracy_interval_seconds=0.05), assemble, tracer_provider
    ) as service:
        port = service.ports["metrics"]
        checked: list[float] = []

        async def measured_twice() -> bool:
            checked.append((await _metrics(port))[CHECKED])
            return len({value for value in checked if value}) >= 2

        await wait_until(measured_twice, 60, "a second accuracy replay")
    assert sorted(checked) == checked


async def test_an_interval_of_zero_measures_accuracy_once() -> None:
    registry = CollectorRegistry()
    asked: list[str] = []

    async def offered(query: str) -> list[str]:
        asked.append(query)
        return ["run_backup"]

    cases = [
        Case("a", "en", "plain", frozenset({"run_backup"}), frozenset()),
        Case("b", "en", "plain", frozenset({"list_environments"}), frozenset()),
    ]
    await asyncio.wait_for(accuracy_loop(cases, offered, RouterMetrics(registry), 0), 5)
    assert asked == ["a", "b"]
    assert registry.get_sample_value(ACCURACY) == 0.5
    assert registry.get_sample_value(CASES) == 2
