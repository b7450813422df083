"""Environment ids are one validated type at every edge: a crafted id — a path, a fragment, a
query, an encoded slash, a parent folder, a space, upper case, 200 characters, or a well-formed id
of no configured environment — is refused with a typed ``INVALID_ENVIRONMENT`` before any call
reaches ops: as a tool argument, in ``ui_context``, as the turn's ``env_id``, and in ops' own
paths. ops' audit (which records every guarded call, refusals included) proves nothing reached
it from the agent; Superset and ops' state prove nothing changed."""

import json

import httpx

from sstools.devstack.agentstack import AGENT_SECRET, CONFIRMATION_SECRET, AgentStack, dump, new_conversation
from sstools.devstack.confirming import confirming
from sstools.devstack.fake_llm import FakeLlm, Reply, ToolCall

CRAFTED = (
    "prod/maintenance/end#",
    "prod#",
    "prod?x=1",
    "prod%2Fmaintenance%2Fend",
    "..",
    "../prod",
    "prod ",
    "a b",
    "PROD",
    "p" * 200,
)
UNKNOWN = "nowhere"  # well formed, not configured


async def _ops_calls(stack: AgentStack) -> dict[str, tuple[str, str]]:
    """What reached ops so far: each audit record's action and target environment, by id."""
    rows = await stack.rows("SELECT id, action, target_env FROM ops_audit")
    return {str(row["id"]): (row["action"], row["target_env"]) for row in rows}


async def test_a_crafted_environment_in_tool_arguments_reaches_nothing(
    llm_stack: AgentStack, llm: FakeLlm
) -> None:
    """The model names the environment: each crafted one is a typed refusal, nothing is sent."""
    calls: tuple[tuple[str, dict[str, object]], ...] = (
        ("run_llm_validation", {"dashboard_id": 1}),  # once "read": POST /api/envs/<id>/.../validation
        ("search_dashboards", {}),
        ("deploy_dashboard", {"dashboard_id": 1, "source_env": "dev"}),
    )
    before = await _ops_calls(llm_stack)
    for env_id in (*CRAFTED, UNKNOWN):
        for name, args in calls:
            llm.script.clear()
            llm.says(
                Reply(tool_calls=(ToolCall(name, {**args, "env_id": env_id}),)), Reply(content="Готово.")
            )
            reply = await llm_stack.say(f"проверка {name}", new_conversation(), env_id="")
            errors = reply.of("tool_error")
            where = f"{name} env_id={env_id!r}: {dump(reply)}"
            assert [error["error"]["code"] for error in errors] == ["INVALID_ENVIRONMENT"], where
            assert reply.of("tool_start") == [], where
            assert reply.of("confirm_required") == [], where
            assert reply.state == "failed", where
    # the source environment of a deploy is an environment too
    llm.script.clear()
    llm.says(
        Reply(
            tool_calls=(
                ToolCall("deploy_dashboard", {"env_id": "prod", "dashboard_id": 1, "source_env": "../dev"}),
            )
        )
    )
    reply = await llm_stack.say("задеплой", new_conversation())
    assert [error["error"]["code"] for error in reply.of("tool_error")] == ["INVALID_ENVIRONMENT"], dump(
        reply
    )
    # What reached ops: the dashboard list fetched ahead for a list request, in the turn's own
    # environment (the default, dev) — never a call of the model's, nor anything elsewhere.
    reached = {call for id_, call in (await _ops_calls(llm_stack)).items() if id_ not in before}
    assert reached <= {("search_dashboards", "dev")}, reached


async def test_a_crafted_environment_in_the_turn_or_ui_context_is_refused_before_anything_runs(
    agent_stack: AgentStack,
) -> None:
    before = await _ops_calls(agent_stack)
    for env_id in (*CRAFTED, UNKNOWN):
        conversation = new_conversation()
        as_turn = await agent_stack.say("покажи дашборды", conversation, env_id=env_id)
        context = json.dumps({"objectType": "dashboard", "objectId": "1", "envId": env_id})
        in_context = await agent_stack.say(
            "покажи дашборды", new_conversation(), env_id="", ui_context=context
        )
        for reply in (as_turn, in_context):
            where = f"env_id={env_id!r}: {dump(reply)}"
            assert [error["code"] for error in reply.of("error")] == ["INVALID_ENVIRONMENT"], where
            assert reply.of("tool_start") == [], where
            assert reply.of("routing") == [], where
            assert reply.state == "failed", where
    assert await _ops_calls(agent_stack) == before


async def test_ops_paths_refuse_what_is_not_a_configured_environment(agent_stack: AgentStack) -> None:
    """Straight at ops, with both identities valid: an encoded slash cannot turn a validation into
    the end of a maintenance window, and no crafted id is served."""
    confirm = confirming(CONFIRMATION_SECRET)  # the maintenance window is a confirmed change
    async with httpx.AsyncClient(
        base_url=agent_stack.ops_url, timeout=30, event_hooks={"request": [confirm]}
    ) as ops:
        service = await ops.post(
            "/api/auth/service-token", json={"client_id": "agent", "client_secret": AGENT_SECRET}
        )
        user = agent_stack.token("root")
        headers = {
            "Authorization": f"Bearer {service.json()['access_token']}",
            "X-User-Authorization": f"Bearer {user}",
        }
        started = await ops.post("/api/envs/prod/maintenance", json={"reason": "path test"}, headers=headers)
        assert started.status_code == 201, started.text
        for raw in (
            "prod%2Fmaintenance%2Fend%23",
            "prod%2Fmaintenance%2Fend",
            "PROD",
            "p" * 200,
            UNKNOWN,
            "..%2Fprod",
        ):
            reply = await ops.post(f"/api/envs/{raw}/dashboards/1/validation", headers=headers)
            assert reply.status_code in (404, 422), f"{raw}: {reply.status_code} {reply.text}"
            search = await ops.get(f"/api/envs/{raw}/dashboards", headers=headers)
            assert search.status_code in (404, 422), f"{raw}: {search.status_code} {search.text}"
            if raw in ("PROD", UNKNOWN, "p" * 200):  # a route matched: the guard's typed refusal
                assert search.json()["detail"]["code"] == "invalid_environment", search.text
        windows = (await ops.get("/api/maintenance", params={"env_id": "prod"}, headers=headers)).json()
        assert [window["active"] for window in windows] == [True], windows  # still under maintenance
        tasks = await agent_stack.rows("SELECT id FROM ops_tasks")
        assert tasks == []
