"""Client channels that carry the caller's trace context, and its service token, to the server."""

import grpc
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.grpc_auth import ServiceTokenInterceptor, ServiceTokenSource
from sstools.common.tracing import grpc_client_interceptors

# The largest gRPC message that carries a whole file (an upload from convo to the agent); gRPC's
# default limit on a received message is 4 MiB.
FILE_MESSAGE_MAX_BYTES = 64 * 1024 * 1024


def insecure_channel(
    target: str,
    provider: TracerProvider,
    *,
    tokens: ServiceTokenSource | None = None,
    balanced: bool = False,
    max_receive_bytes: int | None = None,
) -> grpc.aio.Channel:
    """A ``grpc.aio`` channel inside the cluster network, traced with ``provider``; ``tokens``
    gives the service token every call carries (none: health checks alone will be answered);
    ``balanced`` spreads calls round-robin over every address the target resolves to (a headless
    Service's replicas); ``max_receive_bytes`` raises the largest answer accepted."""
    options: list[tuple[str, str | int]] = [("grpc.lb_policy_name", "round_robin")] if balanced else []
    if max_receive_bytes is not None:
        options.append(("grpc.max_receive_message_length", max_receive_bytes))
    interceptors = [*grpc_client_interceptors(provider)]
    if tokens is not None:  # inside the trace: a retry with a fresh token is part of the same span
        interceptors.append(ServiceTokenInterceptor(tokens))
    return grpc.aio.insecure_channel(target, options=options, interceptors=interceptors)


class LazyChannel:
    """A traced, balanced channel that sends ``tokens``' service token, made at its first use —
    inside the event loop, which ``grpc.aio`` channels belong to — rather than when the client
    object is built."""

    def __init__(
        self,
        target: str,
        provider: TracerProvider,
        tokens: ServiceTokenSource,
        *,
        max_receive_bytes: int | None = None,
    ) -> None:
        self._target = target
        self._provider = provider
        self._tokens = tokens
        self._max_receive_bytes = max_receive_bytes
        self._channel: grpc.aio.Channel | None = None

    def get(self) -> grpc.aio.Channel:
        if self._channel is None:
            self._channel = insecure_channel(
                self._target,
                self._provider,
                tokens=self._tokens,
                balanced=True,
                max_receive_bytes=self._max_receive_bytes,
            )
        return self._channel

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
