"""The chat model: any OpenAI-compatible endpoint through ``langchain-openai``, or the offline
planner when none is configured."""

from collections.abc import AsyncIterator
from typing import Any

import openai
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from sstools.agent.planner import OFFLINE_MODEL_NAME, OfflinePlanner
from sstools.agent.settings import AgentSettings
from sstools.agent.toolcalls import ToolCallStream, bound_tool_names

# Request fields LangChain has already made plain JSON, and the bulk of every request.
_JSON_READY = ("messages", "tools")
# What a model needs of an argument's schema to fill it. Bounds and patterns (ids up to 2**53,
# environment id patterns) cost a small model's prefill and help it in nothing: the gate and ops
# check every value against the full argument model anyway.
_SCHEMA_KEPT = ("type", "description", "enum", "default", "items", "properties", "required")
_SCHEMA_NESTED = ("items", "additionalProperties")
# Shapes the reduction does not read: such a schema goes out whole rather than lose its type.
_SCHEMA_UNREAD = ("$ref", "$defs", "allOf", "oneOf")


def compact_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool as ``bind_tools`` made it, with its parameters' schema reduced to what a
    model fills it by."""
    function = tool.get("function")
    if tool.get("type") != "function" or not isinstance(function, dict) or "parameters" not in function:
        return tool
    return {**tool, "function": {**function, "parameters": _compact_schema(function["parameters"])}}


def _compact_schema(node: dict[str, Any]) -> dict[str, Any]:
    options = node.get("anyOf")
    if isinstance(options, list):  # an optional argument: its one type that is not null
        present = [option for option in options if isinstance(option, dict) and option.get("type") != "null"]
        if len(present) != 1:
            return node  # a choice of types: only the whole schema says which
        node = {**present[0], **{key: value for key, value in node.items() if key != "anyOf"}}
    if any(key in node for key in _SCHEMA_UNREAD):
        return node
    compact: dict[str, Any] = {}
    for key in (*_SCHEMA_KEPT, *_SCHEMA_NESTED):
        value = node.get(key)
        if value is None or (key == "additionalProperties" and not isinstance(value, dict)):
            continue
        if key == "properties" and isinstance(value, dict):
            value = {name: _compact_schema(part) for name, part in value.items() if isinstance(part, dict)}
        elif key in _SCHEMA_NESTED and isinstance(value, dict):
            value = _compact_schema(value)
        compact[key] = value
    return compact


class PlainPayloadChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` sending its messages and tools as ``extra_body``: the OpenAI SDK walks every
    typed field against its TypedDicts before sending (~0.2 ms per message, without yielding
    the event loop, so 4–8 ms a call at a 4 000-token history); ``extra_body`` goes out as given,
    and the request on the wire is the same JSON. Its stream reaches the agent with every tool
    call runnable, whichever server sent it (:meth:`_astream`)."""

    def _get_request_payload(
        self, input_: LanguageModelInput, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        if "messages" not in payload:  # the Responses API has its own shape; leave it alone
            return payload
        plain = {key: payload.pop(key) for key in _JSON_READY if key in payload}
        if "tools" in plain:
            plain["tools"] = [compact_tool(tool) for tool in plain["tools"]]
        payload["messages"] = []  # required by the SDK's signature; extra_body's list replaces it
        if "max_completion_tokens" in payload:
            # OpenAI's newer name; Ollama, llama.cpp and older servers read only max_tokens
            plain["max_tokens"] = payload["max_completion_tokens"]
        payload["extra_body"] = {**(payload.get("extra_body") or {}), **plain}
        return payload

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        """The server's chunks with each tool call made whole, whatever server it is
        (:mod:`sstools.agent.toolcalls`). Tokens are announced only once rewritten (by LangChain
        from what this yields, or here when handed a run manager; never by ``ChatOpenAI`` from
        the raw chunks), so a call a model wrote as text is never shown as text. The agent calls
        the model asynchronously only: the synchronous ``_stream`` is left as it is."""
        calls = ToolCallStream(bound_tool_names(kwargs.get("tools")))
        async for chunk in super()._astream(messages, stop, **kwargs):
            yield await _announced(calls.rewrite(chunk), run_manager)
        if last := calls.close():
            yield await _announced(last, run_manager)


async def _announced(
    chunk: ChatGenerationChunk, run_manager: AsyncCallbackManagerForLLMRun | None
) -> ChatGenerationChunk:
    """The chunk, its token told to the run's callbacks as ``ChatOpenAI`` would have."""
    if run_manager:
        await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
    return chunk


def chat_model(
    settings: AgentSettings, http: openai.DefaultAsyncHttpxClient
) -> tuple[BaseChatModel, str, str]:
    """The configured OpenAI-compatible model, or the offline planner when none is set; with
    its name and its provider's (as GenAI spans name them). ``http`` is the caller's to close:
    without it langchain-openai shares one cached client per URL across the process, whose
    pooled connections outlive the event loop that opened them."""
    if not (settings.llm_base_url and settings.llm_model):
        offline = OfflinePlanner(words_per_second=settings.offline_words_per_second)
        return offline, OFFLINE_MODEL_NAME, "sstools"
    model = PlainPayloadChatOpenAI(
        base_url=settings.llm_base_url,
        # Local OpenAI-compatible servers often want no key; the client insists on one.
        api_key=settings.llm_api_key if settings.llm_api_key.get_secret_value() else SecretStr("none"),
        model=settings.llm_model,
        timeout=settings.llm_timeout_seconds,
        max_tokens=settings.llm_max_tokens,
        temperature=settings.llm_temperature,
        stop=settings.llm_stop or None,
        max_retries=1,
        streaming=True,
        # Ask for the usage chunk (stream_options.include_usage) that the GenAI token metrics
        # read: LangChain asks only of OpenAI's own URL. Servers without it just leave it out.
        stream_usage=True,
        http_async_client=http,
    )
    return model, settings.llm_model, "openai"
