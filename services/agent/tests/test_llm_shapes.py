"""The agent's model object against the scripted server replaying the streamed chunks of the
servers it may sit behind (:class:`Shape`; each names the server and version it copies). Every
shape must end as an ``AIMessage`` the graph can run: the calls' names, parsed arguments,
non-empty distinct ids, nothing in ``invalid_tool_calls``; and a call a small model wrote in
its text becomes a call, unshown, only when it names a bound tool."""

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool

from sstools.agent.llm import chat_model, compact_tool
from sstools.agent.settings import AgentSettings
from sstools.agent.tools import tool_schema
from sstools.common.catalogue import ARGS
from sstools.devstack.agentstack import CONFIRMATION_SECRET
from sstools.devstack.fake_llm import FakeLlm, Reply, Shape, ToolCall
from sstools.devstack.keys import PUBLIC_KEYS
from sstools.devstack.testing import serving


def _tool(name: str) -> dict[str, Any]:
    properties = {"env_id": {"type": "string"}, "query": {"type": "string"}}
    parameters = {"type": "object", "properties": properties, "required": ["env_id"]}
    return {"type": "function", "function": {"name": name, "description": name, "parameters": parameters}}


TOOLS = [_tool("search_dashboards"), _tool("get_health_summary")]
# Cyrillic in a string the servers cut into fragments, as the agent's users write.
SEARCH = ToolCall("search_dashboards", {"env_id": "dev", "query": "выручка по регионам"})
HEALTH = ToolCall("get_health_summary", {"env_id": "prod"})


class _Tokens(AsyncCallbackHandler):
    """The tokens the model announces: what the graph streams to the person."""

    def __init__(self) -> None:
        self.tokens: list[str] = []

    async def on_llm_new_token(self, token: str | list[str | dict[str, Any]], **kwargs: Any) -> None:
        assert isinstance(token, str)  # chat completions' content is text
        self.tokens.append(token)


@pytest.fixture
async def model(llm: FakeLlm) -> AsyncIterator[BaseChatModel]:
    """The agent's model, as :func:`chat_model` builds it, against the scripted server (``llm``,
    from :mod:`sstools.devstack.agentstack`) on a loopback socket: no other service is needed."""
    async with serving(llm.app()) as url, openai.DefaultAsyncHttpxClient() as http:
        settings = AgentSettings(
            jwt_public_keys=PUBLIC_KEYS,
            confirmation_secret=CONFIRMATION_SECRET,
            llm_base_url=f"{url}/v1",
            llm_model=llm.model,
        )
        chat, _, _ = chat_model(settings, http)
        yield chat


async def _answer(model: BaseChatModel, **bind: Any) -> tuple[AIMessage, str]:
    """The model's answer as the graph asks for it (tools bound, ``ainvoke``), and the text it
    streamed on the way."""
    tokens = _Tokens()
    answer = await model.bind_tools(TOOLS, **bind).ainvoke("что с дашбордами?", {"callbacks": [tokens]})
    assert isinstance(answer, AIMessage)
    return answer, "".join(tokens.tokens)


def _runnable(answer: AIMessage) -> list[str]:
    """The answer's call ids, once checked to be what the graph needs."""
    assert answer.invalid_tool_calls == []
    ids = [str(call["id"] or "") for call in answer.tool_calls]
    assert all(ids), answer.tool_calls
    assert len(set(ids)) == len(ids), ids
    return ids


# (shape, the server's ids reach the agent as sent, a usage chunk answers include_usage)
SHAPES = [
    pytest.param(Shape.SCRIPTED, True, False, id="scripted-default"),
    pytest.param(Shape.OPENAI, True, True, id="openai-gpt-4o-2024-08-06"),
    pytest.param(Shape.VLLM_HERMES, False, True, id="vllm-hermes-parser@00854322"),
    pytest.param(Shape.VLLM_QWEN3_CODER, False, True, id="vllm-0.10-qwen3_coder-parser"),
    pytest.param(Shape.OLLAMA, True, True, id="ollama-0.12.6-template-parser"),
    pytest.param(Shape.OLLAMA_INDEX_ZERO, True, True, id="ollama-0.12.6-builtin-parser-index-0"),
    pytest.param(Shape.OLLAMA_LEGACY, True, False, id="ollama-0.4.6-no-index"),
    pytest.param(Shape.LLAMA_CPP, False, True, id="llama.cpp-b6xxx"),
    pytest.param(Shape.GEMINI, True, False, id="gemini-openai-endpoint-2026-split-no-index"),
    pytest.param(Shape.NO_ID, False, True, id="stepfun-step-router-v1-no-id"),
]


