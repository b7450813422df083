"""What the conversation service keeps of a chat: each user message before its turn runs, and
each answer (with its tool events and state, or cut short by a cancel) after; the lease that
lets one stream at a time run on a conversation, whatever the tab or pod; one audit record
per command; and the files the user uploaded for a turn, read by id and deleted when it ends.
A command's end — its answer, its audit record, its lease given back — is one call.

Every call carries the agent's service token (from its ``ServiceTokenSource``); one made for a
person carries that person's user token too, from which convo takes who they are."""

from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import struct_pb2
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.audit import AuditCall
from sstools.common.grpc_auth import ServiceTokenSource, as_user
from sstools.common.grpc_client import FILE_MESSAGE_MAX_BYTES, LazyChannel
from sstools.common.grpc_errors import CONVERSATION_ARCHIVED, error_code
from sstools.convo.v1 import convo_pb2, convo_pb2_grpc


class ConvoUnavailable(Exception):
    """The conversation service did not take the message; the turn must not run."""


class UnknownConversation(Exception):
    """Convo has no such conversation of this user (and the call was not to create it)."""


class ConversationClosed(Exception):
    """Convo takes no more turns in this conversation: it is archived."""


class TurnsUsedUp(Exception):
    """The person's turns in the current window are used up; ``retry_after`` seconds until it ends."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many messages: try again in {retry_after} s")
        self.retry_after = retry_after


class UploadNotFound(Exception):
    """Convo has no upload with that id for this user and conversation (or it expired)."""


@dataclass(frozen=True)
class TurnBudget:
    """New messages one person may send per window; convo counts them for every agent pod."""

    turns: int
    window_seconds: int


@dataclass(frozen=True)
class UploadedFile:
    upload_id: str
    name: str
    content: bytes


@dataclass(frozen=True)
class AuditRecord:
    """What one command came to: the decision taken and why, the tool calls it concerned (the one
    the decision is about apart), how it ended and the task it started."""

    user: str
    conversation_id: str
    decision: str  # allowed | denied | refused | needs_confirmation | confirmed | rejected
    outcome: str  # the final state badge, or "cancelled"
    action: str = "send"  # send | confirm | reject
    code: str = ""  # why it was refused or denied
    service_identity: str = "agent"
    tool_name: str = ""
    tool_args: dict[str, Any] = field(default_factory=dict)
    calls: list[AuditCall] = field(default_factory=list)
    task_id: str = ""
    latency_seconds: float = 0.0


@dataclass(frozen=True)
class KeptAnswer:
    """A command's answer as convo keeps it: its text, what the tools did and the final state."""

    message_id: str
    text: str
    metadata: dict[str, Any]
    partial: bool  # cut short by a cancel


@dataclass
class TurnEnd:
    """What a command leaves for convo's one call at its end (``ConvoClient.end_turn``), filled
    in as it runs: the lease it holds, its answer."""

    conversation_id: str
    holder: str = ""
    answer: KeptAnswer | None = None


@dataclass(frozen=True)
class TurnEnded:
    released: bool
    answer_refused: str | None  # why convo did not keep the answer (the conversation's refusal)


def _unavailable(error: grpc.aio.AioRpcError) -> ConvoUnavailable:
    return ConvoUnavailable(f"convo: {error.code().name}: {error.details()}")


