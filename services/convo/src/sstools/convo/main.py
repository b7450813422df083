"""Convo process: gRPC, REST for the browser, probes and metrics; `sstools-convo migrate` migrates."""

from sstools.common.db import create_engine
from sstools.common.runtime import Service, service_main
from sstools.convo.api.app import build_app
from sstools.convo.settings import ConvoSettings
from sstools.convo.store import MIGRATIONS


def assemble(settings: ConvoSettings, service: Service) -> None:
    engine = create_engine(settings.database_url)
    service.readiness.checks["database"] = MIGRATIONS.readiness_check(engine)
    service.add_cleanup(engine.dispose)
    # ConversationService is registered by the conversation-service issue.
    service.add_grpc(settings.grpc_port, lambda server: [])
    service.add_http("rest", build_app(), settings.http_port)


def main() -> None:
    service_main(ConvoSettings, assemble, migrations=MIGRATIONS)
