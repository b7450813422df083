"""Convo process: gRPC for the agent, REST for the browser, probes and metrics, and housekeeping.

`sstools-convo migrate` brings the schema to its head revision; the service does not migrate
on start and is not ready until the schema is current.
"""

from datetime import timedelta

from sstools.common.accounts import Accounts
from sstools.common.db import create_engine
from sstools.common.runtime import Service, service_main
from sstools.convo.api.app import build_app
from sstools.convo.checkpoints import CheckpointJanitor
from sstools.convo.grpc.servicer import ConversationServicer, register
from sstools.convo.housekeeping import HousekeepingMetrics, housekeeping_loop
from sstools.convo.settings import ConvoSettings
from sstools.convo.store import MIGRATIONS
from sstools.convo.store.queries import ConversationStore
from sstools.convo.store.uploads import UploadLimits, UploadStore


def assemble(settings: ConvoSettings, service: Service) -> None:
    engine = create_engine(settings.database_url)
    store = ConversationStore(engine)
    janitor = CheckpointJanitor(engine)
    uploads = UploadStore(
        engine,
        UploadLimits(
            max_files=settings.upload_max_pending_files,
            max_bytes=settings.upload_max_pending_bytes,
            ttl=timedelta(seconds=settings.upload_ttl_seconds),
        ),
    )
    codec = settings.token_codec()
    accounts = (
        Accounts(
            settings.ops_url,
            settings.account_check_seconds,
            timeout=settings.ops_timeout_seconds,
            tracer_provider=service.tracer_provider,
        )
        if settings.ops_url
        else None
    )
    callers = settings.grpc_callers(late_user_seconds=settings.late_user_token_seconds)
    servicer = ConversationServicer(
        store,
        janitor,
        uploads,
        callers,
        max_message_chars=settings.max_message_chars,
        lease_ttl=timedelta(seconds=settings.lease_ttl_seconds),
    )
    metrics = HousekeepingMetrics(service.registry)
    retention = timedelta(hours=settings.checkpoint_retention_hours)

    service.readiness.checks["database"] = MIGRATIONS.readiness_check(engine)
    service.add_grpc(settings.grpc_port, lambda server: register(server, servicer), callers=callers)
    service.add_http(
        "rest",
        build_app(
            store, janitor, codec, settings.max_message_chars, uploads, settings.upload_max_bytes, accounts
        ),
        settings.http_port,
    )
    interval = settings.housekeeping_interval_seconds
    service.add_background(lambda: housekeeping_loop(janitor, uploads, retention, interval, metrics))
    service.add_cleanup(engine.dispose)
    if accounts is not None:
        service.add_cleanup(accounts.aclose)


def main() -> None:
    service_main(ConvoSettings, assemble, migrations=MIGRATIONS)
