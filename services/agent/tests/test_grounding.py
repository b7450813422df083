"""The grounding cache against a real ops over the session's real Superset instances: what it
reads, and how often it asks ops — counted from the HTTP requests the agent's ops client sent."""

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sstools.agent.clients.ops import OpsClient, OpsError
from sstools.agent.grounding import Grounding
from sstools.common.db import create_engine
from sstools.devstack.agentstack import AGENT_SECRET, CONFIRMATION_SECRET, USERS
from sstools.devstack.demo import DASHBOARDS, PASSWORD_ENV, environments
from sstools.devstack.keys import PRIVATE_KEY, PUBLIC_KEYS, user_token
from sstools.devstack.superset import Instance
from sstools.devstack.testing import started_service
from sstools.ops.main import assemble as assemble_ops
from sstools.ops.settings import OpsSettings
from sstools.ops.store import MIGRATIONS
from sstools.ops.store.users import UserStore

OUTLINE_DEV = "/api/envs/dev/outline"
DASHBOARDS_DEV = "/api/envs/dev/dashboards"


@pytest.fixture
async def ops_url(
    supersets: dict[str, Instance], fresh_database_url: str, tracer_provider: TracerProvider, tmp_path: Path
) -> AsyncIterator[str]:
    """An ops over the session's dev and prod Superset, with one user of each role."""
    await asyncio.to_thread(MIGRATIONS.upgrade, fresh_database_url)
    engine = create_engine(fresh_database_url)
    try:
        store = UserStore(engine)
        for username, role in USERS.items():
            await store.create(username, f"{username}-pass-123", role)
    finally:
        await engine.dispose()
    settings = OpsSettings(
        http_port=0,
        metrics_port=0,
        database_url=fresh_database_url,
        jwt_private_key=PRIVATE_KEY,
        jwt_public_keys=PUBLIC_KEYS,
        confirmation_secret=CONFIRMATION_SECRET,
        service_clients=f"agent:{AGENT_SECRET}",
        environments=environments(supersets, PASSWORD_ENV),
        backup_dir=tmp_path / "backups",
        git_repo=tmp_path / "exports",
    )
    async with started_service(settings, assemble_ops, tracer_provider) as ops:
        yield f"http://127.0.0.1:{ops.ports['api']}"


@pytest.fixture
def sent() -> InMemorySpanExporter:
    """The HTTP requests the agent's ops client sends (one span each)."""
    return InMemorySpanExporter()


@pytest.fixture
async def ops(ops_url: str, sent: InMemorySpanExporter) -> AsyncIterator[OpsClient]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(sent))
    client = OpsClient(ops_url, "agent", AGENT_SECRET, timeout=120, tracer_provider=provider)
    try:
        yield client
    finally:
        await client.aclose()
        provider.shutdown()


def _requests(sent: InMemorySpanExporter, path: str) -> int:
    return sum(
        1
        for span in sent.get_finished_spans()
        if urlsplit(str((span.attributes or {})["http.url"])).path == path
    )


@pytest.fixture
def tokens() -> dict[str, str]:
    return {username: user_token(username) for username in USERS}


async def test_an_outline_is_read_once_in_its_time_and_shared_by_callers_at_once(
    ops: OpsClient, sent: InMemorySpanExporter, tokens: dict[str, str]
) -> None:
    grounding = Grounding(ops, 120)
    first, *together = await asyncio.gather(
        *(grounding.outline(tokens["anna"], "anna", "dev") for _ in range(3))
    )
    again = await grounding.outline(tokens["anna"], "anna", "dev")
    assert _requests(sent, OUTLINE_DEV) == 1
    assert together == [first, first]
    assert again == first
    assert first.env_id == "dev"
    examples = next(database for database in first.databases if database.name == "examples")
    sales = next(table for table in examples.tables if table.name == "sales")
    assert {column.name: column.values for column in sales.columns}["product"] == [
        "Gadget",
        "Gizmo",
        "Widget",
    ]


async def test_each_person_and_environment_has_an_outline_of_its_own(
    ops: OpsClient, sent: InMemorySpanExporter, tokens: dict[str, str]
) -> None:
    grounding = Grounding(ops, 120)
    await grounding.outline(tokens["anna"], "anna", "dev")
    await grounding.outline(tokens["oleg"], "oleg", "dev")
    await grounding.outline(tokens["anna"], "anna", "prod")
    await grounding.outline(tokens["oleg"], "oleg", "dev")
    assert _requests(sent, OUTLINE_DEV) == 2
    assert _requests(sent, "/api/envs/prod/outline") == 1


async def test_a_refusal_is_not_kept(
    ops: OpsClient, sent: InMemorySpanExporter, tokens: dict[str, str]
) -> None:
    grounding = Grounding(ops, 120)
    for _ in range(2):
        with pytest.raises(OpsError) as refused:
            await grounding.outline(tokens["vera"], "vera", "dev")  # a viewer: exploration is an analyst's
        assert (refused.value.status, refused.value.code) == (403, "permission_denied")
    assert _requests(sent, OUTLINE_DEV) == 2


async def test_an_outline_is_read_again_once_its_time_is_over(
    ops: OpsClient, sent: InMemorySpanExporter, tokens: dict[str, str]
) -> None:
    grounding = Grounding(ops, 0.5)
    await grounding.outline(tokens["anna"], "anna", "dev")
    await grounding.outline(tokens["anna"], "anna", "dev")
    assert _requests(sent, OUTLINE_DEV) == 1
    await asyncio.sleep(0.6)
    await grounding.outline(tokens["anna"], "anna", "dev")
    assert _requests(sent, OUTLINE_DEV) == 2


async def test_past_its_size_the_least_recently_used_outline_goes_first(
    ops: OpsClient, sent: InMemorySpanExporter, tokens: dict[str, str]
) -> None:
    grounding = Grounding(ops, 120, max_entries=2)
    for username in ("anna", "oleg", "anna", "root", "anna"):  # root pushes out oleg, not anna
        await grounding.outline(tokens[username], username, "dev")
    assert _requests(sent, OUTLINE_DEV) == 3
    await grounding.outline(tokens["oleg"], "oleg", "dev")
    assert _requests(sent, OUTLINE_DEV) == 4


async def test_dashboards_are_every_one_the_person_sees_read_page_by_page_once(
    ops: OpsClient, sent: InMemorySpanExporter, tokens: dict[str, str]
) -> None:
    grounding = Grounding(ops, 120, page_size=2)
    listed = await grounding.dashboards(tokens["vera"], "vera", "dev")
    titles = {dashboard.title: dashboard.slug for dashboard in listed}
    assert {spec.title: spec.slug for spec in DASHBOARDS}.items() <= titles.items()
    assert len({dashboard.id for dashboard in listed}) == len(listed)
    pages = _requests(sent, DASHBOARDS_DEV)
    assert pages == -(-len(listed) // 2)  # every page, and no more
    assert await grounding.dashboards(tokens["vera"], "vera", "dev") == listed
    assert _requests(sent, DASHBOARDS_DEV) == pages
