"""Relate benchmark: a message's 10 phrases against a schema's 40 names, with the label cache cold
(every name new to the router) and warm (the same 40 names again, as the next message over the
same schema sends them), in process (the model's share) and through a real ``sstools-router``
process over gRPC (what the agent waits for). Prints JSON: p50/p95 milliseconds per call.

    .venv/bin/python bench/relate.py [--rounds 30]
"""

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from itertools import product
from typing import Any

import grpc
from router import RouterProcess  # bench/router.py: the router as a process, once its replay ran

from sstools.common.grpc_auth import bearer
from sstools.devstack.keys import service_token
from sstools.router.embedding.backends import load_embedder
from sstools.router.embedding.relate import Relater
from sstools.router.v1 import router_pb2, router_pb2_grpc

QUERIES = [
    "сколько",
    "посетителей",
    "из новосибирска",
    "за прошлый месяц",
    "по категориям",
    "средний чек",
    "заказов",
    "сотрудников склада",
    "average delivery time",
    "per region",
]
LABELS_PER_CALL = 40
_ENTITIES = [
    *("order", "customer", "warehouse", "shipment", "invoice", "product", "supplier", "courier"),
    *("employee", "visit", "account", "payment", "review", "store", "route", "vehicle"),
]
_ATTRIBUTES = ["id", "city", "created at", "total", "status", "category", "region", "name", "price", "weight"]
_QUALIFIERS = ["", "first", "last", "net", "gross", "planned", "actual", "billing", "delivery", "home"]


def schemas() -> Iterator[list[str]]:
    """Batches of 40 names, none repeated across batches: each batch is a cold cache's."""
    names = [
        " ".join(part for part in (qualifier, entity, attribute) if part)
        for qualifier, entity, attribute in product(_QUALIFIERS, _ENTITIES, _ATTRIBUTES)
    ]
    for start in range(0, len(names) - LABELS_PER_CALL + 1, LABELS_PER_CALL):
        yield names[start : start + LABELS_PER_CALL]


def summary(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100)
    return {"n": len(samples), "p50_ms": round(statistics.median(samples), 2), "p95_ms": round(cuts[94], 2)}


def timed(call: Callable[[list[str]], object], label_sets: list[list[str]]) -> list[float]:
    durations = []
    for labels in label_sets:
        started = time.perf_counter()
        call(labels)
        durations.append((time.perf_counter() - started) * 1000)
    return durations


def cold_and_warm(call: Callable[[list[str]], object], rounds: int) -> dict[str, Any]:
    batches = list(schemas())
    if len(batches) < rounds + 1:
        raise SystemExit(f"at most {len(batches) - 1} rounds: the names for cold calls run out")
    cold = timed(call, batches[:rounds])
    warm_labels = batches[rounds]
    call(warm_labels)  # once cold, then kept
    warm = timed(call, [warm_labels] * rounds)
    return {"cold_label_cache": summary(cold), "warm_label_cache": summary(warm)}


def in_process(rounds: int) -> dict[str, Any]:
    relater = Relater(load_embedder("onnx-e5", 1))  # one thread, as the service runs it
    relater.relate(["warm-up"], ["warm-up"])
    return cold_and_warm(lambda labels: relater.relate(QUERIES, labels), rounds)


def over_grpc(rounds: int) -> dict[str, Any]:
    server = RouterProcess({})
    try:
        server.wait_measured()
        token = (bearer(service_token()),)  # as the agent calls, with a service token
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            stub = router_pb2_grpc.RouterServiceStub(channel)

            def relate(labels: list[str]) -> object:
                request = router_pb2.RelateRequest(queries=QUERIES, labels=labels)
                return stub.Relate(request, timeout=30, metadata=token)

            return cold_and_warm(relate, rounds)
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=30, help="calls per measure")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    report = {
        "benchmark": "relate",
        "queries": len(QUERIES),
        "labels": LABELS_PER_CALL,
        "in_process": in_process(args.rounds),
        "grpc": over_grpc(args.rounds),
    }
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
