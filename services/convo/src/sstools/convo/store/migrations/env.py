from sstools.common.db import run_alembic_env
from sstools.convo.store import metadata

run_alembic_env(metadata)
