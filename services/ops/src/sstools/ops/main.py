"""Ops process: REST API, probes and metrics; `sstools-ops migrate` migrates."""

from sstools.common.db import create_engine
from sstools.common.runtime import Service, service_main
from sstools.ops.api.app import build_app
from sstools.ops.settings import OpsSettings
from sstools.ops.store import MIGRATIONS


def assemble(settings: OpsSettings, service: Service) -> None:
    engine = create_engine(settings.database_url)
    service.readiness.checks["database"] = MIGRATIONS.readiness_check(engine)
    service.add_cleanup(engine.dispose)
    service.add_http("api", build_app(), settings.http_port)


def main() -> None:
    service_main(OpsSettings, assemble, migrations=MIGRATIONS)
