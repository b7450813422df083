"""Each service as the real process its Procfile line starts: probes, JSON logs, SIGTERM, bad config."""

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import Iterator

import httpx
import pytest
from grpc_health.v1 import health_pb2

from sstools.convo.store import MIGRATIONS as CONVO_MIGRATIONS
from sstools.devstack.keys import PRIVATE_KEY, PUBLIC_KEYS
from sstools.devstack.testing import free_port, grpc_health, wait_until
from sstools.ops.store import MIGRATIONS as OPS_MIGRATIONS

# service -> its listener settings (after the env prefix)
LISTENERS = {
    "router": ["GRPC_PORT", "METRICS_PORT"],
    "docparse": ["GRPC_PORT", "METRICS_PORT"],
    "convo": ["GRPC_PORT", "HTTP_PORT", "METRICS_PORT"],
    "ops": ["HTTP_PORT", "METRICS_PORT"],
    "agent": ["HTTP_PORT", "METRICS_PORT"],
}


@pytest.fixture(scope="module")
def migrated_database_url(database_url: str) -> Iterator[str]:
    from sstools.devstack.testing import scratch_database

    with scratch_database(database_url) as url:
        CONVO_MIGRATIONS.upgrade(url)
        OPS_MIGRATIONS.upgrade(url)
        yield url


def _start(name: str, environment: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [f"sstools-{name}"],
        env={**os.environ, **environment},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.parametrize("name", list(LISTENERS))
async def test_service_process_becomes_ready_and_exits_cleanly_on_sigterm(
    name: str, migrated_database_url: str
) -> None:
    ports = {setting: free_port() for setting in LISTENERS[name]}
    environment = {f"{name.upper()}_{setting}": str(port) for setting, port in ports.items()}
    environment["DATABASE_URL"] = migrated_database_url
    environment["JWT_PRIVATE_KEY"] = PRIVATE_KEY
    environment["JWT_PUBLIC_KEYS"] = PUBLIC_KEYS
    environment["CONFIRMATION_SECRET"] = "process-confirmation-secret-" + "c" * 32
    process = _start(name, environment)
    try:

        async def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"{name} exited with {process.returncode}: {process.stdout.read()}")  # type: ignore[union-attr]
            try:
                async with httpx.AsyncClient(timeout=2) as client:
                    reply = await client.get(f"http://127.0.0.1:{ports['METRICS_PORT']}/readyz")
                return reply.status_code == 200
            except httpx.TransportError:
                return False

        await wait_until(ready, 90, f"{name} ready")
        if "GRPC_PORT" in ports:
            status = await grpc_health(f"127.0.0.1:{ports['GRPC_PORT']}")
            assert status == health_pb2.HealthCheckResponse.SERVING
        process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.to_thread(process.communicate, timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0
    entries = [json.loads(line) for line in output.splitlines()]  # every line is one JSON object
    assert {entry["service"] for entry in entries} == {name}
    messages = [entry["message"] for entry in entries]
    assert messages.index("service ready") < messages.index("stop requested, draining")
    assert messages[-1] == "service stopped"


@pytest.mark.parametrize("name", list(LISTENERS))
def test_service_with_a_bad_setting_exits_2_with_a_message(name: str) -> None:
    setting = f"{name.upper()}_METRICS_PORT"
    result = subprocess.run(
        [f"sstools-{name}"],
        env={
            **os.environ,
            setting: "not-a-port",
            "JWT_PRIVATE_KEY": PRIVATE_KEY,
            "JWT_PUBLIC_KEYS": PUBLIC_KEYS,
            "CONFIRMATION_SECRET": "c" * 40,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith(f"{name}: invalid configuration: metrics_port")
    assert "Traceback" not in result.stderr
