"""Client channels that carry the caller's trace context to the server."""

import grpc
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.tracing import grpc_client_interceptors


def insecure_channel(target: str, provider: TracerProvider) -> grpc.aio.Channel:
    """A ``grpc.aio`` channel inside the cluster network, traced with ``provider``."""
    return grpc.aio.insecure_channel(target, interceptors=grpc_client_interceptors(provider))
