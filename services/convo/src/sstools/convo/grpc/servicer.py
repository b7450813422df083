import functools
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, NoReturn, TypeVar

from google.protobuf import json_format, struct_pb2, timestamp_pb2
from sqlalchemy.engine import RowMapping

import grpc
from sstools.common.audit import MalformedCall, audit_calls
from sstools.common.grpc_auth import Callers, has_user_token, user_of
from sstools.common.grpc_errors import refuse
from sstools.common.paging import BadCursor
from sstools.common.tool_args import is_env_id
from sstools.convo.checkpoints import CheckpointJanitor
from sstools.convo.store.queries import (
    ConversationNotFound,
    ConversationRefused,
    ConversationStore,
    LeaseState,
    NewMessage,
    TurnBudget,
    refusal_code,
)
from sstools.convo.store.tables import ROLES
from sstools.convo.store.uploads import UploadStore
from sstools.convo.v1 import convo_pb2, convo_pb2_grpc

Context = grpc.aio.ServicerContext[Any, Any]

MAX_TURN_WINDOW_SECONDS = 86_400
Handler = TypeVar("Handler", bound=Callable[..., Awaitable[Any]])


class RequestInvalid(ValueError):
    """The request breaks the contract; the caller gets INVALID_ARGUMENT with the reason."""


def _invalid(message: str) -> NoReturn:
    raise RequestInvalid(message)


def _uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise RequestInvalid(f"{value!r} is not a conversation id") from None


def _maybe_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def _target_env(tool_args: dict[str, Any]) -> str:
    """The environment a command targeted: its arguments' ``env_id`` (a deployment's too: its
    ``source_env`` is where the dashboard comes from), or none."""
    env_id = tool_args.get("env_id")
    return env_id if isinstance(env_id, str) and is_env_id(env_id) else ""


def _status_codes(method: Handler) -> Handler:
    """Turns the store's and the checks' errors into gRPC status codes, once for every RPC."""

    @functools.wraps(method)
    async def answered(self: Any, request: Any, context: Context) -> Any:
        try:
            return await method(self, request, context)
        except (RequestInvalid, BadCursor) as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        except ConversationNotFound:
            await context.abort(grpc.StatusCode.NOT_FOUND, "no such conversation")
        except ConversationRefused as refused:
            await refuse(context, grpc.StatusCode.FAILED_PRECONDITION, refused.code, refused.message)

    return answered  # type: ignore[return-value]


