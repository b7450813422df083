"""Deploys and migrations: dashboards exported from one environment and imported into another by
the person who asked, as far as Superset lets them, the target backed up first, its databases
mapped, and refused while it is under maintenance."""

from typing import Any

from sstools.ops.backups import Backups
from sstools.ops.errors import UnderMaintenance
from sstools.ops.store.maintenance import MaintenanceStore
from sstools.ops.superset import bundle, dashboards
from sstools.ops.superset.client import SupersetClient
from sstools.ops.superset.registry import Supersets
from sstools.ops.tasks import Report


class Deployments:
    def __init__(self, supersets: Supersets, maintenance: MaintenanceStore, backups: Backups) -> None:
        self._supersets = supersets
        self._maintenance = maintenance
        self._backups = backups

    async def ensure_open(self, env_id: str) -> None:
        """Refuse to change an environment under maintenance, saying who closed it and why."""
        window = await self._maintenance.open(env_id)
        if window is not None:
            raise UnderMaintenance(
                f"{env_id} is under maintenance since {window.started_at:%Y-%m-%d %H:%M} UTC "
                f"({window.reason}, by {window.started_by}); try again when it ends",
                env_id=env_id,
                reason=window.reason,
                started_by=window.started_by,
            )

    async def transfer(
        self,
        source_env: str,
        target_env: str,
        dashboard_ids: list[int],
        database_mapping: dict[str, str],
        username: str,
        report: Report,
    ) -> dict[str, Any]:
        source = self._supersets.as_person(source_env, username)
        target = self._supersets.as_person(target_env, username)
        await self.ensure_open(target_env)
        backup = await self._backups.create(target_env, username)  # the whole target, as the service account
        await report(30)
        archive = await dashboards.export(source, dashboard_ids)
        mapped = bundle.remap_databases(archive, await bundle.target_databases(target), database_mapping)
        await report(60)
        await self.ensure_open(target_env)  # a window may have opened during the backup
        await dashboards.import_bundle(target, mapped)
        await report(90)
        deployed = [await _in_target(target, uuid) for uuid in bundle.dashboard_uuids(mapped)]
        return {
            "source_env": source_env,
            "target_env": target_env,
            "backup_id": str(backup.id),
            "dashboards": deployed,
        }


async def _in_target(client: SupersetClient, uuid: str) -> dict[str, Any]:
    listing = await client.get(
        "/api/v1/dashboard/",
        q={
            "filters": [{"col": "uuid", "opr": "eq", "value": uuid}],
            "columns": ["id", "dashboard_title", "url"],
        },
    )
    found = listing.get("result", [])
    if not found:
        return {"uuid": uuid, "id": None, "title": None, "url": None}
    item = found[0]
    return {
        "uuid": uuid,
        "id": item["id"],
        "title": item["dashboard_title"],
        "url": str(client.environment.url).rstrip("/") + item["url"],
    }
