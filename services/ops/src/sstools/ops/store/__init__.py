"""Persistence of users, roles, environments, tasks and the audit trail, with Alembic migrations."""

from sqlalchemy import MetaData

from sstools.common.db import Migrations

metadata = MetaData()
MIGRATIONS = Migrations(service="ops", script_location="sstools.ops.store:migrations")
