"""The chat edge's own settings of Gradio, checked on the queue Gradio builds."""

from typing import cast

import pytest
from gradio import analytics

from sstools.agent.chat import ChatService
from sstools.agent.ui.app import chat_blocks
from sstools.devstack.keys import ISSUER


def test_the_queue_summarises_its_analytics_rarely_and_over_a_bounded_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("GRADIO_ANALYTICS_MAX_EVENTS", "GRADIO_ANALYTICS_CACHE_FREQUENCY"):
        monkeypatch.setenv(name, "")  # so that what the edge sets is undone after the test
        monkeypatch.delenv(name)
    # The service is never called: only the Blocks and their queue are built.
    blocks = chat_blocks(cast(ChatService, object()), ISSUER, 4, "offline").queue()
    queue = blocks._queue
    # every 1 000 events over the last 1 000 (Gradio's defaults: every event, over all of them)
    assert queue.ANALYTICS_MAX_EVENTS == 1_000
    assert queue.ANAYLTICS_CACHE_FREQUENCY == 1_000  # Gradio's own spelling


def test_gradio_reports_nothing_to_its_makers(monkeypatch: pytest.MonkeyPatch) -> None:
    """No pod or `make run` sets GRADIO_ANALYTICS_ENABLED (each is given its settings alone):
    the edge turns Gradio's usage and error reports off itself."""
    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "")  # so that what the edge sets is undone after
    monkeypatch.delenv("GRADIO_ANALYTICS_ENABLED")
    chat_blocks(cast(ChatService, object()), ISSUER, 4, "offline")
    assert analytics.analytics_enabled() is False


def test_an_operator_setting_still_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADIO_ANALYTICS_CACHE_FREQUENCY", "7")
    blocks = chat_blocks(cast(ChatService, object()), ISSUER, 4, "offline").queue()
    assert blocks._queue.ANAYLTICS_CACHE_FREQUENCY == 7


def test_the_chat_endpoint_keeps_nothing_between_turns() -> None:
    """No session state: Gradio's ChatInterface kept every turn's messages in each session's
    state (bench/soak.py: the agent grew 10 MB a minute); the conversation lives in the checkpoint."""
    blocks = chat_blocks(cast(ChatService, object()), ISSUER, 4, "offline")
    config = blocks.get_config_file()
    types = {component["id"]: component["type"] for component in config["components"]}
    (chat,) = [dependency for dependency in config["dependencies"] if dependency.get("api_name") == "chat"]
    assert [types[component] for component in chat["inputs"]] == ["textbox"] * 6
    assert [types[component] for component in chat["outputs"]] == ["json"]
    assert "state" not in types.values()
