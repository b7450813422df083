"""The chat edge: a Gradio API endpoint ``/chat``, mounted in the agent's FastAPI app.

The user's JWT comes in the ``Authorization`` header and is checked statelessly here. The edge
keeps nothing between turns: the conversation lives in the checkpoint. (Gradio's ChatInterface,
used before, kept every turn's messages in each session's state as well — memory that grew with
every turn of a long-open tab: bench/soak.py measured the agent growing 10 MB a minute at
20 conversations.) Each data event carries the whole list of messages of the turn so far: tool
cards, the answer growing token by token, a confirmation card, and the final state badge — each
a ``ChatMessage`` whose ``metadata.type`` names what it is.

What the edge checks itself: the token, the conversation id (a UUID), the message's length (cut,
with a warning), the environment id (``INVALID_ENVIRONMENT`` unless it is one), ``ui_context``
(validated; refused when too big or malformed) and ``files`` (a JSON list of upload ids; anything
else is ``UPLOAD_NOT_FOUND``). The message is text only: files reach the agent as ids of the
user's uploads in convo, never as paths, and Gradio's own upload routes are closed
(``sstools.agent.ui.closed``).
"""

import asyncio
import contextlib
import importlib.util
import os
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any, cast

import gradio as gr

from sstools.agent.chat import ChatService
from sstools.agent.context import Focus
from sstools.agent.events import ConversationEvent, TokenEvent, WarningEvent
from sstools.agent.limits import (
    MAX_MESSAGE_CHARS,
    InputRejected,
    parse_env_id,
    parse_ui_context,
    truncate_message,
)
from sstools.agent.stream import Event
from sstools.agent.turn import Turn
from sstools.agent.uploads import parse_file_ids
from sstools.common.tokens import USER_AUDIENCE, PublicKeyCodec, TokenError, TokenType

ACTIONS = ("send", "confirm", "reject")
# Where the chat is served, on the agent's port as behind the ingress and the local proxy: one
# path everywhere, so Gradio's URLs hold whichever way a client came.
CHAT_PATH = "/api/agent/gradio"
GRADIO_ANALYTICS_EVENTS = 1_000


def _message(event: Event) -> gr.ChatMessage:
    return gr.ChatMessage(role="assistant", content=event.content, metadata=cast(Any, event.metadata))


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _as_text(value: object) -> str:
    """An input as its Textbox would preprocess it (``preprocess=False`` skips that, which
    costs a worker thread per input), and ``None`` as empty."""
    return "" if value is None else str(value)


def _skip_gradio_matplotlib_probe() -> None:
    """Gradio imports matplotlib around every streamed update to pin its backend; where it is not
    installed that is a failed import walking all of ``sys.path`` each time. ``None`` in
    ``sys.modules`` makes the import fail at once (Python's documented import protocol)."""
    if "matplotlib" not in sys.modules and importlib.util.find_spec("matplotlib") is None:
        sys.modules["matplotlib"] = None  # type: ignore[assignment]


def _bound_gradio_queue_analytics() -> None:
    """Gradio's queue keeps a record per event (the last 10 000) and, by default, summarises
    them all with pandas after every event: 15 ms of CPU per turn on a busy pod, for a
    monitoring page the agent does not serve. Summarised every 1 000 events over the last
    1 000 instead; Gradio reads these when the queue is built, and the environment still wins."""
    os.environ.setdefault("GRADIO_ANALYTICS_MAX_EVENTS", str(GRADIO_ANALYTICS_EVENTS))
    os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", str(GRADIO_ANALYTICS_EVENTS))


