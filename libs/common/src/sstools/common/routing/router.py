"""The hybrid router: the tools keywords find, then the embedding tier's nearest ones.

One code path serves the router's gRPC servicer, its CLI, evaluation and benchmark (with the
embedding index it loads) and the agent's fallback (keywords alone, no model).
"""

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from sstools.common.catalogue import ALWAYS_OFFERED
from sstools.common.language import affirmed, stem, words
from sstools.common.routing.keywords import KeywordIndex

# Control characters and the like carry no meaning for routing; they become spaces.
_UNPRINTABLE = re.compile(r"[^\w\s.,;:!?()'\"’«»/#@%+=*<>\[\]{}-]", re.UNICODE)
# FR-031: a dashboard list is worth prefetching for find/list requests only, not when the
# user wants to create one or asks why something is slow or broken.
_NO_PREFETCH = frozenset(
    stem(word)
    for word in (
        "создай",
        "создать",
        "создание",
        "новый",
        "как",
        "почему",
        "зачем",
        "медленно",
        "тормозит",
        "скорость",
        "производительность",
        "create",
        "new",
        "how",
        "why",
        "slow",
        "speed",
        "performance",
    )
)
_SEARCH_TOOL = "search_dashboards"
# Ids, numbers and punctuation ("дашборд 42", "task 7f3a?") say nothing about which tool is
# meant, and the model's cost grows with every token: they are left out of what it embeds.
_NOT_EMBEDDED = re.compile(r"\S*\d\S*|[^\w\s]")


@dataclass(frozen=True)
class ScoredTool:
    tool: str
    score: float


class Embedder(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def default_threshold(self) -> float: ...


class Embeddings(Protocol):
    """The embedding tier (the router service's index): each tool's similarity to a query."""

    @property
    def embedder(self) -> Embedder: ...
    def scores(self, query: str) -> Sequence[ScoredTool]: ...


class Source(StrEnum):
    ALWAYS = "always"
    KEYWORD = "keyword"
    EMBEDDING = "embedding"


class Tier(StrEnum):
    KEYWORD = "keyword"
    HYBRID = "hybrid"


@dataclass(frozen=True)
class RoutedTool:
    name: str
    source: Source
    score: float


@dataclass(frozen=True)
class RouteContext:
    env_id: str = ""
    object_type: str = ""


@dataclass(frozen=True)
class RouterConfig:
    max_tools: int = 10
    # The embedding tier runs when keywords (show_capabilities included) give fewer tools: by
    # default always, since keywords tuned on one set of requests miss other people's words (the
    # router's holdout set: 0.919 of cases with keywords first, 0.965 with both tiers always).
    fallback_below: int = 11
    embedding_top_k: int = 3
    similarity_threshold: float | None = None  # None: the model's own tuned threshold
    max_query_chars: int = 4000
    max_embedded_chars: int = 1000


@dataclass
class RouteResult:
    tools: list[RoutedTool]
    tier: Tier
    keyword_ms: float
    embedding_ms: float = 0.0
    degraded: bool = False
    model: str = ""
    prefetch_dashboards: bool = False
    negated: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [tool.name for tool in self.tools]


class Router:
    def __init__(
        self, keywords: KeywordIndex, embeddings: Embeddings | None, config: RouterConfig = RouterConfig()
    ) -> None:
        self._keywords = keywords
        self._embeddings = embeddings
        self.config = config

    @property
    def degraded(self) -> bool:
        return self._embeddings is None

    @property
    def model_name(self) -> str:
        """The embedding model's name, empty when degraded."""
        return "" if self._embeddings is None else self._embeddings.embedder.name

    @property
    def threshold(self) -> float | None:
        if self._embeddings is None:
            return None
        configured = self.config.similarity_threshold
        return configured if configured is not None else self._embeddings.embedder.default_threshold

    def route(self, query: str, max_tools: int = 0, context: RouteContext = RouteContext()) -> RouteResult:
        limit = min(max_tools or self.config.max_tools, self.config.max_tools)
        text = _UNPRINTABLE.sub(" ", query[: self.config.max_query_chars])
        started = time.perf_counter()
        keyword_result = self._keywords.match(text)
        matched = [
            RoutedTool(match.tool, Source.KEYWORD, float(match.hits)) for match in keyword_result.matches
        ]
        always = (
            [] if ALWAYS_OFFERED in keyword_result.tools else [RoutedTool(ALWAYS_OFFERED, Source.ALWAYS, 0.0)]
        )
        result = RouteResult(
            [*matched, *always],
            Tier.KEYWORD,
            keyword_ms=(time.perf_counter() - started) * 1000,
            degraded=self.degraded,
            negated=sorted(keyword_result.negated),
        )
        if len(result.tools) < self.config.fallback_below and text.strip() and self._embeddings is not None:
            started = time.perf_counter()
            similar = self._similar_tools(text, exclude=set(result.names) | keyword_result.negated)
            result.tools = [*matched, *similar, *always]
            result.tier = Tier.HYBRID
            result.embedding_ms = (time.perf_counter() - started) * 1000
            result.model = self.model_name
        result.tools = _cap(result.tools, limit)
        result.prefetch_dashboards = (
            _SEARCH_TOOL in keyword_result.tools
            and not context.object_type
            and not any(word.stem in _NO_PREFETCH for word in words(text))
        )
        return result

    def _similar_tools(self, text: str, exclude: set[str]) -> list[RoutedTool]:
        """Up to top-K tools whose descriptions are close enough to the message."""
        assert self._embeddings is not None
        assert self.threshold is not None
        similar: list[RoutedTool] = []
        asked = affirmed(text[: self.config.max_embedded_chars])
        meaningful = " ".join(_NOT_EMBEDDED.sub(" ", asked).split())
        for scored in self._embeddings.scores(meaningful or text[: self.config.max_embedded_chars]):
            if len(similar) == self.config.embedding_top_k or scored.score < self.threshold:
                break
            if scored.tool not in exclude:
                similar.append(RoutedTool(scored.tool, Source.EMBEDDING, scored.score))
        return similar


def _cap(tools: list[RoutedTool], limit: int) -> list[RoutedTool]:
    """At most ``limit`` tools, show_capabilities always among them."""
    if len(tools) <= limit:
        return tools
    others = [tool for tool in tools if tool.name != ALWAYS_OFFERED][: max(limit - 1, 0)]
    always = next(tool for tool in tools if tool.name == ALWAYS_OFFERED)
    return [*others, always]
