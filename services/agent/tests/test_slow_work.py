"""Slow work followed, not cut: a statement that outlives ops' wait goes on as a task the
answer names; the page follows it to its rows, and the agent answers it when asked."""

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider

from sstools.devstack.agentstack import AgentStack, dump, new_conversation, running_stack
from sstools.devstack.superset import Instance

# A read that takes SQLite several seconds: longer than ops' wait and the agent's time limit
# below, well within the statement's own time.
SLOW_READ = (
    "WITH RECURSIVE c AS (SELECT 1 AS x UNION ALL SELECT x + 1 FROM c WHERE x < 30000000) "
    "SELECT count(*) AS n FROM c"
)


@pytest.fixture
async def slow_stack(
    supersets: dict[str, Instance], fresh_database_url: str, tracer_provider: TracerProvider, tmp_path: Path
) -> AsyncIterator[AgentStack]:
    """ops waits 2 s for a statement; a tool call may take 4 s, and waits for a task's end until
    3.2 s after it began."""
    async with running_stack(
        supersets,
        fresh_database_url,
        tracer_provider,
        tmp_path,
        ops_overrides={"read_wait_seconds": 2.0},
        tool_timeout_seconds=4.0,
    ) as stack:
        yield stack


async def _followed(stack: AgentStack, task_id: str, username: str) -> dict[str, Any]:
    """The task read as the page reads it, with the person's own token, until it ends."""
    async with httpx.AsyncClient(base_url=stack.ops_url, timeout=30) as http:
        for _ in range(300):
            reply = await http.get(
                f"/api/my/tasks/{task_id}", headers={"Authorization": f"Bearer {stack.token(username)}"}
            )
            assert reply.status_code == 200, reply.text
            task: dict[str, Any] = reply.json()
            if task["status"] in ("success", "failed"):
                return task
            await asyncio.sleep(0.2)
    raise AssertionError(f"task {task_id} did not end")


async def test_a_statement_longer_than_the_wait_is_answered_as_work_to_follow_and_then_its_rows(
    slow_stack: AgentStack,
) -> None:
    conversation = new_conversation()
    started = await slow_stack.say(
        f"run this SQL in the examples database on dev: {SLOW_READ}", conversation, username="anna", env_id=""
    )
    assert started.of("tool_timeout") == [], dump(started)  # reported within the time limit
    # which database "examples" is, from the person's outline of dev: no call for it
    assert [event["tool"] for event in started.of("tool_end")] == ["superset_execute_sql"], dump(started)
    (state,) = started.of("state")
    assert state["state"] == "started", dump(started)
    task_id = state["task_id"]
    assert task_id in started.text.replace("\\", "")  # the answer names the task (Markdown-escaped)
    assert "Still running" in started.text

    task = await _followed(slow_stack, task_id, "anna")
    assert (task["kind"], task["status"]) == ("sql", "success"), task
    assert task["result"]["rows"] == [{"n": 30_000_000}]

    asked = await slow_stack.say(f"what is the status of task {task_id}?", conversation, username="anna")
    assert [event["tool"] for event in asked.of("tool_end")] == ["get_task_status"], dump(asked)
    assert "30000000" in asked.text, dump(asked)  # its rows, as the statement's answer gives them
    assert asked.state == "success"
