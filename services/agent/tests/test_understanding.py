"""The offline planner through the whole stack (router, ops, two real Superset instances,
PostgreSQL): plain requests in Russian and English become the right tool with the right
arguments — names resolved through the read tools, environments as configured, SQL written for
a question — or one precise question; answers come in the question's language and say what
really happened."""

import uuid

from sstools.agent.language import language_of
from sstools.devstack.agentstack import AgentStack, Reply, dump, new_conversation
from sstools.ops.superset import dashboards
from sstools.ops.superset.client import SupersetClient


async def _dashboard_id(dev: SupersetClient, title: str) -> int:
    found = await dashboards.search(dev, text=title)
    return next(board.id for board in found.dashboards if board.title == title)


def _calls(reply: Reply) -> list[tuple[str, dict[str, object]]]:
    started = [(event["tool"], event["input"]) for event in reply.of("tool_start")]
    return started + [(card["tool_name"], card["tool_args"]) for card in reply.of("confirm_required")]


async def test_the_first_question_with_no_environment_works_in_the_default_one_and_says_so(
    agent_stack: AgentStack, conversation: str, dev: SupersetClient
) -> None:
    reply = await agent_stack.say("покажи дашборды", conversation, env_id="")
    assert reply.of("context") == [{"type": "context", "env_id": "dev", "env_source": "default"}], dump(reply)
    assert [(tool, args["env_id"]) for tool, args in _calls(reply)] == [("search_dashboards", "dev")]
    assert reply.state == "success"
    # what dev holds then: other tests of this stack may have added dashboards before
    assert f"Дашборды в dev: {(await dashboards.search(dev)).count}." in reply.text
    assert "| id |" in reply.text  # a table, not a JSON dump
    assert language_of(reply.text, "en") == "ru"
    assert "Field required" not in reply.text


async def test_deploy_by_name_in_english_and_russian_stops_at_its_card(
    agent_stack: AgentStack, dev: SupersetClient
) -> None:
    for text, title in (
        ("deploy the Orders and Events dashboard from dev to prod", "Orders and Events"),
        ("выкати дашборд Sales Overview из dev в прод", "Sales Overview"),
    ):
        reply = await agent_stack.say(text, new_conversation(), env_id="")
        (card,) = reply.of("confirm_required")
        assert card["tool_name"] == "deploy_dashboard", dump(reply)
        assert card["tool_args"] == {
            "env_id": "prod",
            "source_env": "dev",
            "dashboard_id": await _dashboard_id(dev, title),
        }
        assert reply.of("tool_start") == []  # the name, resolved from the live list: no call
        assert reply.state == "needs_confirmation"


async def test_a_card_asked_for_in_english_speaks_english_and_its_confirm_runs_it(
    agent_stack: AgentStack, dev: SupersetClient, prod: SupersetClient
) -> None:
    title = f"Release {uuid.uuid4().hex[:8]}"
    created = await dashboards.create(dev, title, None, True)
    conversation = new_conversation()
    # the page says Russian (no language given): the card follows the message
    paused = await agent_stack.say(f"deploy dashboard {created.id} from dev to prod", conversation, env_id="")
    (card,) = paused.of("confirm_required")
    assert card["prompt"] == "⚠️ Dangerous action: please confirm", dump(paused)
    confirmed = await agent_stack.say("", conversation, action="confirm")  # the answer has no words
    assert [event["tool"] for event in confirmed.of("tool_start")] == ["deploy_dashboard"], dump(confirmed)
    assert (await dashboards.search(prod, text=title)).count == 1


async def test_inline_sql_runs_and_a_described_question_becomes_a_count(agent_stack: AgentStack) -> None:
    inline = await agent_stack.say(
        "run this SQL on dev: SELECT count(*) FROM sales", new_conversation(), env_id=""
    )
    executed = [args for tool, args in _calls(inline) if tool == "superset_execute_sql"]
    assert [args["sql"] for args in executed] == ["SELECT count(*) FROM sales"], dump(inline)
    assert "400" in inline.text
    assert inline.state == "success"
    described = await agent_stack.say(
        "how many rows does the orders table have?", new_conversation(), env_id=""
    )
    executed = [args for tool, args in _calls(described) if tool == "superset_execute_sql"]
    assert [args["sql"] for args in executed] == ['SELECT COUNT(*) FROM "main"."orders"'], dump(described)
    assert "300" in described.text
    assert language_of(described.text, "ru") == "en"


