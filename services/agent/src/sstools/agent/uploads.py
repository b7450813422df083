"""Files attached to a message: references to this user's own uploads in convo, never paths.

The page uploads each file to convo (REST, under the user's JWT) and submits the ids convo
issued. Every id must name an upload of this user for this conversation that has not expired;
anything else refuses the whole turn (``UPLOAD_NOT_FOUND``) before anything is recorded or read.
Each file is then read by docparse and put before the model as a document — bounded, and
fenced as untrusted content from a file, never as words of the person or the system. Nothing a
document says can confirm anything: only a ``confirm`` action resumes a paused call, and the
fast path reads the typed message alone. The text of a document cannot close or forge its fence
(:mod:`sstools.agent.fence`).

A file of a kind docparse does not read (or that it cannot read now) is refused with a clear
error; the message itself still goes through.
"""

import asyncio
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sstools.agent.clients.convo import ConvoClient, UploadedFile
from sstools.agent.clients.docparse import DocparseClient, DocparseUnavailable, Document, DocumentRejected
from sstools.agent.events import ErrorEvent
from sstools.agent.fence import DOCUMENT, fenced
from sstools.agent.limits import InputRejected

MAX_DOCUMENT_CHARS = 20_000  # of each document put before the model
MAX_TABLE_ROWS = 50  # of each table rendered
MAX_TURN_FILES = 20  # ids one submit may name
UPLOAD_NOT_FOUND = "UPLOAD_NOT_FOUND"


@dataclass(frozen=True)
class Upload:
    name: str
    context: str | None = None  # the document as the model sees it, when it was read
    problem: ErrorEvent | None = None  # why it was not


def parse_file_ids(raw: str) -> tuple[str, ...]:
    """The submit's ``files``: empty for none, else a JSON list of upload ids (UUIDs), each
    kept once. Anything else — a path, a dict, a name — refuses the turn."""
    if not raw.strip():
        return ()
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputRejected(UPLOAD_NOT_FOUND, "files must be a JSON list of upload ids")
    if len(value) > MAX_TURN_FILES:
        raise InputRejected("PAYLOAD_TOO_LARGE", f"at most {MAX_TURN_FILES} files a message")
    ids = []
    for item in value:
        try:
            ids.append(str(uuid.UUID(item)))
        except ValueError:
            raise InputRejected(UPLOAD_NOT_FOUND, f"{item[:80]!r} is not an upload id") from None
    return tuple(dict.fromkeys(ids))


async def fetch_uploads(
    convo: ConvoClient, user_token: str, conversation_id: str, upload_ids: Sequence[str]
) -> list[UploadedFile]:
    """Every upload the turn names, from convo; raises UploadNotFound if any is not this user's
    for this conversation (or is gone)."""
    return list(
        await asyncio.gather(
            *(convo.read_upload(user_token, conversation_id, upload) for upload in upload_ids)
        )
    )


def render(name: str, document: Document) -> str:
    """A document as bounded, clearly fenced text; nothing inside can end the fence early."""
    parts = [document.text.strip()] if document.text.strip() else []
    for table in document.tables:
        lines = [" | ".join(table.header)] if table.header else []
        lines += [" | ".join(row) for row in table.rows[:MAX_TABLE_ROWS]]
        if len(table.rows) > MAX_TABLE_ROWS:
            lines.append(f"... {len(table.rows) - MAX_TABLE_ROWS} more rows")
        parts.append(f"Table {table.name}:\n" + "\n".join(lines))
    body = "\n\n".join(parts)
    cut = len(body) > MAX_DOCUMENT_CHARS or document.truncated
    body = body[:MAX_DOCUMENT_CHARS] + ("\n[...truncated]" if cut else "")
    return fenced(DOCUMENT, body, name=name[:200], kind=document.kind)


async def read_upload(file: UploadedFile, docparse: DocparseClient) -> Upload:
    name = file.name
    try:
        document = await docparse.parse(name, file.content)
    except DocumentRejected as refusal:
        readable = f" (readable: {', '.join(refusal.supported)})" if refusal.supported else ""
        problem = ErrorEvent(
            code=f"UPLOAD_{refusal.code}",
            message=f"{name}: {refusal}{readable}",
            file=name,
            supported=list(refusal.supported) or None,
            limit_bytes=refusal.limit_bytes or None,
        )
        return Upload(name, problem=problem)
    except DocparseUnavailable as error:
        message = f"{name} could not be read now ({error}); the message went on without it"
        return Upload(name, problem=ErrorEvent(code="UPLOAD_UNAVAILABLE", message=message, file=name))
    return Upload(name, context=render(name, document))


async def read_uploads(files: Sequence[UploadedFile], docparse: DocparseClient) -> list[Upload]:
    return list(await asyncio.gather(*(read_upload(file, docparse) for file in files)))
