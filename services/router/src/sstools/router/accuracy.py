"""Tool-selection accuracy (SC-001), measured by the router itself: once it is ready and then every
``ROUTER_ACCURACY_INTERVAL_SECONDS``, it routes the labelled sample shipped in this package (the
eval's holdout set) as its Route does, and exports the share of cases whose needed tools were
all offered (the eval's case recall)."""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from sstools.router.eval import case_recall
from sstools.router.labelled import Case
from sstools.router.telemetry import RouterMetrics

_log = logging.getLogger(__name__)

Offered = Callable[[str], Awaitable[list[str]]]


async def replay(cases: Sequence[Case], offered: Offered, metrics: RouterMetrics) -> None:
    # One case at a time on the inference thread: a live Route waits for one case at most.
    answers = [await offered(case.query) for case in cases]
    accuracy = case_recall(cases, answers)
    metrics.record_accuracy(accuracy, len(cases))
    _log.info("tool selection accuracy", extra={"accuracy": round(accuracy, 4), "cases": len(cases)})


async def accuracy_loop(
    cases: Sequence[Case], offered: Offered, metrics: RouterMetrics, interval_seconds: float
) -> None:
    while True:
        try:
            await replay(cases, offered, metrics)
        except Exception as error:  # noqa: BLE001 — the next replay tries again; say so now
            _log.error("tool selection accuracy not measured", extra={"error": repr(error)})
        if not interval_seconds:
            return
        await asyncio.sleep(interval_seconds)
