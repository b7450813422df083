"""Gradio's own file routes on the agent's app, closed before Gradio sees the request.

Gradio serves an upload route (``/gradio_api/upload``) and others that take multipart bodies
into its temp folder (``process_recording``, ``component_server``), without the user's token,
size limit or clean-up. The chat takes no file through Gradio — files are uploaded to convo and
named by id — so these answer 404 with a typed body, and so does any multipart body sent to the
chat's path, before a byte of it is read.
"""

import json
import posixpath

from starlette.types import ASGIApp, Receive, Scope, Send

# Below the chat's path; every spelling (trailing slash, doubled slashes, dot segments) is
# normalised first.
CLOSED_ROUTES = (
    "/gradio_api/upload",
    "/gradio_api/upload_progress",
    "/gradio_api/process_recording",
    "/gradio_api/component_server",
)
CODE = "upload_route_closed"
MESSAGE = "files are uploaded to /api/assistant/conversations/{conversation_id}/uploads"


def _normalised(path: str) -> str:
    cleaned = posixpath.normpath("/" + path.lstrip("/"))
    return "/" if cleaned in ("", ".") else cleaned


class ClosedGradioUploads:
    """ASGI middleware over the agent's app: refuses Gradio's upload routes below ``chat_path``."""

    def __init__(self, app: ASGIApp, chat_path: str) -> None:
        self.app = app
        self.chat_path = chat_path.rstrip("/")

    def _closed(self, scope: Scope) -> bool:
        path = _normalised(scope.get("path", ""))
        if path != self.chat_path and not path.startswith(self.chat_path + "/"):
            return False
        below = path[len(self.chat_path) :] or "/"
        if any(below == route or below.startswith(route + "/") for route in CLOSED_ROUTES):
            return True
        content_type: bytes = dict(scope.get("headers") or []).get(b"content-type", b"")
        return content_type.split(b";")[0].strip().lower() == b"multipart/form-data"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._closed(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"detail": {"code": CODE, "message": MESSAGE}}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 404,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
