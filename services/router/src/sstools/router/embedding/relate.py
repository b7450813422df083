"""Phrases of a message against the names in a database schema, by the router's model.

The agent's planner asks how near each of a message's phrases ("питомцев", "хозяев из казани") is
to each name of the schema it plans over ("pets", "owner city"); the multilingual model is what
lets a Russian phrase meet an English name. Both sides are embedded as the router embeds every
text, with e5's ``query: `` prefix: on 16 short library-domain pairs (a Russian or English phrase,
one right name among 14) the symmetric form and ``query: ``/``passage: `` both ranked 10 right
first, the symmetric one with the right name further ahead (mean margin 0.015 against 0.014).

The same schema's names come with every message, so their vectors are kept in an LRU keyed by
the text; phrases are the message's own and are embedded afresh, with the names not yet kept, in
one batch.
"""

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sstools.router.embedding.backends import Embedder, Vectors

MAX_QUERIES = 64
MAX_LABELS = 512
MAX_TEXT_CHARS = 200
# Names kept: a few large schemas' worth, about 1.5 KB a vector (384 float32) for e5-small.
LABEL_CACHE_SIZE = 8192


class RelateLimitError(ValueError):
    """A request over the bounds; its message says which."""


def check_limits(queries: Sequence[str], labels: Sequence[str]) -> None:
    for side, texts, most in (("queries", queries, MAX_QUERIES), ("labels", labels, MAX_LABELS)):
        if len(texts) > most:
            raise RelateLimitError(f"{len(texts)} {side}, at most {most}")
        for number, text in enumerate(texts):
            if len(text) > MAX_TEXT_CHARS:
                raise RelateLimitError(
                    f"{side}[{number}] is {len(text)} characters long, at most {MAX_TEXT_CHARS}"
                )


@dataclass(frozen=True)
class Relation:
    scores: Vectors  # cosine similarity, [len(queries), len(labels)]
    labels_kept: int  # distinct labels whose vectors the cache held
    labels_embedded: int  # distinct labels embedded for this call
    model: str


class Relater:
    """Used from the service's one inference thread only, so the cache needs no lock."""

    def __init__(self, embedder: Embedder, cache_size: int = LABEL_CACHE_SIZE) -> None:
        self._embedder = embedder
        self._cache: OrderedDict[str, Vectors] = OrderedDict()
        self._cache_size = cache_size

    def relate(self, queries: Sequence[str], labels: Sequence[str]) -> Relation:
        """Each query's similarity to each label; the sizes are the caller's to bound (``check_limits``)."""
        if not queries or not labels:
            return Relation(np.zeros((len(queries), len(labels)), np.float32), 0, 0, self._embedder.name)
        distinct = dict.fromkeys(labels)
        missing = [label for label in distinct if label not in self._cache]
        vectors = self._embedder.embed([*queries, *missing])
        fresh = dict(zip(missing, vectors[len(queries) :], strict=True))
        # Every vector taken before any is evicted, so a request larger than the cache still gets all.
        matrix = np.stack([fresh[label] if label in fresh else self._kept(label) for label in labels])
        for label, vector in fresh.items():
            self._cache[label] = vector
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        scores: Vectors = vectors[: len(queries)] @ matrix.T
        return Relation(scores, len(distinct) - len(missing), len(missing), self._embedder.name)

    def _kept(self, label: str) -> Vectors:
        self._cache.move_to_end(label)
        return self._cache[label]
