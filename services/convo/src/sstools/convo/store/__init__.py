"""Persistence of conversations, messages and audit: tables and their Alembic migrations."""

from sqlalchemy import MetaData

from sstools.common.db import Migrations

metadata = MetaData()
MIGRATIONS = Migrations(service="convo", script_location="sstools.convo.store:migrations")
