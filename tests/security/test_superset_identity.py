"""Issue 34: the agent acts in Superset as the person, and Superset's permissions decide.

Two people hold the same role in the agent, admin, so the agent's own policy lets both do
everything asked here; in Superset, root is an Admin and alice may read the sales dataset
alone. Through the chat (a scripted model calling the tools), root finds, reads, health-checks,
audits and deploys "Orders and Events" (a dashboard over orders and events) and queries its
database; alice can do none of it, and each refusal is Superset's. Superset's own log names
each of them for their calls. With ops calling Superset as its service account instead, alice
would see and do all of it: each assertion on her refusals fails then.
"""

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sstools.common.catalogue import Role
from sstools.common.db import create_engine
from sstools.devstack.agentstack import AgentStack, dump, new_conversation
from sstools.devstack.agentstack import Reply as Turn
from sstools.devstack.demo import ANALYST_USER
from sstools.devstack.fake_llm import FakeLlm, Reply, ToolCall
from sstools.devstack.superset import Instance
from sstools.ops.store.users import UserStore
from sstools.ops.superset import dashboards
from sstools.ops.superset.client import SupersetClient

BOARD = "Orders and Events"
EXAMPLES = 1  # dev's SQLite example database, which holds orders
SUPERSET_REFUSALS = {"superset_not_found", "superset_forbidden"}


@pytest.fixture
async def people(llm_stack: AgentStack) -> AgentStack:
    """alice, an admin of the agent: whatever stops her is Superset's say."""
    engine = create_engine(llm_stack.database_url)
    try:
        await UserStore(engine).create(ANALYST_USER, "alice-pass-1234", Role.ADMIN)
    finally:
        await engine.dispose()
    return llm_stack


async def _turn(stack: AgentStack, llm: FakeLlm, username: str, tool: str, args: dict[str, Any]) -> Turn:
    llm.says(Reply(tool_calls=(ToolCall(tool, args),)), Reply(content="Готово."))
    return await stack.say(f"{tool} please", new_conversation(), username=username)


def _refused_by_superset(turn: Turn) -> str:
    (failed,) = turn.of("tool_error")
    assert failed["error"]["code"] in SUPERSET_REFUSALS, dump(turn)
    assert turn.of("permission_denied") == [], dump(turn)  # not the agent's own policy
    return str(failed["error"]["code"])


def _logged(instance: Instance, since: str) -> dict[str, set[str]]:
    """Who Superset's own log names for each action since ``since`` (its UTC clock)."""
    with sqlite3.connect(Path(instance.folder) / "superset.db") as db:
        rows = db.execute(
            "SELECT u.username, l.action FROM logs l JOIN ab_user u ON u.id = l.user_id WHERE l.dttm >= ?",
            [since],
        ).fetchall()
    named: dict[str, set[str]] = {}
    for username, action in rows:
        named.setdefault(username, set()).add(action)
    return named


async def _board_id(dev: SupersetClient) -> int:
    found = await dashboards.search(dev, text=BOARD)
    return next(board.id for board in found.dashboards if board.title == BOARD)


def _found(turn: Turn, board: int) -> None:
    assert [item["id"] for item in turn.of("tool_end")[0]["output"]["dashboards"]] == [board], dump(turn)


def _not_found(turn: Turn, board: int) -> None:
    assert turn.of("tool_end")[0]["output"]["dashboards"] == [], dump(turn)


def _checked(turn: Turn, board: int) -> None:
    summary = turn.of("tool_end")[0]["output"]
    assert (summary["charts_checked"], [item["dashboard_id"] for item in summary["only"]]) == (2, [board])


def _audited(turn: Turn, board: int) -> None:
    assert turn.of("tool_error") == [], dump(turn)
    assert turn.of("tool_end")[0]["output"]["object_id"] == board, dump(turn)


def _queried(turn: Turn, board: int) -> None:
    assert turn.of("tool_error") == [], dump(turn)
    assert turn.of("tool_end")[0]["output"]["rows"][0]["n"] > 0, dump(turn)


def _refused(turn: Turn, board: int) -> None:
    _refused_by_superset(turn)


