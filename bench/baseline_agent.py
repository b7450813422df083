"""The agent bench's baseline: a plain LangGraph agent served over HTTP, none of SS-Tools' parts.

LangGraph's prebuilt ReAct agent with the catalogue's tools (their names, descriptions and
argument schemas, all bound: a plain agent has no router), LangGraph's own PostgreSQL
checkpointer on a pool, and the same OpenAI-compatible model client — streamed by a bare
FastAPI route as server-sent events, one per token. No Gradio, admission, leases, routing,
convo, gate or audit. ``bench/agent.py`` starts it as a process of its own and sets its
figures beside the agent's.

    .venv/bin/python bench/baseline_agent.py --port 8100 --database-url … --llm-url …/v1 --model m
"""

import argparse
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from langchain_core.messages import AIMessageChunk
from langchain_core.tools import BaseTool, StructuredTool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.prebuilt import create_react_agent
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, SecretStr

from sstools.agent.tools import tool_schema
from sstools.common.catalogue import ARGS, TOOLS


class TurnIn(BaseModel):
    conversation: str
    text: str


def catalogue_tools() -> list[BaseTool]:
    async def not_called(**values: Any) -> str:  # the bench's turns call no tool
        return "{}"

    return [
        StructuredTool.from_function(
            coroutine=not_called,
            name=spec.name,
            description=spec.description_en,
            args_schema=tool_schema(ARGS[spec.name]),
        )
        for spec in TOOLS
    ]


def app(database_url: str, llm_url: str, model_name: str) -> FastAPI:
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            database_url, open=False, max_size=10, kwargs=kwargs
        )
        async with pool:
            saver = AsyncPostgresSaver(pool)
            await saver.setup()
            model = ChatOpenAI(base_url=llm_url, api_key=SecretStr("none"), model=model_name, streaming=True)
            state["agent"] = create_react_agent(model, catalogue_tools(), checkpointer=saver)
            yield

    served = FastAPI(lifespan=lifespan)

    @served.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @served.post("/turn")
    async def turn(body: TurnIn) -> StreamingResponse:
        config = {"configurable": {"thread_id": body.conversation}}

        async def events() -> AsyncIterator[str]:
            async for chunk, _ in state["agent"].astream(
                {"messages": [("user", body.text)]}, config, stream_mode="messages"
            ):
                if isinstance(chunk, AIMessageChunk) and chunk.content:
                    yield f"data: {json.dumps({'token': chunk.content}, ensure_ascii=False)}\n\n"
            yield 'data: {"done": true}\n\n'

        return StreamingResponse(events(), media_type="text/event-stream")

    return served


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--llm-url", required=True)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    served = app(args.database_url, args.llm_url, args.model)
    uvicorn.run(served, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
