"""The router under test: built once per session, with the default model, as the service builds it."""

import pytest

from sstools.common.routing.router import Router
from sstools.router.settings import RouterSettings
from sstools.router.warmup import build_router


@pytest.fixture(scope="session")
def router() -> Router:
    built = build_router(RouterSettings())
    assert built.load_seconds is not None, "the default embedding model must load"
    return built.router
