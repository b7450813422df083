"""The chat model: any OpenAI-compatible endpoint through ``langchain-openai``, or the offline
planner when none is configured."""

from typing import Any

import openai
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from sstools.agent.planner import OFFLINE_MODEL_NAME, OfflinePlanner
from sstools.agent.settings import AgentSettings

# Request fields LangChain has already made plain JSON, and the bulk of every request.
_JSON_READY = ("messages", "tools")


class PlainPayloadChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` sending its messages and tools as ``extra_body``: the OpenAI SDK walks every
    typed field against its TypedDicts before sending (~0.2 ms per message, without yielding
    the event loop, so 4–8 ms a call at a 4 000-token history); ``extra_body`` goes out as given,
    and the request on the wire is the same JSON."""

    def _get_request_payload(
        self, input_: LanguageModelInput, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        if "messages" not in payload:  # the Responses API has its own shape; leave it alone
            return payload
        plain = {key: payload.pop(key) for key in _JSON_READY if key in payload}
        payload["messages"] = []  # required by the SDK's signature; extra_body's list replaces it
        payload["extra_body"] = {**(payload.get("extra_body") or {}), **plain}
        return payload


def chat_model(
    settings: AgentSettings, http: openai.DefaultAsyncHttpxClient
) -> tuple[BaseChatModel, str, str]:
    """The configured OpenAI-compatible model, or the offline planner when none is set; with
    its name and its provider's (as GenAI spans name them). ``http`` is the caller's to close:
    without it langchain-openai shares one cached client per URL across the process, whose
    pooled connections outlive the event loop that opened them."""
    if not (settings.llm_base_url and settings.llm_model):
        planner = OfflinePlanner(words_per_second=settings.offline_words_per_second)
        return planner, OFFLINE_MODEL_NAME, "sstools"
    model = PlainPayloadChatOpenAI(
        base_url=settings.llm_base_url,
        # Local OpenAI-compatible servers often want no key; the client insists on one.
        api_key=settings.llm_api_key if settings.llm_api_key.get_secret_value() else SecretStr("none"),
        model=settings.llm_model,
        timeout=settings.llm_timeout_seconds,
        max_retries=1,
        streaming=True,
        http_async_client=http,
    )
    return model, settings.llm_model, "openai"
