"""The offline model: a deterministic planner that is a LangChain chat model, so a stack with no
LLM endpoint runs through the very same graph, confirmation and persistence as with one.

It reads the turn's message (:mod:`.reading`), decides the next step over the live system the graph
hands it (:data:`GROUND`) and what the turn's calls returned so far (:mod:`.steps`) — the tool whose
declared words the message affirms with its frame filled, or one precise question — and once the
call has a result, answers from it in the person's language, streamed word by word. It reads the
live system, so it answers asynchronously only. Nothing here is learned or random.
"""

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, UsageMetadata
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import BaseTool
from pydantic import Field

from sstools.agent.context import TurnContext, context_in
from sstools.agent.fence import DOCUMENT, OUTSIDE_DATA, unfenced
from sstools.agent.language import language_of
from sstools.agent.planner.reading import read
from sstools.agent.planner.steps import THREAD_KEY, Done, Ground, Planner, Reply, earlier_thread, turn_calls

NEEDS_CLARIFICATION = "needs_clarification"  # in response_metadata: the model asked back
OFFLINE_MODEL_NAME = "sstools-offline-planner"
# The live system as the turn's person sees it, for the model call the graph makes in this task.
GROUND: ContextVar[Ground | None] = ContextVar("sstools_ground", default=None)
DOCUMENT_EXCERPT_CHARS = 400
# A message about its attachment ("что в этом документе?", "summarise the file", an image's
# words) is answered from it.
_ABOUT_ATTACHMENT = re.compile(
    r"документ|файл|вложени|отч[её]т|скрин\w*|картинк\w*|изображени\w*|снимок|снимк\w+|фото\w*"
    r"|document|file|attach|report|screen\s?shot|image|picture|photo",
    re.IGNORECASE,
)


def _turn_start(messages: Sequence[BaseMessage]) -> int:
    """Where the turn's own message is: the last human message that is not an attached file."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and not message.additional_kwargs.get("document"):
            return index
    return len(messages)


def _with_question_answered(messages: Sequence[BaseMessage], start: int) -> str:
    """The turn's words; when the planner's last answer asked back, the request it asked about
    with this answer after it (a deploy that named no dashboard, then the dashboard's name)."""
    text = str(messages[start].content)
    earlier = messages[:start]
    asked = next((message for message in reversed(earlier) if isinstance(message, AIMessage)), None)
    if asked is None or not asked.response_metadata.get(NEEDS_CLARIFICATION):
        return text
    before = _turn_start(earlier)
    return f"{earlier[before].content}. {text}" if before < len(earlier) else text


Turn = tuple[list[BaseMessage], TurnContext, int, str, list[HumanMessage], list[Done]]


def turn_of(messages: Sequence[BaseMessage]) -> Turn | AIMessage:
    """The turn a planner reads — the thread without outside data, its context, where the turn's
    message is, its words, its files and the calls made since — or its answer when there is
    nothing to plan (no message; a question about an attached file)."""
    # The planner reads the page from the turn's context data, and tool results only.
    messages = [message for message in messages if not message.additional_kwargs.get(OUTSIDE_DATA)]
    context = context_in(messages) or TurnContext()
    start = _turn_start(messages)
    if start == len(messages):
        return AIMessage("")
    text = _with_question_answered(messages, start)
    documents = _turn_documents(messages[: start + 1])
    done = turn_calls(messages[start + 1 :])
    if documents and not done and _ABOUT_ATTACHMENT.search(text):
        return AIMessage(_document_answer(documents))
    return messages, context, start, text, documents, done


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

    async def aplan(self, messages: Sequence[BaseMessage]) -> AIMessage:
        turn = turn_of(messages)
        if isinstance(turn, AIMessage):
            return turn
        messages, context, start, text, documents, done = turn
        lang = language_of(str(messages[start].content), language_of(text, context.lang))
        routed = [tool.name for tool in self.tools]
        planner = Planner(
            read(text, context.environments),
            context,
            lang,
            routed,
            earlier_thread(messages[:start]),
            GROUND.get(),
        )
        if done:  # what this turn's call was asked for, to say of its result
            planner.kept = earlier_thread(messages)
        step = await (planner.after(done) if done else planner.next_step())
        if isinstance(step, Reply):
            if documents and not done:
                return AIMessage(_document_answer(documents))
            kept = {THREAD_KEY: planner.kept.kept()}  # what the answer found, for a follow-up
            asked = {NEEDS_CLARIFICATION: True} if step.asks_back else {}
            return AIMessage(step.text, response_metadata=kept | asked)
        calls = [
            {"name": call.tool, "args": call.args, "id": f"call_{uuid.uuid4().hex[:16]}"} for call in step
        ]
        return AIMessage("", tool_calls=calls, response_metadata={THREAD_KEY: planner.kept.kept()})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError("the offline planner reads the live system: call it asynchronously")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = await self.aplan(messages)
        message.id = f"run-{uuid.uuid4().hex}"
        message.usage_metadata = _usage(messages, message)
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in _chunks(messages, await self.aplan(messages)):
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


def _usage(prompt: Sequence[BaseMessage], answer: AIMessage) -> UsageMetadata:
    """The tokens a model would have read and written, estimated (~4 characters a token): the
    planner has none, and the model-server metrics of an offline stack show these."""
    read, written = count_tokens_approximately(prompt), count_tokens_approximately([answer])
    return UsageMetadata(input_tokens=read, output_tokens=written, total_tokens=read + written)


def _chunks(prompt: Sequence[BaseMessage], message: AIMessage) -> Iterator[ChatGenerationChunk]:
    """The answer word by word, then its tool calls, all under one message id; the last chunk
    carries the usage."""
    message_id = f"run-{uuid.uuid4().hex}"
    for word in re.findall(r"\S+\s*", str(message.content)):
        yield ChatGenerationChunk(message=AIMessageChunk(content=word, id=message_id))
    for index, call in enumerate(message.tool_calls):
        chunk = tool_call_chunk(name=call["name"], args=json.dumps(call["args"]), id=call["id"], index=index)
        yield ChatGenerationChunk(message=AIMessageChunk(content="", id=message_id, tool_call_chunks=[chunk]))
    closing = AIMessageChunk(
        content="",
        id=message_id,
        response_metadata=dict(message.response_metadata),
        usage_metadata=_usage(prompt, message),
    )
    yield ChatGenerationChunk(message=closing)
