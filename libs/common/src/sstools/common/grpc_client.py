"""Client channels that carry the caller's trace context to the server."""

import grpc
from opentelemetry.sdk.trace import TracerProvider

from sstools.common.tracing import grpc_client_interceptors


def insecure_channel(target: str, provider: TracerProvider, *, balanced: bool = False) -> grpc.aio.Channel:
    """A ``grpc.aio`` channel inside the cluster network, traced with ``provider``; ``balanced``
    spreads calls round-robin over every address the target resolves to (a headless Service's
    replicas)."""
    options = [("grpc.lb_policy_name", "round_robin")] if balanced else []
    return grpc.aio.insecure_channel(target, options=options, interceptors=grpc_client_interceptors(provider))
