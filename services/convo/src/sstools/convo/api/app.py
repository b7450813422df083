"""REST for the browser: its own conversations, under the user's JWT.

Someone else's conversation answers 404, exactly like a missing one, so ids reveal nothing. With
``CONVO_OPS_URL`` set, ops is also asked whether the user is still active (its yes kept
``CONVO_ACCOUNT_CHECK_SECONDS``): a disabled user is refused within that, not when the token ends.

The audit trail, every user's commands, is for admins alone: ``GET /api/assistant/audit`` (a page,
filtered), ``/api/assistant/audit.csv`` (all of it as CSV) and ``/api/assistant/audit/{id}``. The
token carries no role, so ops is asked for it afresh at each such call; anyone else is refused
(403 ``permission_denied``), and so is everyone when convo has no ops to ask.

Uploads: the raw file is the body of ``POST .../conversations/{id}/uploads?name=...``. The token,
the name, the declared length and the user's quota are checked before a byte of the body is
read; the body is read only up to the limit, and kept only whole.
"""

import contextlib
import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator, BaseModel, Field
from sqlalchemy.engine import RowMapping

from sstools.common.accounts import AccountRefused, Accounts, AccountUnknown
from sstools.common.audit import AuditCall
from sstools.common.catalogue import Role, tool_names
from sstools.common.csv_export import csv_response
from sstools.common.paging import PAGE_MAX, BadCursor, Page, PageQuery, Period, every_row
from sstools.common.tokens import USER_AUDIENCE, PublicKeyCodec, TokenError, TokenType
from sstools.common.tool_args import EnvId
from sstools.convo.checkpoints import CheckpointJanitor
from sstools.convo.store.queries import (
    AuditFilter,
    ConversationNotFound,
    ConversationRefused,
    ConversationStore,
    refusal_code,
)
from sstools.convo.store.tables import AuditDecision
from sstools.convo.store.uploads import UploadQuotaExceeded, UploadStore

_bearer = HTTPBearer(auto_error=False)
UPLOAD_NAME_MAX_CHARS = 255
AUDIT_PATH = "/api/assistant/audit"


class ConversationOut(BaseModel):
    id: uuid.UUID
    title: str
    message_count: int
    is_archived: bool
    created_at: datetime
    updated_at: datetime
    last_message_at: datetime | None
    archived_at: datetime | None


class MessageOut(BaseModel):
    id: uuid.UUID
    seq: int
    client_message_id: str
    role: str
    content: str
    metadata: dict[str, Any]
    partial: bool
    created_at: datetime


class ConversationPage(BaseModel):
    items: list[ConversationOut]
    next_cursor: str | None


class HistoryPage(BaseModel):
    items: list[MessageOut]
    next_cursor: str | None


class NewConversation(BaseModel):
    first_message: str = ""


class UploadOut(BaseModel):
    upload_id: uuid.UUID
    name: str
    size_bytes: int
    expires_at: datetime


class ActiveLease(BaseModel):
    """Whether the conversation is answering somewhere now; who holds it (a pod's host name and
    pid) is the services' business, not the page's."""

    active: bool


_TOOLS = frozenset(tool_names())


def _known_tool(name: str) -> str:
    if name not in _TOOLS:
        raise ValueError(f"no tool named {name!r}")
    return name


class AuditFilters(Period):
    """Which audit records an admin reads (query parameters; each one left out matches all)."""

    user: str | None = Field(default=None, min_length=1, max_length=200)
    tool: Annotated[str, AfterValidator(_known_tool)] | None = None
    env: EnvId | None = None
    decision: AuditDecision | None = None
    outcome: str | None = Field(default=None, pattern=r"^[a-z_]{1,40}$")

    def wanted(self) -> AuditFilter:
        return AuditFilter(
            user=self.user,
            tool=self.tool,
            env=self.env,
            decision=self.decision,
            outcome=self.outcome,
            since=self.since,
            until=self.until,
        )


class AuditPageQuery(AuditFilters, PageQuery):
    pass


class AuditRecordOut(BaseModel):
    """One command the agent took: who, which tool with which arguments, where, what was decided
    and how it ended."""

    id: uuid.UUID
    created_at: datetime
    user: str
    tool: str
    env: str
    decision: str
    outcome: str
    task_id: str
    conversation_id: uuid.UUID | None
    thread_id: str
    service_identity: str
    latency_seconds: float
    tool_args: dict[str, Any]
    action: str
    code: str
    calls: list[AuditCall]

    @classmethod
    def of(cls, row: RowMapping) -> "AuditRecordOut":
        return cls.model_validate({**row, "user": row["user_id"], "tool": row["tool_name"]})


class AuditPage(BaseModel):
    items: list[AuditRecordOut]
    next_cursor: str | None


AUDIT_CSV_COLUMNS = tuple(AuditRecordOut.model_fields)


def _unauthorized(detail: dict[str, str]) -> HTTPException:
    return HTTPException(status.HTTP_401_UNAUTHORIZED, detail, headers={"WWW-Authenticate": "Bearer"})


