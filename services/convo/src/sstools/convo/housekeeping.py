"""The loop that pays owed checkpoint clean-ups, sweeps idle threads and expired uploads, and
reports the checkpoints' volume."""

import asyncio
import logging
from datetime import timedelta

from prometheus_client import CollectorRegistry, Counter, Gauge

from sstools.convo.checkpoints import CheckpointJanitor
from sstools.convo.store.uploads import UploadStore

_log = logging.getLogger(__name__)


class HousekeepingMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.rows = Gauge(
            "sstools_convo_checkpoint_rows",
            "Rows in each LangGraph checkpoint table.",
            ["table"],
            registry=registry,
        )
        self.bytes = Gauge(
            "sstools_convo_checkpoint_bytes",
            "On-disk size of each checkpoint table.",
            ["table"],
            registry=registry,
        )
        self.cleanups = Counter(
            "sstools_convo_checkpoint_cleanups_total",
            "Archived threads whose checkpoints were removed, by outcome.",
            ["outcome"],
            registry=registry,
        )
        self.swept = Counter(
            "sstools_convo_checkpoints_swept_total",
            "Old checkpoints of idle threads removed by the retention sweep.",
            registry=registry,
        )
        self.uploads_expired = Counter(
            "sstools_convo_uploads_expired_total",
            "Uploads no turn used, deleted once their time to live passed.",
            registry=registry,
        )


async def housekeeping_pass(
    janitor: CheckpointJanitor, uploads: UploadStore, retention: timedelta, metrics: HousekeepingMetrics
) -> None:
    metrics.uploads_expired.inc(await uploads.sweep())
    cleanup = await janitor.clean_pending()
    metrics.cleanups.labels("done").inc(cleanup.cleaned)
    metrics.cleanups.labels("failed").inc(cleanup.failed)
    metrics.swept.inc((await janitor.sweep(retention)).checkpoints_deleted)
    volume = await janitor.volume()
    for table, rows in volume.rows.items():
        metrics.rows.labels(table).set(rows)
        metrics.bytes.labels(table).set(volume.bytes[table])


async def housekeeping_loop(
    janitor: CheckpointJanitor,
    uploads: UploadStore,
    retention: timedelta,
    interval_seconds: float,
    metrics: HousekeepingMetrics,
) -> None:
    while True:
        try:
            await housekeeping_pass(janitor, uploads, retention, metrics)
        except Exception as error:  # noqa: BLE001 — the next pass tries again; say so now
            _log.error("housekeeping pass failed", extra={"error": repr(error)})
        await asyncio.sleep(interval_seconds)