@pytest.mark.parametrize(("shape", "keeps_ids", "usage"), SHAPES)
async def test_parallel_calls_in_each_servers_chunks_reach_the_agent_runnable(
    model: BaseChatModel, llm: FakeLlm, shape: Shape, keeps_ids: bool, usage: bool
) -> None:
    """Two calls in one answer, streamed as the server the shape names streams them."""
    llm.says(Reply(tool_calls=(SEARCH, HEALTH), shape=shape))
    answer, shown = await _answer(model, stream_usage=True)
    ids = _runnable(answer)
    assert [(call["name"], call["args"]) for call in answer.tool_calls] == [
        ("search_dashboards", {"env_id": "dev", "query": "выручка по регионам"}),
        ("get_health_summary", {"env_id": "prod"}),
    ]
    if keeps_ids:
        assert ids == [SEARCH.id, HEALTH.id]  # the server's ids are the ones its results go back with
    assert not shown.strip()
    assert llm.requests[-1]["stream_options"] == {"include_usage": True}
    assert (answer.usage_metadata is not None) is usage


async def test_each_answer_is_a_message_of_its_own_whatever_id_the_server_gives_it(
    model: BaseChatModel, llm: FakeLlm
) -> None:
    """The thread keeps one message per id, and the gate keys each call by the answer that asked
    for it: a server that sends the same response id (and call id) every time must not make two
    answers one. (LangChain names each answer by its own run, not by the server's id.)"""
    llm.says(*[Reply(tool_calls=(SEARCH,), response_id="chatcmpl-0")] * 2)
    first, _ = await _answer(model)
    second, _ = await _answer(model)
    assert _runnable(first) == _runnable(second) == [SEARCH.id]
    assert None not in (first.id, second.id)
    assert first.id != second.id


