"""LLM providers, their status, and validation and documentation against a configured
OpenAI-compatible endpoint (a scripted server on a socket) and real Superset."""

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from sstools.common.metrics import GenAiClientMetrics
from sstools.devstack.demo import PASSWORD_ENV, environments
from sstools.devstack.fake_llm import FakeLlm, Reply
from sstools.devstack.superset import Instance
from sstools.devstack.testing import free_port, serving
from sstools.ops.llm import LlmEndpoint, LlmUnavailable

from .conftest import OpsApi, running_ops


@pytest.fixture
def llm() -> FakeLlm:
    return FakeLlm(model="review-model")


@pytest.fixture
async def ops(
    supersets: dict[str, Instance],
    llm: FakeLlm,
    fresh_database_url: str,
    tracer_provider: TracerProvider,
    tmp_path: Path,
) -> AsyncIterator[OpsApi]:
    async with (
        serving(llm.app()) as url,
        running_ops(
            fresh_database_url,
            tracer_provider,
            environments(supersets, PASSWORD_ENV),
            tmp_path,
            llm_base_url=f"{url}/v1",
            llm_model="review-model",
            llm_api_key="test-key",
        ) as api,
    ):
        yield api


async def _dashboard(ops: OpsApi, title: str) -> dict[str, Any]:
    reply = await ops.http.get(
        "/api/envs/dev/dashboards", params={"query": title}, headers=ops.headers("vera")
    )
    return dict(reply.json()["dashboards"][0])


async def test_the_configured_provider_is_listed_and_reachable(ops: OpsApi) -> None:
    providers = (await ops.http.get("/api/llm/providers", headers=ops.headers("vera"))).json()
    assert [(provider["id"], provider["default"]) for provider in providers] == [
        ("default", True),
        ("offline", False),
    ]
    status = (await ops.http.get("/api/llm/status", headers=ops.headers("vera"))).json()
    assert (status["reachable"], status["model"], status["model_listed"]) == (True, "review-model", True)


async def test_only_those_who_operate_it_see_where_the_llm_is(ops: OpsApi) -> None:
    for username, sees in (("vera", False), ("anna", False), ("oleg", True), ("root", True)):
        providers = (await ops.http.get("/api/llm/providers", headers=ops.headers(username))).json()
        configured, offline = (provider["base_url"] for provider in providers)
        assert offline is None
        if sees:
            assert configured.startswith("http://127.0.0.1:"), username
            assert configured.endswith("/v1"), username
        else:
            assert configured is None, username


async def test_validation_asks_the_llm_with_the_dashboards_facts(ops: OpsApi, llm: FakeLlm) -> None:
    llm.says(Reply(content="1. Legacy uptime reads a dropped table: repoint it or remove it."))
    legacy = await _dashboard(ops, "Legacy KPIs")
    started = await ops.http.post(
        f"/api/envs/dev/dashboards/{legacy['id']}/validation", headers=ops.headers("anna")
    )
    task = await ops.wait_task(started.json()["id"], "anna")
    assert task["status"] == "success", task
    assert task["result"]["provider"] == "default"
    assert task["result"]["llm_review"].startswith("1. Legacy uptime reads a dropped table")
    asked = llm.requests[-1]
    assert asked["model"] == "review-model"
    assert "Legacy uptime" in asked["messages"][1]["content"]
    assert "no such table" in asked["messages"][1]["content"]  # the failing query reached the model


async def test_documentation_writes_the_llms_descriptions_into_superset(ops: OpsApi, llm: FakeLlm) -> None:
    orders = await _dashboard(ops, "Orders and Events")
    llm.says(Reply(content="Orders counted by their status."), Reply(content="Events counted by kind."))
    # oleg, an Admin in Superset, may change the admin's charts (an Alpha like anna changes only
    # their own: Superset's say, in test_superset_operations)
    started = await ops.http.post(
        f"/api/envs/dev/dashboards/{orders['id']}/documentation", headers=ops.headers("oleg")
    )
    task = await ops.wait_task(started.json()["id"], "oleg")
    assert task["status"] == "success", task
    written = sorted(item["description"] for item in task["result"]["charts_documented"])
    assert written == ["Events counted by kind.", "Orders counted by their status."]


async def test_an_llm_that_fails_fails_the_task_with_a_typed_error(ops: OpsApi, llm: FakeLlm) -> None:
    llm.says(Reply(status=500))
    sales = await _dashboard(ops, "Sales Overview")
    started = await ops.http.post(
        f"/api/envs/dev/dashboards/{sales['id']}/validation", headers=ops.headers("anna")
    )
    task = await ops.wait_task(started.json()["id"], "anna")
    assert (task["status"], task["error"]["code"]) == ("failed", "llm_unavailable")


async def test_an_unreachable_llm_shows_in_its_status(
    fresh_database_url: str, tracer_provider: TracerProvider, tmp_path: Path
) -> None:
    async with running_ops(
        fresh_database_url,
        tracer_provider,
        [],
        tmp_path,
        llm_base_url=f"http://127.0.0.1:{free_port()}/v1",
        llm_model="m",
    ) as ops:
        status = (await ops.http.get("/api/llm/status", headers=ops.headers("vera"))).json()
        assert status["reachable"] is False
        assert status["error"] == "ConnectError"  # what failed, not where: a viewer sees no address
        detailed = (await ops.http.get("/api/llm/status", headers=ops.headers("oleg"))).json()
        assert detailed["error"].startswith("ConnectError(")


async def test_each_call_to_the_llm_is_measured_as_a_genai_client_operation(llm: FakeLlm) -> None:
    registry = CollectorRegistry()
    llm.says(Reply(content="Looks fine."), Reply(status=503))
    async with serving(llm.app()) as url:
        endpoint = LlmEndpoint(
            f"{url}/v1",
            "test-key",
            "review-model",
            10.0,
            GenAiClientMetrics(registry),
            300,
            0.1,
            ("<|im_start|>",),
        )
        assert await endpoint.complete("review", "dashboard") == "Looks fine."
        # bounded, under both names the servers read
        asked = llm.requests[0]
        assert (asked["max_tokens"], asked["max_completion_tokens"], asked["temperature"]) == (300, 300, 0.1)
        assert asked["stop"] == ["<|im_start|>"]
        with pytest.raises(LlmUnavailable):
            await endpoint.complete("review", "dashboard")
    chat = {"gen_ai_operation_name": "chat", "gen_ai_request_model": "review-model"}

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {**chat, **labels})

    assert value("gen_ai_client_operation_duration_seconds_count", error_type="") == 1
    assert value("gen_ai_client_operation_duration_seconds_count", error_type="503") == 1
    # the scripted server's answer reports usage (of nothing): recorded as reported, once
    assert value("gen_ai_client_token_usage_count", gen_ai_token_type="input") == 1
    assert value("gen_ai_client_token_usage_count", gen_ai_token_type="output") == 1
