"""The router's routing: keywords, then the embedding tier's nearest tools, negations and context."""

import time

import pytest

from sstools.common.language import affirmed
from sstools.common.routing.keywords import KeywordIndex
from sstools.common.routing.router import RouteContext, Router, RouterConfig, Source, Tier
from sstools.devstack.policy_table import POLICY_TABLE
from sstools.router.settings import RouterSettings
from sstools.router.warmup import build_router

ALWAYS_OFFERED = "show_capabilities"  # DESIGN.md: offered with every route, so help is always at hand


def test_show_capabilities_is_always_offered(router: Router) -> None:
    for message in ("deploy dashboard 42 to prod", "покажи окружения", "", "???"):
        assert ALWAYS_OFFERED in router.route(message).names, message


def test_the_embedding_tier_adds_its_nearest_tools_after_what_keywords_found(router: Router) -> None:
    result = router.route("покажи дашборды с проблемами валидации")
    assert result.tier == Tier.HYBRID
    sources = [tool.source for tool in result.tools]
    assert sources[:2] == [Source.KEYWORD, Source.KEYWORD]
    assert {"search_dashboards", "get_health_summary"} <= set(result.names[:2])
    assert Source.EMBEDDING in sources
    assert sources.index(Source.EMBEDDING) > max(
        i for i, source in enumerate(sources) if source == Source.KEYWORD
    )


def test_keywords_first_where_configured_answer_alone_when_confident() -> None:
    """ROUTER_FALLBACK_BELOW=3: the embedding tier only when keywords find fewer than three tools."""
    keywords_first = build_router(RouterSettings(fallback_below=3)).router
    result = keywords_first.route("покажи дашборды с проблемами валидации")
    assert result.tier == Tier.KEYWORD
    assert result.embedding_ms == 0
    assert {"search_dashboards", "get_health_summary"} <= set(result.names)
    assert all(tool.source != Source.EMBEDDING for tool in result.tools)
    assert keywords_first.route("сделай резерв копию прода").tier == Tier.HYBRID


def test_too_few_keywords_bring_in_the_embedding_tier(router: Router) -> None:
    result = router.route("сделай резерв копию прода")
    assert result.tier == Tier.HYBRID
    assert result.model.startswith("onnx-e5:")
    assert "run_backup" in result.names
    embedded = [tool for tool in result.tools if tool.source == Source.EMBEDDING]
    assert embedded
    assert all(tool.score >= router.threshold for tool in embedded)  # type: ignore[operator]
    assert result.names[-1] == ALWAYS_OFFERED


def test_negated_tool_is_offered_by_no_tier(router: Router) -> None:
    result = router.route("не делай бэкап")
    assert result.tier == Tier.HYBRID
    assert "run_backup" not in result.names
    assert result.negated == ["run_backup"]


@pytest.mark.parametrize(
    "message",
    [
        "skip the rollout to prod; validate dashboard 7 with the LLM instead",
        "не выкатывай его в прод, сначала проверь дашборд 7 через LLM",
        "no rollout to production today, only check dashboard 7 with AI",
    ],
)
def test_the_embedding_tier_reads_what_is_asked_not_the_clause_refused(router: Router, message: str) -> None:
    """Keywords may not know the refused clause's verb ("rollout", "выкатывай"); the embedding
    tier, which would read it as a deploy, never sees it."""
    names = router.route(message).names
    assert "run_llm_validation" in names
    assert "deploy_dashboard" not in names


def test_affirmed_keeps_the_clauses_not_opened_by_a_negation() -> None:
    assert affirmed("не выкатывай на прод, а проверь дашборд 7") == "а проверь дашборд 7"
    assert affirmed("List the providers; don't ping them.") == "List the providers"
    assert affirmed("no need to back up: just deploy") == "just deploy"
    # a negated state is a question, not a refusal; a negation later in a clause is the keywords'
    assert affirmed("не работает дашборд 5") == "не работает дашборд 5"
    assert affirmed("почему не грузится дашборд") == "почему не грузится дашборд"
    assert affirmed("не делай бэкап") == ""