class ConversationServicer(convo_pb2_grpc.ConversationServiceServicer):
    """Thin edge: checks the request, calls the store, maps its errors to status codes.

    The caller's service token was checked before any method runs (runtime's ServiceTokenCheck);
    the person a call acts for is the subject of the user token it carries, never a field.
    Writes a turn makes at its end (EndTurn, the uploads' removal) take a user token that expired
    since, for ``callers``' bounded lateness: the person's token was valid when the agent began
    the turn, and an answer or audit record must not be lost because the turn outlived it; reads
    and a turn's first writes take only a valid one."""

    def __init__(
        self,
        store: ConversationStore,
        janitor: CheckpointJanitor,
        uploads: UploadStore,
        callers: Callers,
        *,
        max_message_chars: int,
        lease_ttl: timedelta,
    ) -> None:
        self._callers = callers
        self._store = store
        self._janitor = janitor
        self._uploads = uploads
        self._max_chars = max_message_chars
        self._lease_ttl = lease_ttl

    @_status_codes
    async def AppendMessages(
        self, request: convo_pb2.AppendMessagesRequest, context: Context
    ) -> convo_pb2.AppendMessagesResponse:
        user = await self._user(context, late=True)
        new = [self._new_message(message) for message in request.messages]
        rows = await self._store.append(user, _uuid(request.conversation_id), new)
        return convo_pb2.AppendMessagesResponse(messages=[_message(row) for row in rows])

    @_status_codes
    async def GetHistory(
        self, request: convo_pb2.GetHistoryRequest, context: Context
    ) -> convo_pb2.GetHistoryResponse:
        page = await self._store.history(
            await self._user(context),
            _uuid(request.conversation_id),
            limit=min(request.page_size or 50, 500),
            cursor=request.page_token or None,
        )
        return convo_pb2.GetHistoryResponse(
            messages=[_message(row) for row in page.items], next_page_token=page.next_cursor or ""
        )

    @_status_codes
    async def AcquireLease(self, request: convo_pb2.AcquireLeaseRequest, context: Context) -> convo_pb2.Lease:
        if not request.holder:
            _invalid("holder is required")
        ttl = timedelta(seconds=request.ttl_seconds) if request.ttl_seconds else self._lease_ttl
        first_message = request.first_message if request.HasField("first_message") else None
        if first_message is not None:
            self._check_length(first_message)
        budget = None
        if request.HasField("turn_budget"):
            window_seconds = request.turn_budget.window_seconds
            if not 1 <= window_seconds <= MAX_TURN_WINDOW_SECONDS:
                _invalid(f"window_seconds must be 1 to {MAX_TURN_WINDOW_SECONDS}")
            budget = TurnBudget(request.turn_budget.limit, timedelta(seconds=window_seconds))
        state = await self._store.acquire_lease(
            await self._user(context),
            _uuid(request.conversation_id),
            request.holder,
            ttl,
            first_message=first_message,
            budget=budget,
        )
        return _lease(state, counted=budget is not None)

    @_status_codes
    async def RenewLease(self, request: convo_pb2.RenewLeaseRequest, context: Context) -> convo_pb2.Lease:
        ttl = timedelta(seconds=request.ttl_seconds) if request.ttl_seconds else self._lease_ttl
        state = await self._store.renew_lease(_uuid(request.conversation_id), request.holder, ttl)
        if state is None:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, "the lease was lost: it expired and was taken"
            )
        assert state is not None
        return _lease(state)

    @_status_codes
    async def EndTurn(self, request: convo_pb2.EndTurnRequest, context: Context) -> convo_pb2.EndTurnResponse:
        record = request.audit
        if not record.decision:
            _invalid("audit.decision is required")
        answered = request.HasField("answer")
        answer, answer_invalid = None, None
        if answered:  # judged on its own: an answer not valid costs neither the record nor the release
            try:
                answer = self._new_message(request.answer)
            except RequestInvalid as problem:
                answer_invalid = f"invalid_answer: {problem}"
        anonymous = (record.decision, record.code) == ("refused", "UNAUTHORIZED") and not answered
        if anonymous and not has_user_token(context.invocation_metadata()):
            user = ""  # a submit refused for its token: it names no one the service could trust
        else:
            user = await self._user(context, late=True)
        tool_args = json_format.MessageToDict(record.tool_args)
        try:
            calls = audit_calls([json_format.MessageToDict(call) for call in record.calls])
        except MalformedCall as problem:
            _invalid(str(problem))
        conversation_id = _uuid(request.conversation_id) if request.conversation_id else None
        if (answered or request.holder) and conversation_id is None:
            _invalid("conversation_id is required with an answer or a holder")
        ended = await self._store.end_turn(
            user,
            conversation_id,
            holder=request.holder,
            answer=answer,
            audit_values={
                "conversation_id": _uuid(record.conversation_id) if record.conversation_id else None,
                "service_identity": record.service_identity,
                "decision": record.decision,
                "tool_name": record.tool_name,
                "tool_args": tool_args,
                "env": _target_env(tool_args),
                "outcome": record.outcome,
                "task_id": record.task_id,
                "thread_id": record.thread_id,
                "latency_seconds": record.latency_seconds,
                "action": record.action,
                "code": record.code,
                "calls": [call.model_dump() for call in calls],
            },
        )
        return convo_pb2.EndTurnResponse(
            released=ended.released,
            audit_id=str(ended.audit_id),
            answer_refused=answer_invalid or ended.answer_refused or "",
        )

    @_status_codes
    async def ArchiveConversation(
        self, request: convo_pb2.ArchiveConversationRequest, context: Context
    ) -> convo_pb2.Conversation:
        user, conversation_id = await self._user(context), _uuid(request.conversation_id)
        async with self._store.audited(user, conversation_id, "archive", refusal_code=refusal_code):
            row = await self._store.set_archived(user, conversation_id, archived=True)
        # This thread's clean-up now if it can; other debts stay with the housekeeping loop.
        await self._janitor.clean(str(request.conversation_id))
        return _conversation(row)

    @_status_codes
    async def ReadUpload(self, request: convo_pb2.ReadUploadRequest, context: Context) -> convo_pb2.Upload:
        user = await self._user(context)
        found = None
        upload_id = _maybe_uuid(request.upload_id)
        if upload_id is not None:
            found = await self._uploads.read(user, _uuid(request.conversation_id), upload_id)
        if found is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, "no such upload")
        assert found is not None
        return convo_pb2.Upload(
            upload_id=str(found.id), name=found.name, content=found.content, size_bytes=len(found.content)
        )

    @_status_codes
    async def DeleteUploads(
        self, request: convo_pb2.DeleteUploadsRequest, context: Context
    ) -> convo_pb2.DeleteUploadsResponse:
        ids = [upload_id for value in request.upload_ids if (upload_id := _maybe_uuid(value)) is not None]
        user = await self._user(context, late=True)
        deleted = await self._uploads.delete(user, _uuid(request.conversation_id), ids)
        return convo_pb2.DeleteUploadsResponse(deleted=deleted)

    async def _user(self, context: Context, *, late: bool = False) -> str:
        return await user_of(self._callers, context, late=late)

    def _new_message(self, message: convo_pb2.Message) -> NewMessage:
        if not message.client_message_id:
            _invalid("every message needs a client_message_id")
        if message.role not in ROLES:
            _invalid(f"role must be one of {', '.join(ROLES)}")
        self._check_length(message.content)
        return NewMessage(
            message.client_message_id,
            message.role,
            message.content,
            json_format.MessageToDict(message.metadata),
            message.partial,
        )

    def _check_length(self, content: str) -> None:
        if len(content) > self._max_chars:
            _invalid(f"content is {len(content)} characters; the limit is {self._max_chars}")


