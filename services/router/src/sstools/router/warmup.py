"""Build a router at start: keywords always, the embedding model if it loads."""

import logging
import time

from sstools.common.routing.keywords import KeywordIndex
from sstools.common.routing.router import Router
from sstools.router.embedding.backends import EmbeddingModelError, load_embedder
from sstools.router.embedding.index import EmbeddingIndex
from sstools.router.settings import RouterSettings

_log = logging.getLogger(__name__)


def build_router(settings: RouterSettings) -> tuple[Router, float | None]:
    """The router, and the seconds the model took to load and embed the catalogue (None: degraded)."""
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
        return Router(keywords, None, settings.router_config()), None
    load_seconds = time.perf_counter() - started
    _log.info("embedding model ready", extra={"model": embedder.name, "load_seconds": round(load_seconds, 3)})
    return Router(keywords, embeddings, settings.router_config()), load_seconds
