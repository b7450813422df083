"""Docparse process: gRPC on ``DOCPARSE_GRPC_PORT``, probes and metrics on ``DOCPARSE_METRICS_PORT``."""

from sstools.common.runtime import Service, service_main
from sstools.docparse.settings import DocparseSettings


def assemble(settings: DocparseSettings, service: Service) -> None:
    # DocparseService is registered by the docparse issue; until then the server offers health only.
    service.add_grpc(settings.grpc_port, lambda server: [])


def main() -> None:
    service_main(DocparseSettings, assemble)