@dataclass(frozen=True)
class Case:
    tool: str
    arguments: Callable[[int], dict[str, Any]]  # given the dashboard's id
    roots: Callable[[Turn, int], None]  # what root, whom Superset lets, gets
    alices: Callable[[Turn, int], None]  # what alice, whom it does not, gets
    logged: str  # the action Superset's log names root for, and alice where it served her
    serves_alice: bool = True  # False: Superset refuses her before its log is written


SQL = "SELECT count(*) AS n FROM orders"
CASES = {
    "find": Case(
        "search_dashboards",
        lambda board: {"env_id": "dev", "query": BOARD},
        _found,
        _not_found,
        "DashboardRestApi.get_list",
    ),
    "health-check": Case(
        "get_health_summary",
        lambda board: {"env_id": "dev", "dashboard_ids": [board]},
        _checked,
        _refused,  # a dashboard she may not see is not found, never a check of nothing that passed
        "ChartRestApi.get_list",
        serves_alice=False,
    ),
    "audit": Case(
        "superset_audit_permissions",
        lambda board: {"env_id": "dev", "dashboard_id": board},
        _audited,
        _refused,
        "DashboardRestApi.get",
        serves_alice=False,
    ),
    "query": Case(
        "superset_execute_sql",
        lambda board: {"env_id": "dev", "database_id": EXAMPLES, "sql": SQL},
        _queried,
        _refused,
        "DatabaseRestApi.get",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_what_superset_hides_from_a_person_the_chat_does_not_show_them(
    people: AgentStack, llm: FakeLlm, supersets: dict[str, Instance], dev: SupersetClient, case: str
) -> None:
    asked = CASES[case]
    board = await _board_id(dev)
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() - 1))
    asked.roots(await _turn(people, llm, "root", asked.tool, asked.arguments(board)), board)
    asked.alices(await _turn(people, llm, ANALYST_USER, asked.tool, asked.arguments(board)), board)
    named = _logged(supersets["dev"], since)
    assert asked.logged in named.get("root", set()), named
    if asked.serves_alice:  # Superset saw her ask, as herself
        assert asked.logged in named.get(ANALYST_USER, set()), named


async def test_a_person_cannot_deploy_what_superset_hides_from_them(
    people: AgentStack, llm: FakeLlm, dev: SupersetClient, prod: SupersetClient
) -> None:
    board = await _board_id(dev)
    deploy = {"env_id": "prod", "source_env": "dev", "dashboard_id": board}

    await _remove_from_prod(prod)  # what another test deployed there would answer for her

    llm.says(Reply(tool_calls=(ToolCall("deploy_dashboard", deploy),)), Reply(content="Готово."))
    conversation = new_conversation()
    paused = await people.say("deploy it", conversation, username=ANALYST_USER)
    assert paused.state == "needs_confirmation", dump(paused)
    refused = await people.say("", conversation, action="confirm", username=ANALYST_USER)
    assert _refused_by_superset(refused) == "superset_not_found"
    assert await _in_prod(prod) == 0

    llm.says(Reply(tool_calls=(ToolCall("deploy_dashboard", deploy),)), Reply(content="Готово."))
    conversation = new_conversation()
    paused = await people.say("deploy it", conversation, username="root")
    assert paused.state == "needs_confirmation", dump(paused)
    try:
        deployed = await people.say("", conversation, action="confirm", username="root")
        assert deployed.state == "success", dump(deployed)
        assert await _in_prod(prod) == 1
    finally:
        await _remove_from_prod(prod)


async def _in_prod(prod: SupersetClient) -> int:
    found = await dashboards.search(prod, text=BOARD)
    return sum(board.title == BOARD for board in found.dashboards)


async def _remove_from_prod(prod: SupersetClient) -> None:
    """The dashboard, and the charts and datasets a deploy brought with it: prod is shared by the
    session's tests, and one of them makes the orders dataset there itself."""
    for found in (await dashboards.search(prod, text=BOARD)).dashboards:
        if found.title != BOARD:
            continue
        charts = (await prod.get(f"/api/v1/dashboard/{found.id}/charts"))["result"]
        datasets = (await prod.get(f"/api/v1/dashboard/{found.id}/datasets"))["result"]
        await prod.delete(f"/api/v1/dashboard/{found.id}")
        for chart in charts:
            await prod.delete(f"/api/v1/chart/{chart['id']}")
        for dataset in datasets:
            await prod.delete(f"/api/v1/dataset/{dataset['id']}")
