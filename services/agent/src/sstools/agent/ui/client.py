"""A Python client of the chat, speaking the Gradio API the page speaks: the eval and the tests use it."""

from collections.abc import Mapping

from gradio_client import Client


def chat_client(url: str, headers: Mapping[str, str]) -> Client:
    """A Gradio client of the chat at ``url``. Its requests wait up to a minute: the client's own
    five seconds once ran out in CI while a loaded machine answered the API description."""
    return Client(url, headers=dict(headers), verbose=False, httpx_kwargs={"timeout": 60.0})
