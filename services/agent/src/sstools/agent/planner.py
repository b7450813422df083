"""The offline model: a deterministic planner that is a LangChain chat model, so a stack with no
LLM endpoint runs through the very same graph, confirmation and persistence as with one.

It reads the tools it was bound to in the router's order and calls the first ones whose
required arguments it can fill from the conversation: numbers (ids), environment names,
quoted names, SQL, and — for a pronoun ("для него") — the last id the thread mentioned.
Read tools may go two at a time; a write goes alone. Once tool results are in, it answers
from them with a short template, streamed word by word. Nothing here is learned or random.
"""

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from sstools.agent.fence import DOCUMENT, TOOL_RESULT, unfenced
from sstools.common.catalogue import ALWAYS_OFFERED, Tier, tool
from sstools.common.policy import normalise_env

NEEDS_CLARIFICATION = "needs_clarification"  # in response_metadata: the model asked back
OFFLINE_MODEL_NAME = "sstools-offline-planner"

_NUMBER = re.compile(r"(?<![\w.])(\d{1,9})(?![\w.])")
_QUOTED = re.compile(r"[«\"“']([^«»\"“”']{1,200})[»\"”']")
_SQL = re.compile(
    r"\b(select|with|insert|update|delete|create|drop|alter|truncate)\b.*", re.IGNORECASE | re.DOTALL
)
_WORD = re.compile(r"[\w-]+", re.UNICODE)
DOCUMENT_EXCERPT_CHARS = 400
# A message about its attachment ("что в этом документе?", "summarise the file") is answered from it.
_ABOUT_ATTACHMENT = re.compile(r"документ|файл|вложени|отч[её]т|document|file|attach|report", re.IGNORECASE)
_ENV_WORDS = {
    "прод": "prod",
    "проде": "prod",
    "продакшн": "prod",
    "продакшен": "prod",
    "дев": "dev",
    "деве": "dev",
    "стейджинг": "staging",
    "стейдж": "staging",
}
_PRONOUNS = {
    "него",
    "нему",
    "нём",
    "нем",
    "его",
    "ним",
    "it",
    "its",
    "that",
    "this",
    "him",
    "them",
    "этот",
    "этого",
}


class Extracted(BaseModel):
    numbers: list[int] = []
    env: str | None = None
    source_env: str | None = None
    quoted: list[str] = []
    sql: str | None = None


def extract(text: str, history: Sequence[BaseMessage] = ()) -> Extracted:
    """What a message says, with a pronoun's referent taken from earlier user messages."""
    sql_match = _SQL.search(text)
    sql = sql_match.group(0).strip() if sql_match else None
    plain = text[: sql_match.start()] if sql_match else text
    envs = []
    for word in _WORD.findall(plain.lower()):
        env = _ENV_WORDS.get(word) or (normalise_env(word) if len(word) <= 12 else None)
        if env and env not in envs:
            envs.append(env)
    numbers = [int(number) for number in _NUMBER.findall(plain)]
    if not numbers and _PRONOUNS & set(_WORD.findall(plain.lower())):
        for earlier in reversed(history):
            if (
                isinstance(earlier, HumanMessage)
                and isinstance(earlier.content, str)
                and not earlier.additional_kwargs.get("document")  # a file's numbers are data, not a referent
            ):
                found = _NUMBER.findall(earlier.content)
                if found:
                    numbers = [int(found[0])]
                    break
    # "из dev в prod": the last environment named is the target, an earlier one the source.
    target = envs[-1] if envs else None
    source = envs[0] if len(envs) > 1 else None
    return Extracted(numbers=numbers, env=target, source_env=source, quoted=_QUOTED.findall(plain), sql=sql)


def arguments_for(schema: type[BaseModel], facts: Extracted, text: str) -> dict[str, Any] | None:
    """The tool's arguments from the facts, or None if a required one cannot be filled."""
    fields = {
        key: info for key, info in schema.model_fields.items() if key not in ("tool_call_id", "confirmed")
    }
    values: dict[str, Any] = {}
    numbers = list(facts.numbers)
    quoted = list(facts.quoted)
    for key, info in fields.items():
        alias = info.alias or key
        value: Any = None
        if key == "env_id":
            value = facts.env
        elif key == "source_env":
            value = facts.source_env
        elif key in ("dashboard_id", "database_id", "dataset_id") and numbers:
            value = numbers.pop(0)
        elif key in ("dashboard_ids",) and numbers:
            value, numbers = numbers, []
        elif key == "sql":
            value = facts.sql
        elif key == "task_id":
            match = re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", text)
            value = match.group(0) if match else None
        elif key in ("title", "name", "reason", "message", "query", "table_name") and quoted:
            value = quoted.pop(0)
        if value is not None:
            values[alias] = value
        elif info.is_required() and key != "env_id":  # the env may come from the page's context
            return None
    return values


