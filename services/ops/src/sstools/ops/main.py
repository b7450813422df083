"""Ops process: REST API, probes and metrics; `sstools-ops migrate` migrates.

The first admin is created from OPS_ADMIN_USERNAME / OPS_ADMIN_PASSWORD once the schema exists
and no user does; until then a background loop keeps trying.
"""

import asyncio
import logging
from datetime import timedelta

from sqlalchemy.exc import DBAPIError

from sstools.common.db import create_engine
from sstools.common.runtime import Service, service_main
from sstools.common.tokens import JwtCodec
from sstools.ops.api.app import build_app
from sstools.ops.api.auth import Authenticator
from sstools.ops.audit import AuditLog
from sstools.ops.environments import parse_environments
from sstools.ops.identity import UserStore
from sstools.ops.settings import OpsSettings
from sstools.ops.store import MIGRATIONS

_log = logging.getLogger(__name__)


def assemble(settings: OpsSettings, service: Service) -> None:
    engine = create_engine(settings.database_url)
    users = UserStore(engine)
    authenticator = Authenticator(
        JwtCodec(settings.jwt_secret.get_secret_value()),
        users,
        user_ttl=timedelta(seconds=settings.user_token_ttl_seconds),
        service_ttl=timedelta(seconds=settings.service_token_ttl_seconds),
    )

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

    service.readiness.checks["database"] = MIGRATIONS.readiness_check(engine)
    app = build_app(
        authenticator, AuditLog(engine), settings.clients(), parse_environments(settings.environments)
    )
    service.add_http("api", app, settings.http_port)
    service.add_background(bootstrap_admin)
    service.add_cleanup(engine.dispose)


def main() -> None:
    service_main(OpsSettings, assemble, migrations=MIGRATIONS)