async def test_a_question_in_words_runs_with_the_columns_the_table_really_has(
    agent_stack: AgentStack,
) -> None:
    # the orders table keeps its money in "total": no guessed "amount" reaches Superset
    reply = await agent_stack.say("какая средняя сумма заказа?", new_conversation(), env_id="dev")
    executed = [args for tool, args in _calls(reply) if tool == "superset_execute_sql"]
    assert [args["sql"] for args in executed] == ['SELECT AVG("total") FROM "main"."orders"'], dump(reply)
    assert [tool for tool, _ in _calls(reply)] == ["superset_execute_sql"]  # columns from the outline
    assert reply.state == "success"
    assert "1 row" in reply.text or "строк: 1" in reply.text


async def test_the_health_of_one_dashboard_reports_its_problem_as_an_issue(
    agent_stack: AgentStack, dev: SupersetClient
) -> None:
    reply = await agent_stack.say(
        "check the health of the Legacy KPIs dashboard", new_conversation(), env_id=""
    )
    health = [args for tool, args in _calls(reply) if tool == "get_health_summary"]
    assert health == [{"env_id": "dev", "dashboard_ids": [await _dashboard_id(dev, "Legacy KPIs")]}], dump(
        reply
    )
    assert "Legacy uptime" in reply.text
    assert reply.state == "issues_found"


async def test_starting_maintenance_on_prod_asks_to_confirm_a_start(agent_stack: AgentStack) -> None:
    reply = await agent_stack.say("start a maintenance window on prod", new_conversation(), env_id="dev")
    (card,) = reply.of("confirm_required")
    assert (card["tool_name"], card["tool_args"]["env_id"]) == ("start_maintenance", "prod"), dump(reply)


async def test_a_negated_action_is_not_proposed_and_the_rest_is_done(agent_stack: AgentStack) -> None:
    reply = await agent_stack.say(
        "don't deploy, just show me the Sales Overview dashboard", new_conversation(), env_id=""
    )
    assert reply.of("confirm_required") == [], dump(reply)
    assert [tool for tool, _ in _calls(reply)] == ["search_dashboards"]
    assert "Sales Overview" in reply.text


async def test_follow_ups_take_what_the_conversation_named(
    agent_stack: AgentStack, dev: SupersetClient
) -> None:
    conversation = new_conversation()
    first = await agent_stack.say("что сломано в dev?", conversation, env_id="")
    assert [tool for tool, _ in _calls(first)] == ["get_health_summary"], dump(first)
    elsewhere = await agent_stack.say("а на проде?", conversation, env_id="")
    assert _calls(elsewhere) == [("get_health_summary", {"env_id": "prod"})], dump(elsewhere)
    shown = await agent_stack.say("show me the Legacy KPIs dashboard", new_conversation(), env_id="")
    assert [tool for tool, _ in _calls(shown)] == ["search_dashboards"], dump(shown)
    conversation = new_conversation()
    await agent_stack.say("show me the Legacy KPIs dashboard", conversation, env_id="")
    deploy = await agent_stack.say("ok, deploy it to prod", conversation, env_id="")
    (card,) = deploy.of("confirm_required")
    assert card["tool_args"]["dashboard_id"] == await _dashboard_id(dev, "Legacy KPIs"), dump(deploy)


ORDERS = 'SELECT COUNT(*) FROM "main"."orders"'
SALES = 'SELECT COUNT(*) FROM "main"."sales"'


