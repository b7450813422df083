"""Export bundles (Superset's zip of YAML files) read and rewritten between environments.

A bundle names each database by uuid. The same database has a different uuid in every
environment, so before importing into another one each database is mapped onto the target's
own (by name, or by the mapping given): datasets then attach to it, and Superset leaves the
target's connection — with its credentials, which an export never carries — as it is.
"""

import io
import zipfile
from dataclasses import dataclass
from typing import Any

import yaml

from sstools.ops.errors import InvalidRequest
from sstools.ops.superset.client import SupersetClient


class BundleError(InvalidRequest):
    """The archive is not a Superset export bundle, or cannot be mapped onto the target."""

    code = "bundle_not_importable"


@dataclass(frozen=True)
class BundleContents:
    dashboards: list[str]  # titles
    databases: list[str]  # names


def _entries(bundle: bytes) -> dict[str, bytes]:
    try:
        with zipfile.ZipFile(io.BytesIO(bundle)) as archive:
            return {name: archive.read(name) for name in archive.namelist()}
    except zipfile.BadZipFile as error:
        raise BundleError(f"not a zip archive: {error}") from None


def _kind(name: str) -> str:
    parts = name.split("/")
    return parts[1] if len(parts) > 2 else ""


def contents(bundle: bytes) -> BundleContents:
    entries = _entries(bundle)
    if not any(name.endswith("metadata.yaml") for name in entries):
        raise BundleError("no metadata.yaml: not a Superset export")
    dashboards, databases = [], []
    for name, data in entries.items():
        if _kind(name) == "dashboards":
            dashboards.append(str(yaml.safe_load(data).get("dashboard_title", "")))
        elif _kind(name) == "databases":
            databases.append(str(yaml.safe_load(data).get("database_name", "")))
    return BundleContents(sorted(dashboards), sorted(databases))


def dashboard_uuids(bundle: bytes) -> list[str]:
    return [
        str(yaml.safe_load(data)["uuid"])
        for name, data in sorted(_entries(bundle).items())
        if _kind(name) == "dashboards"
    ]


async def target_databases(client: SupersetClient) -> dict[str, str]:
    """The target's databases: name → uuid."""
    listing = await client.get(
        "/api/v1/database/", q={"columns": ["database_name", "uuid"], "page_size": 100}
    )
    return {item["database_name"]: str(item["uuid"]) for item in listing.get("result", [])}


def remap_databases(bundle: bytes, targets: dict[str, str], mapping: dict[str, str]) -> bytes:
    """Point the bundle's databases at the target's: ``mapping`` is source name → target name
    (unmapped names map to themselves); a database the target lacks is left to be created."""
    entries = _entries(bundle)
    uuid_changes: dict[str, str] = {}
    for name, data in list(entries.items()):
        if _kind(name) != "databases":
            continue
        config: dict[str, Any] = yaml.safe_load(data)
        source_name = str(config.get("database_name", ""))
        target_name = mapping.get(source_name, source_name)
        if target_name not in targets:
            if source_name in mapping:
                raise BundleError(f"the target has no database {target_name!r} to map {source_name!r} onto")
            continue
        uuid_changes[str(config["uuid"])] = targets[target_name]
        config["uuid"] = targets[target_name]
        config["database_name"] = target_name
        entries[name] = yaml.safe_dump(config, sort_keys=False).encode()
    for name, data in list(entries.items()):
        if _kind(name) != "datasets":
            continue
        config = yaml.safe_load(data)
        if str(config.get("database_uuid")) in uuid_changes:
            config["database_uuid"] = uuid_changes[str(config["database_uuid"])]
            entries[name] = yaml.safe_dump(config, sort_keys=False).encode()
    output = io.BytesIO()
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return output.getvalue()
