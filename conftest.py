"""Fixtures every suite may use: the test database server, an in-memory tracer, real Superset."""

import os
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sstools.devstack.demo import local_supersets
from sstools.devstack.keys import PublishedKeys, serving_jwks
from sstools.devstack.paths import on_venv_path
from sstools.devstack.superset import Instance, default_home
from sstools.devstack.testing import free_port, scratch_database, scratch_owned_database

# The whole agent stack and its fixtures (agent_stack, llm, llm_stack, conversation).
pytest_plugins = ["sstools.devstack.agentstack"]


# The longest files (minutes each), collected first whatever their folder: `make test`'s two
# workers take whole files in collection order, so these two start at once, one on each.
LONGEST_FIRST = ("tests/test_stack.py", "tests/test_containers.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::")[0]
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the rest keep the order of testpaths


def pytest_configure(config: pytest.Config) -> None:
    # Tests start the services' console scripts; find them in this interpreter's virtualenv.
    os.environ["PATH"] = on_venv_path(os.environ.get("PATH"))


@pytest.fixture(scope="session")
def database_url() -> str:
    """The PostgreSQL server the tests use; `make test` provides one (embedded if need be)."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        pytest.fail("DATABASE_URL is not set: run the suites with `make test`, which provides a server")
    return url


@pytest.fixture
def fresh_database_url(database_url: str) -> Iterator[str]:
    """An empty database of its own for one test."""
    with scratch_database(database_url) as url:
        yield url


@pytest.fixture
def span_exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer_provider(span_exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    yield provider
    provider.shutdown()


@pytest.fixture(scope="session")
def demo_postgres(database_url: str) -> Iterator[str]:
    """The session's PostgreSQL demo database, as the role that owns it (``make run`` keeps one
    on its server; the session's is its own, dropped at the end)."""
    with scratch_owned_database(database_url) as url:
        yield url


@pytest.fixture(scope="session")
def published_keys() -> Iterator[PublishedKeys]:
    """Where the session's Superset instances find the keys of the tokens ops acts as a person
    with: the run's keys, which every ops of the session signs with (and, while a test follows
    one, an ops' own)."""
    with serving_jwks() as published:
        yield published


@pytest.fixture(scope="session")
def ops_jwks_url(published_keys: PublishedKeys) -> str:
    return published_keys.url


@pytest.fixture(scope="session")
def supersets(
    tmp_path_factory: pytest.TempPathFactory, demo_postgres: str, ops_jwks_url: str
) -> Iterator[dict[str, Instance]]:
    """Real Superset 6.1: a seeded dev and an empty prod, on free loopback ports, for the session,
    both listing the PostgreSQL demo, ops acting in both as a person with the run's key. The first
    run installs Superset into .data/superset and initialises a template (about a minute)."""
    folder = tmp_path_factory.mktemp("superset")
    ports = {"dev": free_port(), "prod": free_port()}
    with local_supersets(
        default_home(), folder, ports, postgres=demo_postgres, ops_jwks_url=ops_jwks_url
    ) as instances:
        yield instances
