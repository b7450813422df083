"""Backups: every dashboard of an environment exported into a timestamped zip, recorded, listed
and restorable into the same or another environment.

A backup is taken by the environment's service account, not the person who asked: it must hold
every dashboard, whatever one person may see (only operators may ask: the policy table). A
restore imports as the person, like a deploy, so Superset's permissions for them decide."""

import asyncio
import hashlib
import io
import uuid
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import yaml

from sstools.ops.errors import NotFound, OperationError
from sstools.ops.store.backups import Backup, BackupStore
from sstools.ops.superset import bundle, dashboards
from sstools.ops.superset.registry import Supersets


class BackupDamaged(OperationError):
    status = 409
    code = "backup_damaged"


def _empty_bundle(stamp: str) -> bytes:
    """What Superset would export if asked for nothing: metadata only."""
    output = io.BytesIO()
    metadata = {"version": "1.0.0", "type": "Dashboard", "timestamp": stamp}
    with zipfile.ZipFile(output, "w") as archive:
        archive.writestr(f"dashboard_export_{stamp}/metadata.yaml", yaml.safe_dump(metadata))
    return output.getvalue()


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_bytes(data)
    partial.replace(path)


class Backups:
    def __init__(self, supersets: Supersets, store: BackupStore, folder: Path) -> None:
        self._supersets = supersets
        self._store = store
        self._folder = folder

    async def create(self, env_id: str, username: str) -> Backup:
        client = self._supersets.service_account(env_id)
        ids = await dashboards.ids(client)
        now = datetime.now(UTC)
        stamp = now.strftime("%Y%m%dT%H%M%SZ")
        archive = await dashboards.export(client, ids) if ids else _empty_bundle(stamp)
        file_name = f"{env_id}/{env_id}-{stamp}-{uuid.uuid4().hex[:8]}.zip"
        await asyncio.to_thread(_write_atomically, self._folder / file_name, archive)
        return await self._store.add(
            env_id, file_name, len(ids), len(archive), hashlib.sha256(archive).hexdigest(), username
        )

    async def list(self, env_id: str) -> list[Backup]:
        self._supersets.environment(env_id)  # an unknown environment is an error, not an empty list
        return await self._store.list(env_id)

    async def read(self, backup_id: uuid.UUID) -> tuple[Backup, bytes]:
        backup = await self._store.get(backup_id)
        if backup is None:
            raise NotFound(f"no backup {backup_id}", backup_id=str(backup_id))
        path = self._folder / backup.file_name
        try:
            archive = await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise BackupDamaged(
                f"the archive {backup.file_name} is missing", backup_id=str(backup_id)
            ) from None
        if hashlib.sha256(archive).hexdigest() != backup.sha256:
            raise BackupDamaged(
                f"the archive {backup.file_name} changed since it was written", backup_id=str(backup_id)
            )
        return backup, archive

    async def restore(self, backup_id: uuid.UUID, target_env: str, username: str) -> dict[str, object]:
        backup, archive = await self.read(backup_id)
        client = self._supersets.as_person(target_env, username)
        contents = bundle.contents(archive)
        if contents.dashboards:
            mapped = bundle.remap_databases(archive, await bundle.target_databases(client), {})
            await dashboards.import_bundle(client, mapped)
        return {
            "backup_id": str(backup.id),
            "source_env": backup.env_id,
            "target_env": target_env,
            "dashboards": contents.dashboards,
        }
