"""The embedding model: WordLlama's static token vectors, loaded with numpy and tokenizers only.

Never imported on the hook path (numpy alone costs ~150 ms): the embedding
worker, the resident server's embedding thread and ``memory search`` load it.

Why not ``wordllama.WordLlama.load()``: its loader looks for the tokenizer
under ``wordllama/tokenizer/`` while the wheel ships ``wordllama/tokenizers/``,
then downloads it from a hub; importing the package also imports requests and
huggingface_hub (~170-370 ms more) and sets the root logger to INFO. The two
files it ships are all we need: a safetensors matrix (32,000 x 256, float16,
16 MB) read here with numpy, and a tokenizer.json read by ``tokenizers``. A
text's vector is the mean of its tokens' rows (WordLlama's own pooling),
without the tokens of common function words, centred on the vocabulary's
mean vector and normalised, so a dot product is the cosine.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

from agent_hooks.features.vectors import MODEL_ID  # noqa: F401 - stored with every vector this model makes

WEIGHTS = os.path.join("weights", "l2_supercat_256.safetensors")
TOKENIZER = os.path.join("tokenizers", "l2_supercat_tokenizer_config.json")
TENSOR = "embedding.weight"
# Longer texts are cut: a note's first pages say what it is about, and the cost stays bounded.
MAX_CHARS = 8000
BATCH = 64
# Function words carry no meaning of their own; in a mean they pull every text towards the same place.
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her
here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
now of off on once only or other our ours ourselves out over own same she should so some such than that the
their theirs them themselves then there these they this those through to too under until up very was we
were what when where which while who whom why will with would you your yours yourself yourselves
""".split())


class Unavailable(Exception):
    """The model cannot be used (package not installed, files missing or broken); the reason is the message."""


def model_dir(config: dict[str, Any]) -> str:
    """Where the model's files are: ``memory.model_dir``, else the ones the wordllama wheel ships.

    Found without importing wordllama (its import has side effects and costs time).
    """
    configured = str(config["memory"].get("model_dir") or "")
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    import importlib.util

    try:
        spec = importlib.util.find_spec("wordllama")
    except (ImportError, ValueError) as exc:
        raise Unavailable(f"the wordllama package cannot be found: {exc}") from None
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable("the wordllama package is not installed (pip install 'agent-hooks[memory]')")
    return list(spec.submodule_search_locations)[0]


def _read_weights(path: str) -> Any:
    """The embedding matrix of a safetensors file, as float32; Unavailable when the file is not one."""
    import numpy as np

    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) != 8:
                raise Unavailable(f"{path}: too short for a safetensors file")
            (n,) = struct.unpack("<Q", head)
            if n > 1 << 20:
                raise Unavailable(f"{path}: header of {n} bytes is not a safetensors header")
            try:
                header = json.loads(f.read(n))
                meta = header[TENSOR]
                dtype = {"F16": "<f2", "F32": "<f4"}[meta["dtype"]]
                rows, dim = (int(x) for x in meta["shape"])
                start, end = (int(x) for x in meta["data_offsets"])
            except (ValueError, KeyError, TypeError) as exc:
                raise Unavailable(f"{path}: not a safetensors file with {TENSOR!r}: {exc}") from None
            width = np.dtype(dtype).itemsize
            if rows <= 0 or dim <= 0 or end - start != rows * dim * width:
                raise Unavailable(f"{path}: shape {rows}x{dim} does not match its data")
            f.seek(8 + n + start)
            data = np.fromfile(f, dtype=dtype, count=rows * dim)
    except OSError as exc:
        raise Unavailable(f"cannot read the model's weights: {exc}") from None
    if data.size != rows * dim:
        raise Unavailable(f"{path}: truncated ({data.size} of {rows * dim} values)")
    matrix = data.reshape(rows, dim).astype(np.float32)
    if not np.isfinite(matrix).all():
        raise Unavailable(f"{path}: the weights hold values that are not numbers")
    return matrix


class Model:
    """A loaded model: :meth:`embed` turns texts into unit vectors (float32 rows)."""

    def __init__(self, matrix: Any, tokenizer: Any) -> None:
        import numpy as np

        self.np = np
        self.tokenizer = tokenizer
        # Centred on the vocabulary's mean: raw static vectors share a large common direction that
        # makes every pair of texts look alike.
        self.matrix = matrix - matrix.mean(axis=0, keepdims=True)
        self.dim = int(matrix.shape[1])
        stop: set[int] = set()
        for word in STOPWORDS:
            for form in (word, " " + word, word.capitalize(), " " + word.capitalize()):
                ids = tokenizer.encode(form, add_special_tokens=False).ids
                if len(ids) == 1:
                    stop.add(ids[0])
        self.stop = np.zeros(matrix.shape[0], dtype=bool)
        self.stop[sorted(i for i in stop if 0 <= i < matrix.shape[0])] = True

    def embed(self, texts: list[str]) -> Any:
        """One unit vector per text (a text with no meaningful token gets the zero vector)."""
        np = self.np
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        rows = self.matrix.shape[0]
        for start in range(0, len(texts), BATCH):
            chunk = [t[:MAX_CHARS] for t in texts[start:start + BATCH]]
            for i, enc in enumerate(self.tokenizer.encode_batch(chunk, add_special_tokens=False)):
                ids = np.asarray(enc.ids, dtype=np.int64)
                ids = ids[(ids >= 0) & (ids < rows)]
                kept = ids[~self.stop[ids]]
                ids = kept if kept.size else ids
                if ids.size:
                    out[start + i] = self.matrix[ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


def load(config: dict[str, Any]) -> Model:
    """Load the model (about 0.3 s); Unavailable says why it cannot be. Never touches the network."""
    where = model_dir(config)
    try:
        import numpy  # noqa: F401
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
    tokenizer.no_padding()
    tokenizer.no_truncation()
    matrix = _read_weights(os.path.join(where, WEIGHTS))
    return Model(matrix, tokenizer)
