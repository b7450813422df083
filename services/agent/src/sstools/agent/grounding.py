"""What a person's words are grounded in: the environment's outline (databases, tables, columns,
a few values) and its dashboards, as that person sees them, read from ops once and reused for a
short while per person and environment — a second question there costs no heavy read.

Each is kept per (username, environment) — what one person sees is no answer for another —,
for ``ttl_seconds``, at most ``max_entries`` of each, the least recently used going first.
Callers asking for the same one at once share a single request; a failure is not kept, so the
next caller asks again."""

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

from pydantic import BaseModel

from sstools.agent.clients.ops import OpsCall, OpsClient, OpsError
from sstools.agent.clients.router import ToolRouter
from sstools.common.catalogue import ENDPOINTS
from sstools.common.outline import EnvOutline
from sstools.common.tool_args import SearchArgs

# Most dashboards one environment's list holds, and how many ops is asked for at a time.
DASHBOARDS_AT_MOST = 1000
DASHBOARDS_PAGE = 100

_SEARCH = ENDPOINTS["search_dashboards"]

_V = TypeVar("_V")


class DashboardRef(BaseModel):
    id: int
    title: str
    slug: str | None = None


class _Kept(Generic[_V]):
    """Values by key for a while, the least recently used dropped past ``max_entries``, one
    load at a time per key."""

    def __init__(self, ttl_seconds: float, max_entries: int) -> None:
        self._ttl = ttl_seconds
        self._max_entries = max_entries
        self._values: OrderedDict[Hashable, tuple[float, _V]] = OrderedDict()
        self._loading: dict[Hashable, asyncio.Task[_V]] = {}

    async def get(self, key: Hashable, load: Callable[[], Awaitable[_V]]) -> _V:
        kept = self._values.get(key)
        if kept is not None and kept[0] > time.monotonic():
            self._values.move_to_end(key)
            return kept[1]
        loading = self._loading.get(key)
        if loading is None:
            loading = asyncio.ensure_future(self._load(key, load))
            self._loading[key] = loading
        # a caller that gives up does not cancel the load the others wait for
        return await asyncio.shield(loading)

    async def _load(self, key: Hashable, load: Callable[[], Awaitable[_V]]) -> _V:
        try:
            value = await load()
        finally:
            del self._loading[key]
        self._values[key] = (time.monotonic() + self._ttl, value)
        self._values.move_to_end(key)
        while len(self._values) > self._max_entries:
            self._values.popitem(last=False)
        return value


class Grounding:
    def __init__(
        self,
        ops: OpsClient,
        ttl_seconds: float,
        *,
        max_entries: int = 256,
        page_size: int = DASHBOARDS_PAGE,
    ) -> None:
        self._ops = ops
        self._page_size = page_size
        self._outlines: _Kept[EnvOutline] = _Kept(ttl_seconds, max_entries)
        self._dashboards: _Kept[list[DashboardRef]] = _Kept(ttl_seconds, max_entries)

    async def outline(self, user_token: str, username: str, env_id: str) -> EnvOutline:
        """The environment's outline as ``username`` sees it (``OpsError`` when ops refuses)."""
        return await self._outlines.get((username, env_id), lambda: self._ops.outline(user_token, env_id))

    async def dashboards(self, user_token: str, username: str, env_id: str) -> list[DashboardRef]:
        """Every dashboard ``username`` sees in the environment, up to ``DASHBOARDS_AT_MOST``."""
        return await self._dashboards.get(
            (username, env_id), lambda: self._every_dashboard(user_token, env_id)
        )

    async def _every_dashboard(self, user_token: str, env_id: str) -> list[DashboardRef]:
        # by id: one edited while the pages are read moves to the front and may be listed twice
        found: dict[int, DashboardRef] = {}
        page = 0
        while len(found) < DASHBOARDS_AT_MOST:
            path, params, _ = _SEARCH.request(SearchArgs(env_id=env_id, page=page, page_size=self._page_size))
            listed = await self._ops.call(OpsCall(_SEARCH.method, path, params=params), user_token)
            batch = [DashboardRef.model_validate(item) for item in listed.get("dashboards") or []]
            found.update((dashboard.id, dashboard) for dashboard in batch)
            page += 1
            if not batch or page * self._page_size >= int(listed.get("count") or 0):
                break
        return list(found.values())[:DASHBOARDS_AT_MOST]


# A schema's names the router embeds the first time it sees them: longer than a routing.
RELATE_SECONDS = 3.0
_log = logging.getLogger(__name__)


class PersonGround:
    """The live system as one person sees it, for the planner of their turn: titles and the
    outline from the cache, nearness of words to names from the router's model. What ops
    refuses or cannot say is None: the planner then asks instead."""

    def __init__(self, grounding: Grounding, router: ToolRouter, user_token: str, username: str) -> None:
        self._grounding, self._router = grounding, router
        self._user_token, self._username = user_token, username

    async def titles(self, env_id: str) -> dict[int, str] | None:
        try:
            boards = await self._grounding.dashboards(self._user_token, self._username, env_id)
        except OpsError as refused:
            _log.info("dashboards unknown to the planner", extra={"error": str(refused)})
            return None
        return {board.id: board.title for board in boards}

    async def outline(self, env_id: str) -> EnvOutline | None:
        try:
            return await self._grounding.outline(self._user_token, self._username, env_id)
        except OpsError as refused:
            _log.info("outline unknown to the planner", extra={"error": str(refused)})
            return None

    async def relate(self, queries: Sequence[str], labels: Sequence[str]) -> Sequence[Sequence[float]] | None:
        related = await self._router.relate(queries, labels, RELATE_SECONDS)
        return related.rows if related is not None else None