@pytest.mark.parametrize(
    ("reply", "calls", "text"),
    [
        pytest.param(
            Reply(
                content='Сейчас посмотрю.\n\n```json\n{"name": "search_dashboards", '
                '"arguments": {"env_id": "dev"}}\n```\n',
                chunk_size=3,
                shape=Shape.LLAMA_CPP,
            ),
            [("search_dashboards", {"env_id": "dev"})],
            "Сейчас посмотрю.",
            id="json-block-qwen2.5-coder-1.5b-on-llama.cpp-xllamacpp",
        ),
        pytest.param(
            Reply(
                content='<tool_call>\n{"name": "search_dashboards", "arguments": {"env_id": "dev", '
                '"query": "продажи"}}\n</tool_call>\n<tool_call>\n{"name": "get_health_summary", '
                '"arguments": {"env_id": "prod"}}\n</tool_call>',
                chunk_size=2,
                shape=Shape.VLLM_HERMES,
            ),
            [
                ("search_dashboards", {"env_id": "dev", "query": "продажи"}),
                ("get_health_summary", {"env_id": "prod"}),
            ],
            "",
            id="tool_call-tags-vllm-0.11.0-hermes-with-reasoning-parser-issue-28297",
        ),
        pytest.param(
            Reply(
                content='<tools>\n{"name": "get_health_summary", '
                '"arguments": "{\\"env_id\\": \\"dev\\"}"}\n</tools>',
                chunk_size=5,
                shape=Shape.LLAMA_CPP,
            ),
            [("get_health_summary", {"env_id": "dev"})],
            "",
            id="tools-tags-qwen2.5-coder-1.5b-on-llama.cpp-xllamacpp",
        ),
        pytest.param(
            Reply(
                content='{"name": "search_dashboards", "parameters": {"env_id": "prod"}}',
                chunk_size=4,
                shape=Shape.OLLAMA,
            ),
            [("search_dashboards", {"env_id": "prod"})],
            "",
            id="bare-json-llama-3.2-format-with-no-tool-parser",
        ),
        pytest.param(
            Reply(
                content='<tools>\n{"name": "search_dashboards", "arguments": {"env_id": "dev"}}\n'
                '{"name": "get_health_summary", "arguments": {"env_id": "prod"}}\n</tools>',
                chunk_size=3,
                shape=Shape.LLAMA_CPP,
            ),
            [("search_dashboards", {"env_id": "dev"}), ("get_health_summary", {"env_id": "prod"})],
            "",
            id="tools-tags-two-objects-on-separate-lines-qwen2.5-coder-1.5b",
        ),
        pytest.param(
            Reply(
                content='{"name": "search_dashboards", "arguments": {"env_id": "dev"}}\n'
                '{"name": "get_health_summary", "arguments": {}}',
                chunk_size=4,
                shape=Shape.LLAMA_CPP,
            ),
            [("search_dashboards", {"env_id": "dev"}), ("get_health_summary", {})],
            "",
            id="bare-json-two-objects-on-separate-lines",
        ),
        pytest.param(
            Reply(
                content='Проверю.\n```json\n{"function": "get_health_summary", '
                '"arguments": {"env_id": "dev"}}\n```',
                chunk_size=3,
                shape=Shape.LLAMA_CPP,
            ),
            [("get_health_summary", {"env_id": "dev"})],
            "Проверю.",
            id="function-in-place-of-name-qwen2.5-coder-1.5b",
        ),
        pytest.param(
            Reply(
                content='{"type": "function", "function": {"name": "search_dashboards", '
                '"arguments": "{\\"env_id\\": \\"prod\\"}"}}',
                chunk_size=5,
                shape=Shape.OLLAMA,
            ),
            [("search_dashboards", {"env_id": "prod"})],
            "",
            id="openai-function-object-written-as-text",
        ),
        pytest.param(
            Reply(
                content='```json\n{\n  // the dashboards of dev\n  "name": "search_dashboards",\n'
                '  "arguments": {"env_id": "dev", "query": "a // b"} /* a slash in a string stays */\n}\n```',
                chunk_size=3,
                shape=Shape.LLAMA_CPP,
            ),
            [("search_dashboards", {"env_id": "dev", "query": "a // b"})],
            "",
            id="json-with-comments-qwen2.5-coder-1.5b",
        ),
    ],
)
async def test_a_call_written_in_the_text_becomes_a_call_and_is_not_shown(
    model: BaseChatModel, llm: FakeLlm, reply: Reply, calls: list[tuple[str, dict[str, Any]]], text: str
) -> None:
    """Small local models (see /work/shared/notes/local-llm.md) and servers started without a
    tool parser leave the call in the text, in the forms the ids name."""
    llm.says(reply)
    answer, shown = await _answer(model)
    _runnable(answer)
    assert [(call["name"], call["args"]) for call in answer.tool_calls] == calls
    assert answer.content == text
    assert shown == text


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("Всё в порядке: три дашборда из трёх работают, ошибок нет.", id="plain"),
        pytest.param(
            'Такой вызов сделал бы деплой:\n```json\n{"name": "deploy_dashboard", "arguments": '
            '{"dashboard_id": 1, "env_id": "prod"}}\n```\nно этого инструмента сейчас нет.',
            id="json-block-naming-a-tool-not-bound",
        ),
        pytest.param("Запрос:\n```sql\nSELECT count(*) FROM slices;\n```\nГотово.", id="sql-code-block"),
        pytest.param('{"env_id": "dev", "charts": 3}', id="json-that-is-no-call"),
        pytest.param(
            '<tools>\n{"name": "search_dashboards", "arguments": {"env_id": "dev"}}\nи ещё кое-что\n</tools>',
            id="tools-block-with-more-than-calls",
        ),
        pytest.param(
            '{"name": "search_dashboards", "arguments": {"env_id": "dev"}}\n'
            '{"name": "rm_rf", "arguments": {}}',
            id="calls-one-of-which-is-not-bound",
        ),
    ],
)
async def test_text_that_is_no_call_to_a_bound_tool_stays_text(
    model: BaseChatModel, llm: FakeLlm, content: str
) -> None:
    llm.says(Reply(content=content, chunk_size=3, shape=Shape.OPENAI))
    answer, shown = await _answer(model)
    assert answer.tool_calls == []
    assert answer.content == content
    assert shown == content