def _summary(name: str, content: str) -> str:
    """One short line per tool result."""
    try:
        result = json.loads(content)
    except ValueError:
        return f"{name}: {content[:300]}"
    if isinstance(result, dict) and isinstance(result.get("error"), dict):
        error = result["error"]
        return f"{name} failed ({error.get('code', 'error')}): {error.get('message', '')}".strip()
    if name == "search_dashboards" and isinstance(result, dict):
        titles = ", ".join(
            f"{board['title']} (id {board['id']})" for board in result.get("dashboards", [])[:10]
        )
        return f"Dashboards found in {result.get('env_id')}: {result.get('count', 0)}. {titles}"
    if name == "get_health_summary" and isinstance(result, dict):
        broken = result.get("broken_charts", [])
        if not broken:
            return f"Health of {result.get('env_id')}: all {result.get('charts_checked', 0)} charts work."
        items = "; ".join(
            f"{chart['chart_name']} (id {chart['chart_id']}): {chart['error']}" for chart in broken
        )
        return f"Health of {result.get('env_id')}: {len(broken)} broken chart(s): {items}"
    if isinstance(result, dict) and "status" in result and "kind" in result:
        return f"Task {result.get('id')} ({result['kind']}): {result['status']}."
    text = json.dumps(result, ensure_ascii=False)
    return f"{name}: {text[:400]}{'…' if len(text) > 400 else ''}"


class OfflinePlanner(BaseChatModel):
    tools: list[BaseTool] = Field(default_factory=list)
    # A real model streams 20–80 tokens a second; the planner answers at once unless paced, and a
    # paced answer is one a person (or a browser test) can stop halfway.
    words_per_second: float = Field(default=0.0, ge=0)

    @property
    def _llm_type(self) -> str:
        return OFFLINE_MODEL_NAME

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> "OfflinePlanner":
        offered = [item for item in tools if isinstance(item, BaseTool)]
        return OfflinePlanner(tools=offered, words_per_second=self.words_per_second)

    def plan(self, messages: Sequence[BaseMessage]) -> AIMessage:
        last = messages[-1] if messages else HumanMessage("")
        if isinstance(last, ToolMessage):
            results = []
            for message in reversed(messages):
                if not isinstance(message, ToolMessage):
                    break
                results.append(_summary(message.name or "tool", unfenced(TOOL_RESULT, str(message.content))))
            return AIMessage("\n".join(reversed(results)))
        text = str(last.content) if isinstance(last, HumanMessage) else ""
        documents = _turn_documents(messages)
        if documents and _ABOUT_ATTACHMENT.search(text):
            return AIMessage(_document_answer(documents))
        facts = extract(text, messages[:-1])
        calls: list[dict[str, Any]] = []
        for candidate in self.tools:
            if candidate.name == ALWAYS_OFFERED and len(self.tools) > 1:
                continue
            schema = candidate.args_schema
            if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
                continue
            arguments = arguments_for(schema, facts, text)
            if arguments is None:
                continue
            reading = tool(candidate.name).policy.tier is Tier.READ
            if not reading and calls:
                break  # a write goes alone, after the reads it may need
            calls.append({"name": candidate.name, "args": arguments, "id": f"call_{uuid.uuid4().hex[:16]}"})
            if not reading or len(calls) == 2:
                break
        if not calls and documents:
            return AIMessage(_document_answer(documents))
        if not calls:
            missing = self.tools[0].name if self.tools else "a tool"
            return AIMessage(
                f"I need more detail to run {missing}: which dashboard (its id), which environment, "
                "or the exact name in quotes? / Уточните: id дашборда, окружение или имя в кавычках.",
                response_metadata={NEEDS_CLARIFICATION: True},
            )
        return AIMessage("", tool_calls=calls)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self.plan(messages)
        message.id = f"run-{uuid.uuid4().hex}"
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield from _chunks(self.plan(messages))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in _chunks(self.plan(messages)):
            if chunk.text and self.words_per_second:
                await asyncio.sleep(1 / self.words_per_second)
            if run_manager is not None and chunk.text:
                await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk


def _turn_documents(messages: Sequence[BaseMessage]) -> list[HumanMessage]:
    """The files attached to this turn: the document messages right before its text."""
    found: list[HumanMessage] = []
    for message in reversed(messages[:-1]):
        if not (isinstance(message, HumanMessage) and message.additional_kwargs.get("document")):
            break
        found.append(message)
    return found[::-1]


def _document_answer(documents: Sequence[HumanMessage]) -> str:
    """What the offline model can do with a file: say what it read, quoting its beginning (as
    data: nothing in it is followed)."""
    lines = []
    for document in documents:
        body = " ".join(unfenced(DOCUMENT, str(document.content)).split())
        excerpt = body[:DOCUMENT_EXCERPT_CHARS] + ("…" if len(body) > DOCUMENT_EXCERPT_CHARS else "")
        name = document.additional_kwargs["document"]
        lines.append(f"Прочитал {name} / Read {name}: «{excerpt}»")
    return "\n".join(lines)


def _chunks(message: AIMessage) -> Iterator[ChatGenerationChunk]:
    """The answer word by word, then its tool calls, all under one message id."""
    message_id = f"run-{uuid.uuid4().hex}"
    for word in re.findall(r"\S+\s*", str(message.content)):
        yield ChatGenerationChunk(message=AIMessageChunk(content=word, id=message_id))
    for index, call in enumerate(message.tool_calls):
        chunk = tool_call_chunk(name=call["name"], args=json.dumps(call["args"]), id=call["id"], index=index)
        yield ChatGenerationChunk(message=AIMessageChunk(content="", id=message_id, tool_call_chunks=[chunk]))
    closing = AIMessageChunk(content="", id=message_id, response_metadata=dict(message.response_metadata))
    yield ChatGenerationChunk(message=closing)
