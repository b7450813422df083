"""The offline model by frames: the same LangChain chat model as the phrase-book planner
(:mod:`sstools.agent.planner`), its next step decided by :mod:`sstools.agent.frames.steps` over
the live system the graph hands it — ``AGENT_PLANNER=frames`` runs it. It reads the live system,
so it answers asynchronously only."""

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from contextvars import ContextVar
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import BaseTool

from sstools.agent.frames.reading import read
from sstools.agent.frames.steps import THREAD_KEY, Ground, Planner, earlier_thread
from sstools.agent.language import language_of
from sstools.agent.planner.model import (
    NEEDS_CLARIFICATION,
    OfflinePlanner,
    _chunks,
    _document_answer,
    _usage,
    turn_of,
)
from sstools.agent.planner.steps import Reply

# The live system as the turn's person sees it, for the model call the graph makes in this task.
GROUND: ContextVar[Ground | None] = ContextVar("sstools_ground", default=None)


class FramePlanner(OfflinePlanner):
    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> "FramePlanner":
        offered = [item for item in tools if isinstance(item, BaseTool)]
        return FramePlanner(tools=offered, words_per_second=self.words_per_second)

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
        raise NotImplementedError("the frame planner reads the live system: call it asynchronously")

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
