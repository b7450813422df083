"""Router process: gRPC on ``ROUTER_GRPC_PORT``, probes and metrics on ``ROUTER_METRICS_PORT``."""

from sstools.common.runtime import Service, service_main
from sstools.router.settings import RouterSettings


def assemble(settings: RouterSettings, service: Service) -> None:
    # RouterService is registered by the router issue; until then the server offers health only.
    service.add_grpc(settings.grpc_port, lambda server: [])


def main() -> None:
    service_main(RouterSettings, assemble)