class ConvoClient:
    def __init__(
        self,
        target: str,
        timeout_seconds: float,
        tracer_provider: TracerProvider,
        tokens: ServiceTokenSource,
        *,
        upload_timeout_seconds: float | None = None,
    ) -> None:
        # an upload comes back whole in one message: far above gRPC's default 4 MiB
        self._channel = LazyChannel(target, tracer_provider, tokens, max_receive_bytes=FILE_MESSAGE_MAX_BYTES)
        self._timeout = timeout_seconds
        self._upload_timeout = upload_timeout_seconds or timeout_seconds

    def _stub(self) -> "convo_pb2_grpc.ConversationServiceAsyncStub":  # a name of the .pyi alone
        return convo_pb2_grpc.ConversationServiceStub(self._channel.get())

    async def close(self) -> None:
        await self._channel.close()

    async def acquire_lease(
        self,
        user_token: str,
        conversation_id: str,
        holder: str,
        ttl_seconds: int,
        *,
        first_text: str | None,
        budget: TurnBudget | None = None,
    ) -> bool:
        """Take the conversation's lease for the person of ``user_token``; False when another
        stream holds it, ``ConversationClosed`` when it is archived. A send gives its text
        (``first_text``: a conversation convo does not know yet is created with it) and the
        person's ``budget``, which convo counts the turn against first (``TurnsUsedUp``);
        ``UnknownConversation`` when there is none to resume, or the id is another person's.
        One round trip."""
        request = convo_pb2.AcquireLeaseRequest(
            conversation_id=conversation_id, holder=holder, ttl_seconds=ttl_seconds, first_message=first_text
        )
        if budget is not None:
            request.turn_budget.CopyFrom(
                convo_pb2.TurnBudget(limit=budget.turns, window_seconds=budget.window_seconds)
            )
        try:
            reply = await self._stub().AcquireLease(
                request, timeout=self._timeout, metadata=as_user(user_token)
            )
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                raise UnknownConversation(conversation_id) from None
            if error_code(error) == CONVERSATION_ARCHIVED:
                raise ConversationClosed(conversation_id) from None
            raise _unavailable(error) from None
        if reply.HasField("turn") and not reply.turn.allowed:
            raise TurnsUsedUp(int(reply.turn.retry_after_seconds))
        return bool(reply.acquired)

    async def renew_lease(self, conversation_id: str, holder: str, ttl_seconds: int) -> None:
        request = convo_pb2.RenewLeaseRequest(
            conversation_id=conversation_id, holder=holder, ttl_seconds=ttl_seconds
        )
        try:
            await self._stub().RenewLease(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as error:
            raise _unavailable(error) from None

    async def end_turn(self, user_token: str, end: TurnEnd, record: AuditRecord) -> TurnEnded:
        """The command's end in one call: its answer kept, ``record`` kept (convo takes its user
        from ``user_token``; ``record.user`` is what the agent's log says) and its lease given
        back. A refusal of a submit whose token was not taken goes with no token, nothing else."""
        arguments = struct_pb2.Struct()
        arguments.update(record.tool_args)
        calls = []
        for call in record.calls:
            kept = struct_pb2.Struct()
            kept.update(call.model_dump())
            calls.append(kept)
        audit = convo_pb2.AuditRecord(
            conversation_id=record.conversation_id,
            service_identity=record.service_identity,
            decision=record.decision,
            tool_name=record.tool_name,
            tool_args=arguments,
            outcome=record.outcome,
            task_id=record.task_id,
            thread_id=record.conversation_id,
            latency_seconds=record.latency_seconds,
            action=record.action,
            code=record.code,
            calls=calls,
        )
        answer = None
        if end.answer is not None:
            fields = struct_pb2.Struct()
            fields.update(end.answer.metadata)
            answer = convo_pb2.Message(
                client_message_id=end.answer.message_id,
                role="assistant",
                content=end.answer.text,
                metadata=fields,
                partial=end.answer.partial,
            )
        request = convo_pb2.EndTurnRequest(
            conversation_id=end.conversation_id, holder=end.holder, answer=answer, audit=audit
        )
        person = as_user(user_token) if user_token else None
        try:
            ended = await self._stub().EndTurn(request, timeout=self._timeout, metadata=person)
        except grpc.aio.AioRpcError as error:
            raise _unavailable(error) from None
        return TurnEnded(ended.released, ended.answer_refused or None)

    async def record_user_message(
        self, user_token: str, conversation_id: str, message_id: str, text: str
    ) -> None:
        message = convo_pb2.Message(client_message_id=message_id, role="user", content=text)
        request = convo_pb2.AppendMessagesRequest(conversation_id=conversation_id, messages=[message])
        try:
            await self._stub().AppendMessages(request, timeout=self._timeout, metadata=as_user(user_token))
        except grpc.aio.AioRpcError as error:
            raise _unavailable(error) from None

    async def read_upload(self, user_token: str, conversation_id: str, upload_id: str) -> UploadedFile:
        """An upload of this user for this conversation; UploadNotFound when convo has none."""
        request = convo_pb2.ReadUploadRequest(conversation_id=conversation_id, upload_id=upload_id)
        try:
            found = await self._stub().ReadUpload(
                request, timeout=self._upload_timeout, metadata=as_user(user_token)
            )
        except grpc.aio.AioRpcError as error:
            if error.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
                raise UploadNotFound(upload_id) from None
            raise _unavailable(error) from None
        return UploadedFile(found.upload_id, found.name, found.content)

    async def delete_uploads(self, user_token: str, conversation_id: str, upload_ids: list[str]) -> None:
        request = convo_pb2.DeleteUploadsRequest(conversation_id=conversation_id, upload_ids=upload_ids)
        try:
            await self._stub().DeleteUploads(request, timeout=self._timeout, metadata=as_user(user_token))
        except grpc.aio.AioRpcError as error:
            raise _unavailable(error) from None