def test_answer_never_exceeds_max_tools_and_keeps_show_capabilities(router: Router) -> None:
    message = (
        "deploy, migrate, back up, validate, document, copy and commit dashboard 5, then list envs and tasks"
    )
    assert len(router.route(message).names) > 3
    for limit in (1, 2, 3):
        names = router.route(message, max_tools=limit).names
        assert len(names) == limit
        assert ALWAYS_OFFERED in names
    assert len(router.route(message, max_tools=99).names) <= router.config.max_tools


@pytest.mark.parametrize("message", ["", "   ", "\n\t"])
def test_empty_message_gets_show_capabilities_only(router: Router, message: str) -> None:
    result = router.route(message)
    assert result.names == [ALWAYS_OFFERED]
    assert result.tier == Tier.KEYWORD


def test_100k_character_message_is_answered_quickly(router: Router) -> None:
    message = "покажи дашборды продаж и сделай бэкап " + "очень длинный текст " * 5000
    assert len(message) > 100_000
    started = time.perf_counter()
    result = router.route(message)
    assert time.perf_counter() - started < 2
    assert {"search_dashboards", "run_backup"} <= set(result.names)


def test_binary_garbage_is_answered_not_raised(router: Router) -> None:
    garbage = bytes(range(256)).decode("latin-1") + "\x00\ufffd\U0001f600" + "\u202e" * 50
    result = router.route(garbage * 20)
    assert ALWAYS_OFFERED in result.names
    assert set(result.names) <= set(POLICY_TABLE)


def test_prefetch_only_for_find_and_list_requests(router: Router) -> None:
    assert router.route("покажи дашборды продаж").prefetch_dashboards
    assert router.route("find the finance dashboards").prefetch_dashboards
    assert not router.route("как создать дашборд").prefetch_dashboards
    assert not router.route("почему дашборд 42 тормозит").prefetch_dashboards
    assert not router.route("сделай бэкап прода").prefetch_dashboards
    on_dashboard_page = RouteContext(env_id="prod", object_type="dashboard")
    assert not router.route("покажи дашборды продаж", context=on_dashboard_page).prefetch_dashboards


def test_without_a_model_the_router_answers_by_keywords_and_says_degraded() -> None:
    router = Router(KeywordIndex(), None, RouterConfig())
    result = router.route("сделай резерв копию прода")
    assert result.degraded
    assert result.tier == Tier.KEYWORD
    assert result.model == ""
    assert ALWAYS_OFFERED in result.names


def test_ids_are_not_embedded_and_repeated_questions_hit_the_query_cache() -> None:
    from sstools.router.embedding.backends import load_embedder
    from sstools.router.embedding.index import EmbeddingIndex

    index = EmbeddingIndex(load_embedder("onnx-e5", 1), cache_size=8)
    router = Router(KeywordIndex(), index, RouterConfig())
    first = router.route("сделай резерв копию прода 42")
    second = router.route("сделай резерв копию прода 43!")
    assert first.tier == second.tier == Tier.HYBRID
    assert index.cache_hits == 1  # the same words, other ids: embedded once
    assert first.names == second.names


def test_packaged_catalogue_vectors_belong_to_this_catalogue_and_model() -> None:
    """Like the gRPC stubs: editing the catalogue without `make vectors` fails here."""
    import numpy as np

    from sstools.router.embedding.backends import load_embedder
    from sstools.router.embedding.index import PACKAGED_VECTORS, catalogue_passages, vector_file_name

    embedder = load_embedder("onnx-e5", 1)
    texts = catalogue_passages()
    assert [path.name for path in PACKAGED_VECTORS.glob("*.npy")] == [vector_file_name(embedder, texts)]
    packaged = np.load(PACKAGED_VECTORS / vector_file_name(embedder, texts))
    fresh = embedder.embed(texts)
    # The 4-bit kernels take different SIMD paths on different CPUs (up to 2e-3 apart per
    # component between an AVX-512 EPYC and the machine that packaged them), so compare
    # directions: each packaged vector is its own passage's, far closer to it than to any other.
    similarity = (packaged @ fresh.T) / np.outer(
        np.linalg.norm(packaged, axis=1), np.linalg.norm(fresh, axis=1)
    )
    assert similarity.diagonal().min() > 0.999
    assert (similarity.argmax(axis=1) == np.arange(len(texts))).all()