def _no_gradio_usage_reports() -> None:
    """Gradio would report usage and errors to its makers (the Blocks' ``analytics_enabled=False``
    stops only some of it). Off here, wherever the agent runs, so no pod or `make run` needs a
    variable for it beside its settings; the environment still wins."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


async def _batches(events: AsyncIterator[Event]) -> AsyncIterator[list[Event]]:
    """The events grouped by what has arrived: one at a time while the page keeps up, and all
    that queued meanwhile when it does not — one update for a burst of tokens rather than one
    each (every update costs Gradio a diff and the socket a write)."""
    arrived: asyncio.Queue[Event | None] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for event in events:
                arrived.put_nowait(event)
        finally:
            arrived.put_nowait(None)  # the end, or a failure the reader gets from the task

    pumping = asyncio.create_task(pump())
    try:
        while True:
            batch = [await arrived.get()]
            while not arrived.empty():
                batch.append(arrived.get_nowait())
            if ready := [event for event in batch if event is not None]:
                yield ready
            if batch[-1] is None:
                break
        await pumping  # raises what the turn raised, if it did
    finally:
        if not pumping.done():  # the client went away: stop the turn (it keeps its partial text)
            pumping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pumping


def chat_blocks(
    chat: ChatService, codec: PublicKeyCodec, concurrency_limit: int, model_name: str
) -> gr.Blocks:
    _skip_gradio_matplotlib_probe()
    _bound_gradio_queue_analytics()
    _no_gradio_usage_reports()

    async def respond(
        message: object,
        conversation_id: object,
        action: object,
        env_id: object,
        ui_context: object,
        files: object,
        request: gr.Request,
    ) -> AsyncIterator[list[gr.ChatMessage]]:
        # Each input as text, whatever a client sent (Gradio does not preprocess them: see below).
        message, conversation_id, action = _as_text(message), _as_text(conversation_id), _as_text(action)
        env_id, ui_context, files = _as_text(env_id), _as_text(ui_context), _as_text(files)
        scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
        try:
            if scheme.lower() != "bearer":
                raise TokenError("expected 'Bearer <token>'")
            claims = codec.verify(token, audience=USER_AUDIENCE, token_type=TokenType.USER)
        except TokenError as error:  # recorded for no one: the token names no one to trust
            conversation = conversation_id if _is_uuid(conversation_id) else ""
            anonymous = Turn("", "", conversation, action=action if action in ACTIONS else "send")
            yield [_message(event) async for event in chat.refuse(anonymous, "UNAUTHORIZED", str(error))]
            return
        # A confirm or reject carries the card it answers as its message (see admission.answer_of).
        text, truncated = truncate_message(message)
        conversation = conversation_id or str(uuid.uuid4())
        turn = Turn(
            username=claims.subject,
            user_token=token,
            conversation_id=conversation if _is_uuid(conversation) else "",
            text=text,
            action=action if action in ACTIONS else "send",
            session_id=request.session_hash or "",
        )
        # Fresh messages at every yield: Gradio sends the difference from what it sent before,
        # and a message changed in place would look unchanged to it.
        shown = [Event.of(ConversationEvent(conversation_id=conversation, model=model_name))]
        answer_at: int | None = None
        yield [_message(item) for item in shown]  # at once: the client learns the conversation id
        try:
            if not turn.conversation_id:
                raise InputRejected("INVALID_CONVERSATION_ID", "conversation_id must be a UUID")
            env = parse_env_id(env_id)
            context = parse_ui_context(ui_context)
            turn = replace(turn, env_id=env, files=parse_file_ids(files or ""))
        except InputRejected as problem:
            async for event in chat.refuse(turn, problem.code, str(problem), **problem.facts):
                shown.append(event)
            yield [_message(item) for item in shown]
            return
        if context is not None:
            focus = None
            if context.objectType is not None:
                object_id = int(context.objectId) if context.objectId else None
                focus = Focus(context.objectType, object_id, context.objectName)
            turn = replace(
                turn, ui_env_id=context.envId, focus=focus, page_lang=context.lang or turn.page_lang
            )
        if truncated:
            shown.append(
                Event.of(
                    WarningEvent(code="MESSAGE_TRUNCATED", kept_chars=len(text)),
                    f"Сообщение длиннее {MAX_MESSAGE_CHARS} символов и обрезано / The message was cut",
                )
            )
        async for arrived in _batches(chat.run(turn)):
            for event in arrived:
                if event.metadata["type"] == "token":
                    if answer_at is None:
                        answer_at = len(shown)
                        shown.append(Event.of(TokenEvent()))
                    shown[answer_at] = Event.of(TokenEvent(), shown[answer_at].content + event.content)
                else:
                    if event.metadata["type"].startswith("tool_"):
                        answer_at = None  # text after a tool is a new answer
                    shown.append(event)
            yield [_message(item) for item in shown]

    # No telemetry: the agent calls nothing outside the cluster. No page either: only the API
    # (a hidden button carries the endpoint; the page is web/).
    with gr.Blocks(title="SS-Tools agent", analytics_enabled=False) as blocks:
        inputs = [
            gr.Textbox(label="message"),
            gr.Textbox(label="conversation_id"),
            gr.Textbox(label="action", value="send"),
            gr.Textbox(label="env_id"),
            gr.Textbox(label="ui_context"),
            gr.Textbox(label="files"),
        ]
        gr.Button(visible=False).click(
            respond,
            inputs,
            gr.JSON(label="messages", visible=False),
            api_name="chat",
            concurrency_limit=concurrency_limit,
            # The inputs as sent (a Textbox's preprocessing is str(), each in a worker thread).
            preprocess=False,
            postprocess=False,  # the ChatMessages as they are, as the page reads them
        )
    return cast(gr.Blocks, blocks)