async def test_plain_text_streams_as_it_comes(model: BaseChatModel, llm: FakeLlm) -> None:
    """Only what may be a call is held back: an answer's words go out as they arrive (but for
    the white space at the end of each piece, sent with the next one)."""
    content = "Всё в порядке: три дашборда из трёх работают, ошибок нет."
    llm.says(Reply(content=content, chunk_size=3, shape=Shape.VLLM_HERMES))
    tokens = _Tokens()
    await model.bind_tools(TOOLS).ainvoke("как дела?", {"callbacks": [tokens]})
    assert len([token for token in tokens.tokens if token]) >= len(content) // 3 - 1


async def test_every_request_bounds_what_the_model_may_generate(model: BaseChatModel, llm: FakeLlm) -> None:
    """A small local model asked without a bound once generated for 7 minutes, holding the
    server's only slot."""
    llm.says(Reply(content="Готово."))
    await _answer(model)
    (asked,) = llm.requests
    limit = AgentSettings.model_fields["llm_max_tokens"].default
    assert (asked["max_tokens"], asked["max_completion_tokens"], asked["temperature"]) == (limit, limit, 0.0)
    # nor may it go on past its turn's end to write the person's next message
    assert asked["stop"] == ["<|im_start|>", "<|start_header_id|>", "<start_of_turn>", "[INST]"]


async def test_tools_reach_the_model_with_what_fills_them_and_no_bounds(
    model: BaseChatModel, llm: FakeLlm
) -> None:
    """Bounds and patterns cost a small model's prefill and help it in nothing: the gate checks
    every value against the full argument model."""

    async def run(**values: Any) -> str:
        return ""

    sql = StructuredTool.from_function(
        coroutine=run,
        name="superset_execute_sql",
        description="Run SQL.",
        args_schema=tool_schema(ARGS["superset_execute_sql"]),
    )
    llm.says(Reply(content="Готово."))
    await model.bind_tools([sql]).ainvoke("сколько заказов?")
    env = "Target environment id, e.g. dev, staging, prod."
    (asked,) = llm.requests
    (sent,) = asked["tools"]
    assert sent == {
        "type": "function",
        "function": {
            "name": "superset_execute_sql",
            "description": "Run SQL.",
            "parameters": {
                "type": "object",
                "properties": {
                    "database_id": {"type": "integer", "description": "Superset database id."},
                    "sql": {"type": "string", "description": "One SQL statement."},
                    "schema_name": {"type": "string", "description": "Schema."},
                    "limit": {"type": "integer", "description": "Most rows returned.", "default": 100},
                    "env_id": {"type": "string", "description": env},
                },
                "required": ["database_id", "sql", "env_id"],
            },
        },
    }


@pytest.mark.parametrize(
    "schema",
    [
        {"anyOf": [{"type": "integer"}, {"type": "string"}], "description": "An id or a name."},
        {"$ref": "#/$defs/Mapping", "description": "Which database becomes which."},
        {"allOf": [{"type": "string"}, {"maxLength": 5}]},
    ],
    ids=["choice-of-types", "reference", "all-of"],
)
def test_an_argument_schema_the_reduction_does_not_read_goes_out_whole(schema: dict[str, Any]) -> None:
    parameters = {"type": "object", "properties": {"value": schema}, "required": ["value"]}
    tool = {"type": "function", "function": {"name": "t", "description": "t", "parameters": parameters}}
    assert compact_tool(tool)["function"]["parameters"]["properties"]["value"] == schema
