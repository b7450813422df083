"""Who can see a dashboard or a dataset, and through which roles.

Superset's rule, read from its security manager: a role sees a dataset if it holds
``all_datasource_access`` or ``all_database_access``, ``database_access`` on the dataset's
database, ``schema_access`` on its schema, or ``datasource_access`` on the dataset itself. A
dashboard is visible to a role that can read dashboards and see every dataset on it, or that the
dashboard lists in its own roles; its owners always see it.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from sstools.ops.superset.client import SupersetClient
from sstools.ops.superset.dashboards import person


class RoleAccess(BaseModel):
    role: str
    reasons: list[str]
    users: list[str]
    # False when the role grants the data but a user needs another role too (say, Gamma's
    # right to read dashboards at all).
    sufficient_alone: bool


class UserAccess(BaseModel):
    username: str
    through_roles: list[str]


class AccessReport(BaseModel):
    env_id: str
    object_type: str  # dashboard | dataset
    object_id: int
    title: str
    datasets: list[str]
    roles: list[RoleAccess]
    users: list[UserAccess]
    owners: list[str]


@dataclass(frozen=True)
class _Dataset:
    id: int
    name: str
    perm: str  # "[db].[table](id:N)"
    database: str
    schema: str | None


async def _pages(client: SupersetClient, path: str, **query: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    page = 0
    while True:
        listing = await client.get(path, q={**query, "page": page, "page_size": 100})
        batch = listing.get("result", [])
        items += batch
        if len(batch) < 100:
            return items
        page += 1


async def _dataset(client: SupersetClient, dataset_id: int) -> _Dataset:
    data = (await client.get(f"/api/v1/dataset/{dataset_id}"))["result"]
    database = data["database"]["database_name"]
    return _Dataset(
        id=dataset_id,
        name=data["table_name"],
        perm=f"[{database}].[{data['table_name']}](id:{dataset_id})",
        database=database,
        schema=data.get("schema"),
    )


def _grants(dataset: _Dataset, database_ids: dict[str, int]) -> set[tuple[str, str]]:
    """The (permission, view menu) pairs any one of which lets a role see ``dataset``."""
    grants = {
        ("all_datasource_access", "all_datasource_access"),
        ("all_database_access", "all_database_access"),
        ("datasource_access", dataset.perm),
    }
    if dataset.database in database_ids:
        grants.add(("database_access", f"[{dataset.database}].(id:{database_ids[dataset.database]})"))
    if dataset.schema:
        grants.add(("schema_access", f"[{dataset.database}].[{dataset.schema}]"))
    return grants


async def _roles(
    client: SupersetClient,
) -> tuple[list[dict[str, Any]], dict[int, tuple[str, str]], dict[int, str]]:
    roles = await _pages(client, "/api/v1/security/roles/search/")
    permissions = {
        item["id"]: (item["permission"]["name"], item["view_menu"]["name"])
        for item in await _pages(client, "/api/v1/security/permissions-resources/")
    }
    users = {item["id"]: item["username"] for item in await _pages(client, "/api/v1/security/users/")}
    return roles, permissions, users


async def _database_ids(client: SupersetClient) -> dict[str, int]:
    listing = await client.get("/api/v1/database/", q={"columns": ["id", "database_name"], "page_size": 100})
    return {item["database_name"]: item["id"] for item in listing.get("result", [])}


def _reasons(
    held: set[tuple[str, str]], datasets: Iterable[_Dataset], database_ids: dict[str, int]
) -> list[str]:
    """What in ``held`` grants any of ``datasets``."""
    granted: set[tuple[str, str]] = set()
    for dataset in datasets:
        granted |= held & _grants(dataset, database_ids)
    return [f"{permission} on {view}" for permission, view in sorted(granted)]


def _sees(
    held: set[tuple[str, str]],
    datasets: Iterable[_Dataset],
    database_ids: dict[str, int],
    needs: tuple[str, str] | None,
) -> bool:
    """Whether permissions ``held`` (one role's, or a user's roles' together) show every dataset."""
    if needs is not None and needs not in held:
        return False
    return all(held & _grants(dataset, database_ids) for dataset in datasets)


async def dashboard_access(client: SupersetClient, dashboard_id: int) -> AccessReport:
    dashboard = (await client.get(f"/api/v1/dashboard/{dashboard_id}"))["result"]
    datasets_info = (await client.get(f"/api/v1/dashboard/{dashboard_id}/datasets"))["result"]
    datasets = [await _dataset(client, int(item["id"])) for item in datasets_info]
    return await _report(
        client,
        object_type="dashboard",
        object_id=dashboard_id,
        title=dashboard["dashboard_title"],
        datasets=datasets,
        needs=("can_read", "Dashboard"),
        dashboard_roles={role["name"] for role in dashboard.get("roles") or []},
        owners=[person(owner) for owner in dashboard.get("owners") or []],
    )


async def dataset_access(client: SupersetClient, dataset_id: int) -> AccessReport:
    dataset = await _dataset(client, dataset_id)
    owners = (await client.get(f"/api/v1/dataset/{dataset_id}"))["result"].get("owners") or []
    return await _report(
        client,
        object_type="dataset",
        object_id=dataset_id,
        title=dataset.name,
        datasets=[dataset],
        needs=None,
        dashboard_roles=set(),
        owners=[person(owner) for owner in owners],
    )


async def _report(
    client: SupersetClient,
    *,
    object_type: str,
    object_id: int,
    title: str,
    datasets: list[_Dataset],
    needs: tuple[str, str] | None,
    dashboard_roles: set[str],
    owners: list[str],
) -> AccessReport:
    roles, permissions, users = await _roles(client)
    database_ids = await _database_ids(client)
    held_by = {
        role["name"]: {permissions[pid] for pid in role.get("permission_ids", []) if pid in permissions}
        for role in roles
    }
    roles_of: dict[str, list[str]] = {}
    granting: list[RoleAccess] = []
    for role in roles:
        members = sorted(users[uid] for uid in role.get("user_ids", []) if uid in users)
        for member in members:
            roles_of.setdefault(member, []).append(role["name"])
        reasons = _reasons(held_by[role["name"]], datasets, database_ids)
        listed = role["name"] in dashboard_roles
        if listed:
            reasons.append("listed in the dashboard's roles")
        if not reasons:
            continue
        alone = listed or _sees(held_by[role["name"]], datasets, database_ids, needs)
        granting.append(RoleAccess(role=role["name"], reasons=reasons, users=members, sufficient_alone=alone))
    granting_names = {role.role for role in granting}
    seeing: list[UserAccess] = []
    for username, names in sorted(roles_of.items()):
        held = set().union(*(held_by[name] for name in names))
        if any(name in dashboard_roles for name in names) or _sees(held, datasets, database_ids, needs):
            contributing = [
                name for name in names if name in granting_names or (needs and needs in held_by[name])
            ]
            seeing.append(UserAccess(username=username, through_roles=contributing))
    return AccessReport(
        env_id=client.env_id,
        object_type=object_type,
        object_id=object_id,
        title=title,
        datasets=[dataset.perm for dataset in datasets],
        roles=granting,
        users=seeing,
        owners=owners,
    )
