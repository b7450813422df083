"""What the conversation service keeps of a chat: each user message before its turn runs, and
each answer (with its tool events and state, or cut short by a cancel) after."""

from typing import Any

import grpc
from google.protobuf import struct_pb2
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.grpc_client import insecure_channel
from sstools.convo.v1 import convo_pb2, convo_pb2_grpc


class ConvoUnavailable(Exception):
    """The conversation service did not take the message; the turn must not run."""


class ConvoClient:
    def __init__(self, target: str, timeout_seconds: float, tracer_provider: TracerProvider) -> None:
        self._target = target
        self._tracer_provider = tracer_provider
        self._timeout = timeout_seconds
        self._channel: grpc.aio.Channel | None = None  # made in the event loop, at first use

    def _stub(self) -> "convo_pb2_grpc.ConversationServiceAsyncStub":  # a name of the .pyi alone
        if self._channel is None:
            self._channel = insecure_channel(self._target, self._tracer_provider, balanced=True)
        return convo_pb2_grpc.ConversationServiceStub(self._channel)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()

    async def record_user_message(self, user: str, conversation_id: str, message_id: str, text: str) -> None:
        message = convo_pb2.Message(client_message_id=message_id, role="user", content=text)
        try:
            await self._append(user, conversation_id, message)
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND:
                raise ConvoUnavailable(f"convo: {error.code().name}: {error.details()}") from None
            try:  # the first message of a new conversation: create it, then append
                await self._stub().CreateConversation(
                    convo_pb2.CreateConversationRequest(
                        user_id=user, conversation_id=conversation_id, first_message=text
                    ),
                    timeout=self._timeout,
                )
                await self._append(user, conversation_id, message)
            except grpc.aio.AioRpcError as retry_error:
                raise ConvoUnavailable(f"convo: {retry_error.code().name}: {retry_error.details()}") from None

    async def record_answer(
        self,
        user: str,
        conversation_id: str,
        message_id: str,
        text: str,
        metadata: dict[str, Any],
        *,
        partial: bool,
    ) -> None:
        fields = struct_pb2.Struct()
        fields.update(metadata)
        message = convo_pb2.Message(
            client_message_id=message_id, role="assistant", content=text, metadata=fields, partial=partial
        )
        try:
            await self._append(user, conversation_id, message)
        except grpc.aio.AioRpcError as error:
            raise ConvoUnavailable(f"convo: {error.code().name}: {error.details()}") from None

    async def _append(self, user: str, conversation_id: str, message: convo_pb2.Message) -> None:
        request = convo_pb2.AppendMessagesRequest(
            user_id=user, conversation_id=conversation_id, messages=[message]
        )
        await self._stub().AppendMessages(request, timeout=self._timeout)
