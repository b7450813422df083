"""Ops process: REST API, probes and metrics; `sstools-ops migrate` migrates.

The first admin is created from OPS_ADMIN_USERNAME / OPS_ADMIN_PASSWORD once the schema exists
and no user does; until then a background loop keeps trying.
"""

import asyncio
import logging
from datetime import timedelta

from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from sstools.common.confirmation import ConfirmationCodec
from sstools.common.db import create_engine
from sstools.common.metrics import GenAiClientMetrics
from sstools.common.runtime import Service, service_main
from sstools.ops import jobs
from sstools.ops.api.app import build_app
from sstools.ops.api.auth import Authenticator
from sstools.ops.api.clients import TrustedProxies, parse_networks
from sstools.ops.api.context import OpsContext, SingleSignOn, SqlLimits
from sstools.ops.api.guard import HeavyReads
from sstools.ops.backups import Backups
from sstools.ops.deployments import Deployments
from sstools.ops.environments import parse_environments
from sstools.ops.gitrepo import GitRepository
from sstools.ops.llm import LlmEndpoint
from sstools.ops.oidc import OidcClient
from sstools.ops.settings import OpsSettings
from sstools.ops.signin import PasswordChecks, SignInPolicy, SignIns
from sstools.ops.store import MIGRATIONS
from sstools.ops.store.audit import AuditLog
from sstools.ops.store.backups import BackupStore
from sstools.ops.store.idempotency import IdempotencyStore
from sstools.ops.store.limits import Backoff, Limits
from sstools.ops.store.maintenance import MaintenanceStore
from sstools.ops.store.sessions import RefreshTokens
from sstools.ops.store.single_sign_on import SingleSignOnStore
from sstools.ops.store.tasks import TaskStore
from sstools.ops.store.users import UserStore
from sstools.ops.superset.registry import Supersets
from sstools.ops.tasks import TaskMetrics, TaskWorker
from sstools.ops.telemetry import HeavyReadMetrics, SupersetMetrics

_log = logging.getLogger(__name__)

SWEEP_SECONDS = 600


def build_context(
    settings: OpsSettings,
    engine: AsyncEngine,
    tracer_provider: TracerProvider,
    superset_metrics: SupersetMetrics | None = None,
    task_metrics: TaskMetrics | None = None,
    llm_metrics: GenAiClientMetrics | None = None,
    heavy_read_metrics: HeavyReadMetrics | None = None,
) -> OpsContext:
    """Every part of ops, wired once from the settings (no I/O happens here)."""
    users = UserStore(engine)
    authenticator = Authenticator(
        settings.token_codec(),
        users,
        user_ttl=timedelta(seconds=settings.user_token_ttl_seconds),
        service_ttl=timedelta(seconds=settings.service_token_ttl_seconds),
        late_user=timedelta(seconds=settings.late_user_token_seconds),
    )
    supersets = Supersets(
        parse_environments(settings.environments),
        authenticator.issue_superset_token,
        timeout=settings.superset_timeout_seconds,
        read_retries=settings.superset_read_retries,
        tracer_provider=tracer_provider,
        metrics=superset_metrics,
    )
    maintenance = MaintenanceStore(engine)
    backups = Backups(supersets, BackupStore(engine), settings.backup_dir)
    deployments = Deployments(supersets, maintenance, backups)
    llm = LlmEndpoint(
        settings.llm_base_url,
        settings.llm_api_key.get_secret_value(),
        settings.llm_model,
        settings.llm_timeout_seconds,
        llm_metrics if llm_metrics is not None else GenAiClientMetrics(CollectorRegistry()),
        settings.llm_max_tokens,
        settings.llm_temperature,
        tuple(settings.llm_stop),
    )
    tasks = TaskStore(engine)
    handlers = jobs.handlers(supersets, backups, deployments, llm, tasks, settings.sql_timeout_seconds)
    limits = Limits(engine)
    oidc = settings.oidc_config()
    return OpsContext(
        authenticator=authenticator,
        sign_ins=SignIns(
            users,
            limits,
            PasswordChecks(settings.password_checks_at_once, settings.password_checks_waiting),
            sign_in_policy(settings),
            settings.clients(),
        ),
        sessions=RefreshTokens(engine, timedelta(seconds=settings.refresh_token_ttl_seconds)),
        trusted_proxies=TrustedProxies(parse_networks(settings.trusted_proxies), settings.trusted_proxy_hops),
        confirmations=ConfirmationCodec(settings.confirmation_secret.get_secret_value()),
        audit=AuditLog(engine),
        supersets=supersets,
        tasks=tasks,
        worker=TaskWorker(
            tasks, handlers, lease=timedelta(seconds=settings.task_lease_seconds), metrics=task_metrics
        ),
        idempotency=IdempotencyStore(engine, timedelta(seconds=settings.idempotency_retention_seconds)),
        maintenance=maintenance,
        backups=backups,
        deployments=deployments,
        git=GitRepository(settings.git_repo),
        llm=llm,
        sql=SqlLimits(max_rows=settings.sql_max_rows, timeout_seconds=settings.sql_timeout_seconds),
        read_wait_seconds=settings.read_wait_seconds,
        heavy_reads=HeavyReads(
            limits,
            settings.heavy_reads_per_minute,
            heavy_read_metrics if heavy_read_metrics is not None else HeavyReadMetrics(CollectorRegistry()),
        ),
        sso_store=SingleSignOnStore(engine),
        single_sign_on=SingleSignOn(OidcClient(oidc), settings.oidc_pending_sign_ins) if oidc else None,
        password_sign_in=settings.password_sign_in,
    )


