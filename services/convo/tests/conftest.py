import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.common.db import create_engine
from sstools.convo.store import MIGRATIONS
from sstools.convo.store.queries import ConversationStore

JWT_SECRET = "convo-test-secret-" + "x" * 32


@pytest.fixture
async def engine(fresh_database_url: str) -> AsyncIterator[AsyncEngine]:
    await asyncio.to_thread(MIGRATIONS.upgrade, fresh_database_url)
    engine = create_engine(fresh_database_url, pool_size=10)
    yield engine
    await engine.dispose()


@pytest.fixture
def store(engine: AsyncEngine) -> ConversationStore:
    return ConversationStore(engine)
