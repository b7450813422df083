"""Relate: a message's phrases against a schema's names, over the router's gRPC with its real
model. The schema is a lending library's, made up here: no demo or eval data of the project is
about books. The phrases are ones the model ranks right by a margin of 0.02 or more; not every
phrase is so ("дата выдачи" is nearer "due date" than "issued at"), which is why the planner takes
these scores beside spelling, not instead of it."""

import grpc
import numpy as np
import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client.parser import text_string_to_metric_families

from sstools.devstack.keys import PUBLIC_KEYS, service_channel
from sstools.devstack.testing import http_get, started_service
from sstools.router.embedding.backends import load_embedder
from sstools.router.embedding.relate import (
    MAX_LABELS,
    MAX_QUERIES,
    MAX_TEXT_CHARS,
    RelateLimitError,
    Relater,
    check_limits,
)
from sstools.router.main import assemble
from sstools.router.settings import RouterSettings
from sstools.router.v1 import router_pb2, router_pb2_grpc

LABELS = [
    "books",
    "authors",
    "loans",
    "readers",
    "issued at",
    "due date",
    "reader city",
    "genre",
    "title",
    "publisher",
    "returned at",
    "page count",
]
# Each phrase and the name it must rank first; Russian phrases in the inflected forms people type.
RIGHT = {
    "книги": "books",
    "читателей": "readers",
    "авторов": "authors",
    "жанр": "genre",
    "издательство": "publisher",
    "число страниц": "page count",
    "когда вернули": "returned at",
    "займы": "loans",
    "how many loans per reader": "loans",
    "when was it issued": "issued at",
}


def _settings(embedding_model: str = "onnx-e5") -> RouterSettings:
    return RouterSettings(
        grpc_port=0,
        metrics_port=0,
        embedding_model=embedding_model,
        jwt_public_keys=PUBLIC_KEYS,
    )


async def _relate(port: int, queries: list[str], labels: list[str]) -> router_pb2.RelateResponse:
    async with service_channel(f"127.0.0.1:{port}") as channel:
        request = router_pb2.RelateRequest(queries=queries, labels=labels)
        return await router_pb2_grpc.RouterServiceStub(channel).Relate(request, timeout=30)


async def _metrics(port: int) -> dict[str, float]:
    exposition = (await http_get(f"http://127.0.0.1:{port}/metrics")).text
    return {
        sample.name + "".join(f"|{value}" for value in sample.labels.values()): sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
    }


def _matrix(reply: router_pb2.RelateResponse) -> np.ndarray:
    return np.asarray(reply.scores, np.float32).reshape(reply.rows, reply.columns)


async def test_each_phrase_ranks_its_schema_name_first_across_languages(
    tracer_provider: TracerProvider,
) -> None:
    queries = list(RIGHT)
    async with started_service(_settings(), assemble, tracer_provider) as service:
        first = await _relate(service.ports["grpc"], queries, LABELS)
        again = await _relate(service.ports["grpc"], queries, [*reversed(LABELS), "books"])
        empty = await _relate(service.ports["grpc"], [], LABELS)
        samples = await _metrics(service.ports["metrics"])
    assert (first.rows, first.columns, len(first.scores)) == (
        len(queries),
        len(LABELS),
        len(queries) * len(LABELS),
    )
    assert not first.degraded
    assert first.model.startswith("onnx-e5:")
    scores = _matrix(first)
    ranked = {query: LABELS[int(np.argmax(row))] for query, row in zip(queries, scores, strict=True)}
    assert ranked == RIGHT
    assert ((scores > -1.0001) & (scores < 1.0001)).all()

    # the second call's names were all kept: the same scores, in the order asked, duplicates too
    again_scores = _matrix(again)
    assert again_scores.shape == (len(queries), len(LABELS) + 1)
    np.testing.assert_allclose(again_scores[:, : len(LABELS)], scores[:, ::-1], atol=1e-4)
    np.testing.assert_allclose(again_scores[:, -1], scores[:, 0], atol=1e-4)
    assert (empty.rows, empty.columns, list(empty.scores)) == (0, len(LABELS), [])

    assert samples["sstools_router_relate_labels_total|miss"] == len(LABELS)
    assert samples["sstools_router_relate_labels_total|hit"] == len(LABELS)
    assert samples["sstools_router_relate_seconds_count"] == 3
    assert samples["sstools_router_degraded_relates_total"] == 0


async def test_requests_over_the_bounds_are_invalid_and_say_which(tracer_provider: TracerProvider) -> None:
    too_long = "я" * (MAX_TEXT_CHARS + 1)
    beyond = [
        (["книги"] * (MAX_QUERIES + 1), ["books"], f"{MAX_QUERIES + 1} queries, at most {MAX_QUERIES}"),
        (["книги"], ["books"] * (MAX_LABELS + 1), f"{MAX_LABELS + 1} labels, at most {MAX_LABELS}"),
        ([too_long], ["books"], f"queries[0] is {MAX_TEXT_CHARS + 1} characters long"),
        (["книги"], ["books", too_long], f"labels[1] is {MAX_TEXT_CHARS + 1} characters long"),
    ]
    async with started_service(_settings(), assemble, tracer_provider) as service:
        for queries, labels, said in beyond:
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await _relate(service.ports["grpc"], queries, labels)
            assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert said in (error.value.details() or "")
        at_most = await _relate(service.ports["grpc"], ["я" * MAX_TEXT_CHARS], ["b" * MAX_TEXT_CHARS])
    assert at_most.rows == at_most.columns == 1


def test_the_bounds_themselves_are_allowed() -> None:
    check_limits(["q"] * MAX_QUERIES, ["l" * MAX_TEXT_CHARS] * MAX_LABELS)
    with pytest.raises(RelateLimitError):
        check_limits([], ["l"] * (MAX_LABELS + 1))


async def test_without_a_model_relate_says_degraded_and_scores_nothing(
    tracer_provider: TracerProvider,
) -> None:
    async with started_service(_settings("st:/nowhere/no-such-model"), assemble, tracer_provider) as service:
        reply = await _relate(service.ports["grpc"], ["книги"], ["books", "authors"])
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await _relate(service.ports["grpc"], ["книги"] * (MAX_QUERIES + 1), ["books"])
        samples = await _metrics(service.ports["metrics"])
    assert reply.degraded
    assert (list(reply.scores), reply.rows, reply.columns, reply.model) == ([], 0, 0, "")
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # bounds hold without a model too
    assert samples["sstools_router_degraded_relates_total"] == 1


def test_label_cache_keeps_the_most_recent_names_and_a_larger_request_still_scores_all() -> None:
    relater = Relater(load_embedder("onnx-e5", 1), cache_size=2)
    whole = relater.relate(["читателей"], ["books", "readers", "loans"])
    assert (whole.labels_kept, whole.labels_embedded) == (0, 3)
    assert whole.scores.shape == (1, 3)
    assert int(np.argmax(whole.scores[0])) == 1
    kept = relater.relate(["читателей"], ["loans", "readers"])  # the two last embedded were kept
    assert (kept.labels_kept, kept.labels_embedded) == (2, 0)
    np.testing.assert_allclose(kept.scores[0], whole.scores[0, [2, 1]], atol=1e-4)
    evicted = relater.relate(["читателей"], ["books"])
    assert (evicted.labels_kept, evicted.labels_embedded) == (0, 1)
