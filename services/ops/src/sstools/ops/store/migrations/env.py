from sstools.common.db import run_alembic_env
from sstools.ops.store import metadata

run_alembic_env(metadata)
