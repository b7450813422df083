"""Build the router at start: keywords always, the embedding model if it loads."""

import logging
import time
from dataclasses import dataclass

from sstools.common.routing.keywords import KeywordIndex
from sstools.common.routing.router import Router
from sstools.router.embedding.backends import EmbeddingModelError, load_embedder
from sstools.router.embedding.index import EmbeddingIndex
from sstools.router.embedding.relate import Relater
from sstools.router.settings import RouterSettings

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Built:
    router: Router
    relater: Relater | None  # None: the model did not load (degraded)
    load_seconds: float | None  # to load the model and embed the catalogue; None: degraded


def build_router(settings: RouterSettings) -> Built:
    keywords = KeywordIndex()
    started = time.perf_counter()
    try:
        embedder = load_embedder(settings.embedding_model, settings.model_threads)
        embeddings = EmbeddingIndex(
            embedder, cache_size=settings.embedding_cache_size, vector_dir=settings.vector_dir
        )
        embeddings.vector("warm-up")  # the first query pays one-off allocation costs
    except EmbeddingModelError as error:
        _log.error("embedding model unavailable; routing by keywords only", extra={"reason": str(error)})
        return Built(Router(keywords, None, settings.router_config()), None, None)
    load_seconds = time.perf_counter() - started
    _log.info("embedding model ready", extra={"model": embedder.name, "load_seconds": round(load_seconds, 3)})
    return Built(Router(keywords, embeddings, settings.router_config()), Relater(embedder), load_seconds)
