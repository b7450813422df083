"""Persistence of conversations, messages, leases and audit: tables, migrations, queries."""

from sstools.common.db import Migrations
from sstools.convo.store.tables import metadata

MIGRATIONS = Migrations(service="convo", script_location="sstools.convo.store:migrations")

__all__ = ["MIGRATIONS", "metadata"]
