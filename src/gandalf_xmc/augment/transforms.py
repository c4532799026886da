"""The two kinds of batch transform, and the one way a model without epochs uses them.

* A **text transform** (:class:`~.labelmix.LabelMix`, :class:`~.conventional.SynonymReplacement`)
  maps ``(texts, Y) -> (texts, Y)``: any model can apply it, before its features.
* A **feature mix** (:class:`~.conventional.FeatureMix`: MixUp, Label-MixUp) maps
  ``(X, Y, label features) -> (new X rows, new Y rows)`` in the model's input space: only models
  with vector inputs can apply it.

Each transform says which it is in ``acts_on`` (``"texts"`` or ``"features"``), so a model asks
that, not the transform's class. Models trained in epochs draw a text transform afresh for every
batch; the others draw it once, with :func:`append_text_draw`.
"""

from __future__ import annotations

from typing import Literal, Protocol

import numpy as np
import scipy.sparse as sp


class BatchTransform(Protocol):
    """What every training-set transform says: the kind of input it transforms."""

    acts_on: Literal["texts", "features"]


def append_text_draw(
    transform, texts: list[str], Y: sp.csr_matrix, weights: np.ndarray | None = None
) -> tuple[list[str], sp.csr_matrix, np.ndarray | None]:
    """A text transform drawn once over ``texts``: the points it changed are appended (with the
    weight of the point they came from), the originals stay."""
    mixed_texts, mixed_Y = transform(texts, Y)
    changed = np.flatnonzero([a != b for a, b in zip(mixed_texts, texts)])
    texts = list(texts) + [mixed_texts[i] for i in changed]
    Y = sp.vstack([Y, sp.csr_matrix(mixed_Y)[changed]], format="csr", dtype=np.float32)
    if weights is not None:
        weights = np.concatenate([weights, weights[changed]])
    return texts, Y, weights
