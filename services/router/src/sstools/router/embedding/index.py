"""The catalogue's descriptions embedded once at start, and a query's nearest tools.

Each tool is represented by several passages (its EN and RU descriptions, and its keyword
phrases joined per language); a tool's score is its best passage's cosine similarity.
Query vectors are kept in an LRU cache: operators repeat themselves. The catalogue's vectors
are also kept on disk, keyed by the model and the exact passages, so a restart (or an image that
computed them at build time) is ready without re-embedding; any change to either misses the key.
"""

import hashlib
import logging
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from threading import Lock

import numpy as np

from sstools.common.catalogue import TOOLS, ToolSpec
from sstools.router.embedding.backends import Embedder, Vectors

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScoredTool:
    tool: str
    score: float


def passages(spec: ToolSpec) -> list[str]:
    return [
        spec.description_en,
        spec.description_ru,
        ", ".join(spec.keywords_en),
        ", ".join(spec.keywords_ru),
    ]


class EmbeddingIndex:
    def __init__(
        self,
        embedder: Embedder,
        *,
        cache_size: int,
        vector_dir: Path | None = None,
        tools: tuple[ToolSpec, ...] = TOOLS,
    ) -> None:
        self.embedder = embedder
        texts: list[str] = []
        owners: list[int] = []
        for number, spec in enumerate(tools):
            for passage in passages(spec):
                texts.append(passage)
                owners.append(number)
        self._names = [spec.name for spec in tools]
        self._owners = np.asarray(owners)
        self._matrix = _catalogue_vectors(embedder, texts, vector_dir)
        self._cache: OrderedDict[str, Vectors] = OrderedDict()
        self._cache_size = cache_size
        self._lock = Lock()
        self.cache_hits = 0

    def vector(self, query: str) -> Vectors:
        with self._lock:
            cached = self._cache.get(query)
            if cached is not None:
                self._cache.move_to_end(query)
                self.cache_hits += 1
                return cached
        vector: Vectors = self.embedder.embed([query])[0]
        with self._lock:
            self._cache[query] = vector
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return vector

    def scores(self, query: str) -> list[ScoredTool]:
        """Every tool with its best passage similarity, best first."""
        similarities = self._matrix @ self.vector(query)
        best = np.full(len(self._names), -1.0, dtype=np.float32)
        np.maximum.at(best, self._owners, similarities)
        order = np.argsort(-best, kind="stable")
        return [ScoredTool(self._names[index], float(best[index])) for index in order]


def _catalogue_vectors(embedder: Embedder, texts: list[str], vector_dir: Path | None) -> Vectors:
    """The passages' vectors from the on-disk store when it has them for this model, else computed."""
    if vector_dir is None:
        return embedder.embed(texts)
    key = hashlib.sha256("\n".join([embedder.name, *texts]).encode()).hexdigest()[:32]
    stored = vector_dir / f"catalogue-{key}.npy"
    try:
        stored_vectors: Vectors = np.asarray(np.load(stored), dtype=np.float32)
        if stored_vectors.shape[0] == len(texts):
            return stored_vectors
    except (OSError, ValueError):
        pass  # not stored yet, or unreadable: compute
    vectors = embedder.embed(texts)
    try:
        vector_dir.mkdir(parents=True, exist_ok=True)
        partial = stored.with_suffix(".partial.npy")
        np.save(partial, vectors)
        partial.replace(stored)  # atomic: a concurrent reader never sees half a file
    except OSError as error:
        _log.warning("catalogue vectors not stored", extra={"dir": str(vector_dir), "error": repr(error)})
    return vectors
