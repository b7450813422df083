"""The Superset client at its edges: Superset's HTML 500 pages, a flaky gateway in front of it,
expired tokens. Real Superset where it can show the behaviour; a scripted HTTP server on a
socket for gateway faults, which a healthy local Superset never produces."""

import io
import zipfile
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CollectorRegistry

from sstools.devstack.demo import PASSWORD_ENV, environments
from sstools.devstack.superset import Instance
from sstools.devstack.testing import free_port, serving
from sstools.ops.environments import Environment, parse_environments
from sstools.ops.superset import dashboards
from sstools.ops.superset.client import SupersetClient, SupersetError, SupersetNotFound, SupersetUnavailable
from sstools.ops.telemetry import SupersetMetrics


async def test_an_html_500_from_superset_becomes_a_typed_error_with_its_title(
    supersets: dict[str, Instance],
) -> None:
    dev = parse_environments(environments(supersets, PASSWORD_ENV))["dev"]
    client = SupersetClient(dev)
    try:
        bundle = await dashboards.export(client, [1])
        # Without overwrite=true an existing dashboard makes Superset answer an HTML page.
        with pytest.raises(SupersetError) as raised:
            await client.post(
                "/api/v1/dashboard/import/", files={"formData": ("b.zip", bundle, "application/zip")}, data={}
            )
        assert raised.value.upstream_status == 500
        assert raised.value.env_id == "dev"
        assert "<" not in raised.value.message
        assert raised.value.body()["code"] == "superset_error"
        with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
            assert any(name.endswith("metadata.yaml") for name in archive.namelist())
    finally:
        await client.aclose()


class FlakySuperset:
    """Superset's login and CSRF endpoints, and a dashboard list behind a gateway that fails."""

    def __init__(self, failures: int, failure_status: int = 502) -> None:
        self.failures = failures
        self.failure_status = failure_status
        self.calls: list[tuple[str, str]] = []
        self.logins = 0
        self.expire_next = False

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/api/v1/security/login")
        async def login() -> dict[str, str]:
            self.logins += 1
            return {"access_token": f"token-{self.logins}"}

        @app.get("/api/v1/security/csrf_token/")
        async def csrf() -> dict[str, str]:
            return {"result": "csrf"}

        @app.api_route("/api/v1/dashboard/", methods=["GET", "POST"])
        async def dashboards(request: Request) -> Response:
            self.calls.append((request.method, request.headers.get("authorization", "")))
            if self.expire_next:
                self.expire_next = False
                return JSONResponse({"msg": "Token has expired"}, status_code=401)
            if self.failures > 0:
                self.failures -= 1
                return HTMLResponse(
                    "<html><title>502 Bad Gateway</title></html>", status_code=self.failure_status
                )
            payload: dict[str, Any] = {"count": 0, "result": []}
            return JSONResponse(payload, status_code=200 if request.method == "GET" else 201)

        return app


@pytest.fixture
def password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLAKY_SUPERSET_PASSWORD", "secret")


def _client(
    url: str, retries: int, env_id: str = "staging", metrics: SupersetMetrics | None = None
) -> SupersetClient:
    environment = Environment(id=env_id, name=env_id, url=url, password_env="FLAKY_SUPERSET_PASSWORD")
    return SupersetClient(environment, read_retries=retries, backoff=0.01, metrics=metrics)


@pytest.mark.usefixtures("password")
async def test_reads_are_retried_through_gateway_errors_and_writes_are_not() -> None:
    superset = FlakySuperset(failures=2)
    async with serving(superset.app()) as url:
        client = _client(url, retries=2)
        assert await client.get("/api/v1/dashboard/") == {"count": 0, "result": []}
        assert len(superset.calls) == 3

        superset.failures = 1
        with pytest.raises(SupersetUnavailable) as raised:
            await client.post("/api/v1/dashboard/", {"dashboard_title": "x"})
        assert len(superset.calls) == 4  # a write may have happened: never sent twice
        assert (raised.value.status, raised.value.env_id) == (503, "staging")

        superset.failures = 5
        with pytest.raises(SupersetUnavailable):
            await client.get("/api/v1/dashboard/")
        assert len(superset.calls) == 7  # 1 + 2 retries, then it gives up
        await client.aclose()


@pytest.mark.usefixtures("password")
async def test_an_expired_token_is_renewed_once() -> None:
    superset = FlakySuperset(failures=0)
    async with serving(superset.app()) as url:
        client = _client(url, retries=0)
        await client.get("/api/v1/dashboard/")
        superset.expire_next = True
        await client.get("/api/v1/dashboard/")
        assert superset.logins == 2
        assert [auth for _, auth in superset.calls] == ["Bearer token-1", "Bearer token-1", "Bearer token-2"]
        await client.aclose()


@pytest.mark.usefixtures("password")
async def test_every_request_to_superset_is_counted_for_its_environment_by_outcome() -> None:
    """What SSToolsSupersetUnreachable reads: a Superset nobody listens on counts as unreachable
    for its environment alone; one that answers counts as ok, a 404 too (Superset working), and
    its 5xx as http_error."""
    registry = CollectorRegistry()
    metrics = SupersetMetrics(registry)

    def count(env_id: str, outcome: str) -> float:
        sample = registry.get_sample_value(
            "sstools_ops_superset_request_seconds_count", {"env": env_id, "outcome": outcome}
        )
        return sample or 0.0

    silent = _client(f"http://127.0.0.1:{free_port()}", retries=2, env_id="prod", metrics=metrics)
    with pytest.raises(SupersetUnavailable):
        await silent.get("/api/v1/dashboard/")  # its sign-in gets no answer: no retry
    assert not await silent.health()
    await silent.aclose()
    assert count("prod", "unreachable") == 2

    superset = FlakySuperset(failures=1)
    async with serving(superset.app()) as url:
        client = _client(url, retries=1, metrics=metrics)
        await client.get("/api/v1/dashboard/")  # sign-in, a 502, then the retry
        with pytest.raises(SupersetNotFound):
            await client.get("/api/v1/chart/1")
        await client.aclose()
    assert [count("staging", outcome) for outcome in ("ok", "http_error", "unreachable")] == [3, 1, 0]
    assert [count("prod", outcome) for outcome in ("ok", "http_error")] == [0, 0]
