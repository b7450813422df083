"""Dashboard prefetch (FR-031): for a find/list request (the router says which) the first
dashboards of the environment the message names (else the turn's) are fetched before the model
is asked and put before it as one compact list. A model answers such a request in one round trip
instead of two; it keeps ``search_dashboards`` for what the list lacks (another environment,
another page: a real model once could not look at prod for "show me the prod dashboards").

The offline planner answers from tool results only, so the agent prefetches for a real model
alone.
"""

import json
import logging

from sstools.agent.clients.ops import OpsClient, OpsError
from sstools.agent.fence import TOOL_RESULT, fenced
from sstools.agent.tools import ops_call
from sstools.common.tool_args import SearchArgs

SEARCH_TOOL = "search_dashboards"
_log = logging.getLogger(__name__)


async def prefetch_dashboards(ops: OpsClient, user_token: str, env_id: str, limit: int) -> str | None:
    """The environment's first ``limit`` dashboards, one JSON object a line inside a tool-result
    fence (titles and slugs are set by any dashboard editor: a title is a JSON string, its
    newlines escaped, never a line of its own); None when ops cannot say."""
    try:
        page = await ops.call(ops_call(SEARCH_TOOL, SearchArgs(env_id=env_id, page_size=limit)), user_token)
    except OpsError as error:  # the model still has search_dashboards then
        _log.info("dashboard prefetch skipped", extra={"error": str(error)})
        return None
    lines = [
        json.dumps({key: item.get(key) for key in ("id", "title", "slug", "url")}, ensure_ascii=False)
        for item in page["dashboards"]
    ]
    listed = (
        f"Dashboards in {env_id} ({len(lines)} of {page['count']}), fetched for this request; "
        "answer from this list, search only for what it lacks:\n" + "\n".join(lines)
    )
    return fenced(TOOL_RESULT, listed, tool=SEARCH_TOOL)