def _refusal_code(error: Exception) -> str | None:
    """What an action is refused with at this edge, as it answers it; None: not a refusal."""
    if isinstance(error, HTTPException):
        detail = error.detail
        return str(detail.get("code", "")) if isinstance(detail, dict) else str(error.status_code)
    if isinstance(error, UploadQuotaExceeded):
        return "upload_quota_exceeded"
    return refusal_code(error)


def upload_name_problem(name: str) -> str | None:
    """Why a file name is refused, or None: a plain name, never a path."""
    if not name.strip():
        return "name is required"
    if len(name) > UPLOAD_NAME_MAX_CHARS:
        return f"name is longer than {UPLOAD_NAME_MAX_CHARS} characters"
    if (
        name in (".", "..")
        or any(mark in name for mark in "/\\")
        or any(ord(char) < 32 or ord(char) == 127 for char in name)
    ):
        return "name must be a file name: no path separators or control characters"
    return None


def build_app(
    store: ConversationStore,
    janitor: CheckpointJanitor,
    codec: PublicKeyCodec,
    max_message_chars: int,
    uploads: UploadStore,
    upload_max_bytes: int,
    accounts: Accounts | None,
) -> FastAPI:
    app = FastAPI(title="SS-Tools conversations", version="0.1.0")

    def verified(credentials: HTTPAuthorizationCredentials | None) -> tuple[str, str]:
        """The user a valid user token names, and the token."""
        if credentials is None:
            raise _unauthorized({"code": "token_missing"})
        try:
            claims = codec.verify(credentials.credentials, audience=USER_AUDIENCE, token_type=TokenType.USER)
        except TokenError as error:
            raise _unauthorized({"code": error.code, "message": str(error)}) from None
        return claims.subject, credentials.credentials

    async def role_of(user: str, token: str, ops: Accounts, *, fresh: bool) -> Role:
        try:
            return await ops.role(user, token, fresh=fresh)
        except AccountRefused as refused:
            raise _unauthorized({"code": refused.code, "message": str(refused)}) from None
        except AccountUnknown as problem:  # nothing else would stop a disabled user here
            raise HTTPException(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                {"code": "account_check_unavailable", "message": str(problem)},
            ) from None

    async def current_user(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> str:
        user, token = verified(credentials)
        if accounts is not None:
            await role_of(user, token, accounts, fresh=False)
        return user

    async def admin(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> str:
        """An admin, as ops says now: the token carries no role, and a remembered yes would let
        a demoted admin read everyone's trail a while longer. Without ops to ask, nobody is one."""
        user, token = verified(credentials)
        role = await role_of(user, token, accounts, fresh=True) if accounts else None
        if role is not Role.ADMIN:
            why = "admins only" if accounts else "roles are unknown here: CONVO_OPS_URL is not set"
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                {
                    "code": "permission_denied",
                    "required_role": Role.ADMIN.value,
                    "user_role": role.value if role else None,
                    "message": why,
                },
            )
        return user

    def audited(
        user: str, conversation_id: uuid.UUID, action: str, args: dict[str, Any] | None = None
    ) -> contextlib.AbstractAsyncContextManager[None]:
        return store.audited(user, conversation_id, action, args, refusal_code=_refusal_code)

    @app.exception_handler(ConversationNotFound)
    async def not_found(request: Request, error: ConversationNotFound) -> JSONResponse:
        return JSONResponse({"detail": {"code": "conversation_not_found"}}, status_code=404)

    @app.exception_handler(ConversationRefused)
    async def refused(request: Request, error: ConversationRefused) -> JSONResponse:
        detail = {"code": refusal_code(error), "message": error.message}
        return JSONResponse({"detail": detail}, status_code=409)

    @app.exception_handler(UploadQuotaExceeded)
    async def over_quota(request: Request, error: UploadQuotaExceeded) -> JSONResponse:
        detail = {
            "code": "upload_quota_exceeded",
            "message": str(error),
            "max_pending_files": error.max_files,
            "max_pending_bytes": error.max_bytes,
        }
        return JSONResponse({"detail": detail}, status_code=429)

    @app.exception_handler(BadCursor)
    async def bad_cursor(request: Request, error: BadCursor) -> JSONResponse:
        return JSONResponse({"detail": {"code": "bad_cursor", "message": str(error)}}, status_code=422)

    @app.post("/api/assistant/conversations", status_code=201)
    async def create(body: NewConversation, user: Annotated[str, Depends(current_user)]) -> ConversationOut:
        if len(body.first_message) > max_message_chars:
            raise HTTPException(
                status.HTTP_413_CONTENT_TOO_LARGE,
                {"code": "payload_too_large", "limit_chars": max_message_chars},
            )
        return ConversationOut.model_validate(dict(await store.create(user, body.first_message)))

    @app.get("/api/assistant/conversations")
    async def listing(
        user: Annotated[str, Depends(current_user)],
        archived: bool = False,
        q: Annotated[str, Query(max_length=200)] = "",
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
        cursor: str | None = None,
    ) -> ConversationPage:
        page = await store.listing(user, archived=archived, search=q, limit=limit, cursor=cursor)
        return ConversationPage(items=_conversations(page), next_cursor=page.next_cursor)

    @app.get("/api/assistant/conversations/{conversation_id}/history")
    async def history(
        conversation_id: uuid.UUID,
        user: Annotated[str, Depends(current_user)],
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        cursor: str | None = None,
    ) -> HistoryPage:
        page = await store.history(user, conversation_id, limit=limit, cursor=cursor)
        return HistoryPage(
            items=[MessageOut.model_validate(dict(row)) for row in page.items], next_cursor=page.next_cursor
        )

    @app.delete("/api/assistant/conversations/{conversation_id}")
    async def archive(
        conversation_id: uuid.UUID, user: Annotated[str, Depends(current_user)]
    ) -> ConversationOut:
        async with audited(user, conversation_id, "archive"):
            archived = await store.set_archived(user, conversation_id, archived=True)
        # This thread's clean-up now if it can; other debts stay with the housekeeping loop.
        await janitor.clean(str(conversation_id))
        return ConversationOut.model_validate(dict(archived))

    @app.post("/api/assistant/conversations/{conversation_id}/restore")
    async def restore(
        conversation_id: uuid.UUID, user: Annotated[str, Depends(current_user)]
    ) -> ConversationOut:
        async with audited(user, conversation_id, "restore"):
            restored = await store.set_archived(user, conversation_id, archived=False)
        return ConversationOut.model_validate(dict(restored))

    @app.post("/api/assistant/conversations/{conversation_id}/uploads", status_code=201)
    async def upload(
        conversation_id: uuid.UUID,
        request: Request,
        user: Annotated[str, Depends(current_user)],
        name: str = "",
    ) -> UploadOut:
        too_large = HTTPException(
            status.HTTP_413_CONTENT_TOO_LARGE,
            {
                "code": "upload_too_large",
                "message": f"files up to {upload_max_bytes} bytes are accepted",
                "limit_bytes": upload_max_bytes,
            },
        )
        declared_text = request.headers.get("content-length", "0")
        shown = {
            "name": name[:UPLOAD_NAME_MAX_CHARS],
            "declared_bytes": declared_text[:20],
        }
        async with audited(user, conversation_id, "upload", shown):
            problem = upload_name_problem(name)
            if problem is not None:
                raise HTTPException(
                    status.HTTP_422_UNPROCESSABLE_CONTENT, {"code": "invalid_upload_name", "message": problem}
                )
            try:
                declared = int(declared_text)
            except ValueError:
                raise HTTPException(status.HTTP_400_BAD_REQUEST, {"code": "bad_content_length"}) from None
            if declared > upload_max_bytes:
                raise too_large  # answered before a byte of the body is read
            await uploads.check_conversation(user, conversation_id)
            await uploads.check_quota(user, declared)
            body = bytearray()
            async for chunk in request.stream():
                body += chunk
                if len(body) > upload_max_bytes:
                    raise too_large  # the rest is never read, and nothing is kept
            stored = await uploads.add(user, conversation_id, name, bytes(body))
            shown.update(upload_id=str(stored.id), size_bytes=str(stored.size_bytes))  # as recorded
        return UploadOut(
            upload_id=stored.id, name=stored.name, size_bytes=stored.size_bytes, expires_at=stored.expires_at
        )

    @app.get(AUDIT_PATH)
    async def audit_listing(
        _: Annotated[str, Depends(admin)], query: Annotated[AuditPageQuery, Query()]
    ) -> AuditPage:
        """Every user's commands that the filters name, newest first, a page at a time."""
        page = await store.audit_page(query.wanted(), limit=query.limit, cursor=query.cursor)
        return AuditPage(items=[AuditRecordOut.of(row) for row in page.items], next_cursor=page.next_cursor)

    @app.get(AUDIT_PATH + ".csv")
    async def audit_csv(
        _: Annotated[str, Depends(admin)], query: Annotated[AuditFilters, Query()]
    ) -> StreamingResponse:
        """The same records as CSV, all of them, newest first."""
        wanted = query.wanted()

        async def page(cursor: str | None) -> Page:
            return await store.audit_page(wanted, limit=PAGE_MAX, cursor=cursor)

        records = (AuditRecordOut.of(row) async for row in every_row(page))
        return csv_response("assistant-audit.csv", AUDIT_CSV_COLUMNS, records)

    @app.get(AUDIT_PATH + "/{audit_id}")
    async def audit_record(audit_id: uuid.UUID, _: Annotated[str, Depends(admin)]) -> AuditRecordOut:
        row = await store.audit_record(audit_id)
        if row is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, {"code": "audit_record_not_found"})
        return AuditRecordOut.of(row)

    @app.get("/api/agent/conversations/{conversation_id}/active")
    async def active(conversation_id: uuid.UUID, user: Annotated[str, Depends(current_user)]) -> ActiveLease:
        return ActiveLease(active=await store.active_lease(user, conversation_id) is not None)

    return app


def _conversations(page: Page) -> list[ConversationOut]:
    return [ConversationOut.model_validate(dict(row)) for row in page.items]
