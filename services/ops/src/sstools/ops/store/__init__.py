"""Persistence of users, roles, environments, tasks and the audit trail, with Alembic migrations."""

from sstools.common.db import Migrations
from sstools.ops.store.tables import metadata

MIGRATIONS = Migrations(service="ops", script_location="sstools.ops.store:migrations")

__all__ = ["MIGRATIONS", "metadata"]