async def test_a_follow_up_changes_the_last_query(agent_stack: AgentStack) -> None:
    conversation = new_conversation()
    steps = (
        ("how many paid orders are there on prod?", "prod", ORDERS + """ WHERE "status" = 'paid'"""),
        ("а shipped?", "prod", ORDERS + """ WHERE "status" = 'shipped'"""),  # where it asked
        ("how many rows are in the sales table?", "prod", SALES),  # the environment carries on
        (
            "and group it by region",
            "prod",
            'SELECT "region", COUNT(*) FROM "main"."sales" GROUP BY "region" ORDER BY 2 DESC',
        ),
    )
    for text, env, sql in steps:
        reply = await agent_stack.say(text, conversation, env_id="")
        executed = [
            (args["env_id"], args["sql"]) for tool, args in _calls(reply) if tool == "superset_execute_sql"
        ]
        assert executed == [(env, sql)], dump(reply)
        assert reply.state == "success", dump(reply)
    assert "| region |" in reply.text  # the counts, a row a region


async def test_an_ambiguous_name_is_asked_about_not_guessed(
    agent_stack: AgentStack, dev: SupersetClient
) -> None:
    # never all digits: "Zeta 356909" would be read as dashboard 356909 (it was, once in CI)
    stem = f"Zeta Q{uuid.uuid4().hex[:6].upper()}"
    for side in ("North", "South"):
        await dashboards.create(dev, f"{stem} {side}", None, True)
    reply = await agent_stack.say(f"validate the {stem} dashboard", new_conversation(), env_id="")
    assert reply.state == "needs_clarification", dump(reply)
    assert reply.of("confirm_required") == []
    assert f"{stem} North" in reply.text
    assert f"{stem} South" in reply.text
    assert not [tool for tool, _ in _calls(reply) if tool == "run_llm_validation"]


async def test_a_validation_that_finds_errors_is_reported_as_such(
    agent_stack: AgentStack, dev: SupersetClient
) -> None:
    legacy = await _dashboard_id(dev, "Legacy KPIs")
    conversation = new_conversation()
    paused = await agent_stack.say(f"validate dashboard {legacy}", conversation, env_id="")
    assert [tool for tool, _ in _calls(paused)] == ["run_llm_validation"], dump(paused)  # it keeps a record
    reply = await agent_stack.say("", conversation, action="confirm", env_id="")
    assert reply.state == "issues_found", dump(reply)
    assert reply.text.startswith("Validation found"), reply.text
    assert "is not valid" in reply.text


async def test_a_rejected_card_is_reported_as_cancelled_in_the_question_s_language(
    agent_stack: AgentStack, conversation: str
) -> None:
    paused = await agent_stack.say("задеплой дашборд Sales Overview в прод", conversation, env_id="")
    assert paused.state == "needs_confirmation", dump(paused)
    rejected = await agent_stack.say("", conversation, action="reject", env_id="")
    assert rejected.state == "cancelled", dump(rejected)
    assert rejected.text.startswith("Отменено")
    assert rejected.of("tool_start") == []


async def test_a_russian_question_gets_a_russian_answer_and_an_english_one_english(
    agent_stack: AgentStack,
) -> None:
    russian = await agent_stack.say("какие окружения есть?", new_conversation(), env_id="")
    english = await agent_stack.say("which environments are there?", new_conversation(), env_id="")
    assert (
        [tool for tool, _ in _calls(russian)]
        == ["list_environments"]
        == [tool for tool, _ in _calls(english)]
    )
    assert language_of(russian.text, "en") == "ru", russian.text
    assert language_of(english.text, "ru") == "en", english.text
    capabilities = await agent_stack.say("что ты умеешь?", new_conversation(), env_id="")
    assert [tool for tool, _ in _calls(capabilities)] == ["show_capabilities"], dump(capabilities)
    assert "deploy_dashboard" in capabilities.text  # root is an admin
    viewer = await agent_stack.say("what can you do?", new_conversation(), env_id="", username="vera")
    assert "search_dashboards" in viewer.text, dump(viewer)
    assert "deploy_dashboard" not in viewer.text  # what this role may do, not everything
    assert language_of(viewer.text, "ru") == "en"
    assert capabilities.state == "success"
    assert language_of(capabilities.text, "en") == "ru"