def sign_in_policy(settings: OpsSettings) -> SignInPolicy:
    def backoff(free: int) -> Backoff:
        return Backoff(
            free=free,
            first_delay=timedelta(seconds=settings.login_first_delay_seconds),
            max_delay=timedelta(seconds=settings.login_max_delay_seconds),
            memory=timedelta(seconds=settings.login_memory_seconds),
        )

    return SignInPolicy(
        per_user=backoff(settings.login_free_failures),
        per_address=backoff(settings.login_free_failures_per_address),
        service_tokens_per_minute=settings.service_tokens_per_minute,
    )


def assemble(settings: OpsSettings, service: Service) -> None:
    engine = create_engine(settings.database_url)
    context = build_context(
        settings,
        engine,
        service.tracer_provider,
        SupersetMetrics(service.registry),
        TaskMetrics(service.registry),
        GenAiClientMetrics(service.registry),
        HeavyReadMetrics(service.registry),
    )
    users = context.authenticator.users

    async def bootstrap_admin() -> None:
        if settings.admin_password is None:
            return
        while True:
            try:
                if await users.bootstrap_admin(
                    settings.admin_username, settings.admin_password.get_secret_value()
                ):
                    _log.info("admin created", extra={"username": settings.admin_username})
                return
            except DBAPIError as error:  # schema not migrated yet: readiness says so; try again
                _log.warning("admin not created yet", extra={"error": repr(error)[:200]})
                await asyncio.sleep(2)

    async def sweep() -> None:
        """Forget the counters of names and addresses that stopped failing (a flood of made-up
        ones would otherwise stay in the table), idempotency keys and slow reads' tasks past their
        retention, and single sign-ons that never came back or were never handed off."""
        memory = timedelta(seconds=max(settings.login_memory_seconds, 60))
        sweeps = {
            "sign-in limits": lambda: context.sign_ins.limits.sweep(memory),
            "idempotency keys": context.idempotency.sweep,
            "slow reads' tasks": lambda: context.tasks.sweep(
                jobs.READS, timedelta(seconds=settings.read_retention_seconds)
            ),
            "single sign-on rows": context.sso_store.sweep,
        }
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            for name, forget in sweeps.items():
                try:
                    await forget()
                except DBAPIError as error:
                    _log.warning(f"{name} not swept", extra={"error": repr(error)[:200]})

    service.readiness.checks["database"] = MIGRATIONS.readiness_check(engine)
    service.add_http("api", build_app(context), settings.http_port)
    service.add_background(bootstrap_admin)
    service.add_background(context.worker.run)
    service.add_background(sweep)
    service.add_cleanup(context.supersets.aclose)
    if context.single_sign_on is not None:
        service.add_cleanup(context.single_sign_on.client.aclose)
    service.add_cleanup(engine.dispose)


def main() -> None:
    """``sstools-ops [serve|migrate]``, and ``sstools-ops users ...`` (accounts from a shell in
    the pod: :mod:`sstools.ops.users_cli`, which reads only ``DATABASE_URL``)."""
    import sys  # here, with the import below: main() is the only part of this module that needs them

    if sys.argv[1:2] == ["users"]:
        from sstools.ops import users_cli

        raise SystemExit(users_cli.main(sys.argv[2:]))
    service_main(OpsSettings, assemble, migrations=MIGRATIONS)