def _timestamp(value: datetime | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(value)
    return stamp


def _conversation(row: RowMapping) -> convo_pb2.Conversation:
    return convo_pb2.Conversation(
        id=str(row["id"]),
        owner_id=row["owner_id"],
        title=row["title"],
        message_count=row["message_count"],
        is_archived=row["is_archived"],
        created_at=_timestamp(row["created_at"]),
        updated_at=_timestamp(row["updated_at"]),
        last_message_at=_timestamp(row["last_message_at"]),
    )


def _message(row: RowMapping) -> convo_pb2.Message:
    metadata = struct_pb2.Struct()
    metadata.update(row["metadata"])
    return convo_pb2.Message(
        id=str(row["id"]),
        client_message_id=row["client_message_id"],
        role=row["role"],
        content=row["content"],
        metadata=metadata,
        partial=row["partial"],
        created_at=_timestamp(row["created_at"]),
    )


def _lease(state: LeaseState, counted: bool = False) -> convo_pb2.Lease:
    turn = None
    if counted:
        wait = state.over_budget_wait
        turn = convo_pb2.TurnCount(allowed=wait is None, retry_after_seconds=wait or 0)
    return convo_pb2.Lease(
        conversation_id=str(state.conversation_id),
        holder=state.holder,
        expires_at=_timestamp(state.expires_at),
        acquired=state.acquired,
        turn=turn,
    )


def register(server: grpc.aio.Server, servicer: ConversationServicer) -> list[str]:
    convo_pb2_grpc.add_ConversationServiceServicer_to_server(servicer, server)
    return [convo_pb2.DESCRIPTOR.services_by_name["ConversationService"].full_name]
