"""Dashboards: search, read, create, copy, export and import."""

import asyncio
import io
import zipfile
from typing import Any

from pydantic import BaseModel

from sstools.ops.superset.client import SupersetClient, SupersetNotFound, SupersetRejected

_LIST_COLUMNS = [
    "id",
    "dashboard_title",
    "slug",
    "url",
    "published",
    "changed_on_utc",
    "owners.first_name",
    "owners.last_name",
    "tags.name",
]
# Tags Superset derives itself; people's own tags have no such prefix.
_SYSTEM_TAGS = ("type:", "owner:", "favorited_by:")


class DashboardSummary(BaseModel):
    id: int
    title: str
    slug: str | None
    url: str
    published: bool
    owners: list[str]
    tags: list[str]
    changed_on: str | None


class DashboardPage(BaseModel):
    env_id: str
    count: int
    page: int
    page_size: int
    dashboards: list[DashboardSummary]


def _summary(client: SupersetClient, item: dict[str, Any]) -> DashboardSummary:
    base = str(client.environment.url).rstrip("/")
    return DashboardSummary(
        id=item["id"],
        title=item.get("dashboard_title") or "",
        slug=item.get("slug"),
        url=base + (item.get("url") or f"/superset/dashboard/{item['id']}/"),
        published=bool(item.get("published")),
        owners=[person(owner) for owner in item.get("owners") or []],
        tags=[
            tag["name"]
            for tag in item.get("tags") or []
            if not str(tag.get("name", "")).startswith(_SYSTEM_TAGS)
        ],
        changed_on=item.get("changed_on_utc"),
    )


def person(owner: dict[str, Any]) -> str:
    return owner.get("username") or f"{owner.get('first_name', '')} {owner.get('last_name', '')}".strip()


async def _owner_ids(client: SupersetClient, owner: str) -> list[int]:
    related = await client.get("/api/v1/dashboard/related/owners", q={"filter": owner, "page_size": 100})
    return [int(item["value"]) for item in related.get("result", [])]


async def search(
    client: SupersetClient,
    *,
    text: str | None = None,
    owner: str | None = None,
    tag: str | None = None,
    page: int = 0,
    page_size: int = 25,
) -> DashboardPage:
    """Dashboards whose title or slug contains ``text``, owned by ``owner``, tagged ``tag``."""
    filters: list[dict[str, Any]] = []
    if text:
        filters.append({"col": "dashboard_title", "opr": "title_or_slug", "value": text})
    if tag:
        filters.append({"col": "tags", "opr": "dashboard_tags", "value": tag})
    if owner:
        ids = await _owner_ids(client, owner)
        if not ids:
            return DashboardPage(env_id=client.env_id, count=0, page=page, page_size=page_size, dashboards=[])
        filters.append({"col": "owners", "opr": "rel_m_m", "value": ids[0]})
    query = {
        "filters": filters,
        "columns": _LIST_COLUMNS,
        "order_column": "changed_on_delta_humanized",
        "order_direction": "desc",
        "page": page,
        "page_size": page_size,
    }
    listing = await client.get("/api/v1/dashboard/", q=query)
    return DashboardPage(
        env_id=client.env_id,
        count=int(listing.get("count", 0)),
        page=page,
        page_size=page_size,
        dashboards=[_summary(client, item) for item in listing.get("result", [])],
    )


async def get(client: SupersetClient, dashboard_id: int) -> dict[str, Any]:
    return dict((await client.get(f"/api/v1/dashboard/{dashboard_id}"))["result"])


async def titles(client: SupersetClient, dashboard_ids: list[int]) -> dict[int, str]:
    """Each dashboard's title, read one by one (Superset lists no set of ids); one that is not
    there is left out."""

    async def title(dashboard_id: int) -> str | None:
        try:
            return str((await get(client, dashboard_id)).get("dashboard_title") or "")
        except SupersetNotFound:
            return None

    unique = list(dict.fromkeys(dashboard_ids))
    found = await asyncio.gather(*(title(dashboard_id) for dashboard_id in unique))
    return {dashboard_id: name for dashboard_id, name in zip(unique, found, strict=True) if name is not None}


async def charts(client: SupersetClient, dashboard_id: int) -> list[dict[str, Any]]:
    return list((await client.get(f"/api/v1/dashboard/{dashboard_id}/charts"))["result"])


async def create(client: SupersetClient, title: str, slug: str | None, published: bool) -> DashboardSummary:
    body: dict[str, Any] = {"dashboard_title": title, "published": published}
    if slug:
        body["slug"] = slug
    created = await client.post("/api/v1/dashboard/", body)
    return _summary(client, {**(await get(client, int(created["id"])))})


async def copy(
    client: SupersetClient, dashboard_id: int, title: str, duplicate_charts: bool
) -> DashboardSummary:
    original = await get(client, dashboard_id)
    body = {
        "dashboard_title": title,
        "json_metadata": original.get("json_metadata") or "{}",
        "css": original.get("css") or "",
        "duplicate_slices": duplicate_charts,
    }
    copied = await client.post(f"/api/v1/dashboard/{dashboard_id}/copy/", body)
    return _summary(client, await get(client, int(copied["result"]["id"])))


async def ids(client: SupersetClient) -> list[int]:
    """Every dashboard id in the environment."""
    found: list[int] = []
    page = 0
    while True:
        listing = await client.get(
            "/api/v1/dashboard/", q={"columns": ["id"], "page": page, "page_size": 100}
        )
        batch = [int(item["id"]) for item in listing.get("result", [])]
        found += batch
        if len(batch) < 100:
            return found
        page += 1


async def export(client: SupersetClient, dashboard_ids: list[int]) -> bytes:
    """A bundle (zip) with the dashboards, their charts, datasets and databases."""
    bundle = await client.get_bytes("/api/v1/dashboard/export/", q=dashboard_ids)
    if not zipfile.is_zipfile(io.BytesIO(bundle)):
        raise SupersetRejected(client.env_id, "the export is not a zip archive")
    return bundle


async def import_bundle(client: SupersetClient, bundle: bytes) -> None:
    """Import with ``overwrite=true``: without it an existing dashboard makes Superset answer
    an HTML 500 instead of a conflict."""
    await client.post(
        "/api/v1/dashboard/import/",
        files={"formData": ("bundle.zip", bundle, "application/zip")},
        data={"overwrite": "true"},
    )
