"""The names of the training sets (``--augment``) and what each is, without importing what builds
them: the command line lists them at start-up."""

from __future__ import annotations

TRAINING_SETS = {
    "none": "D: the training points as given (a directory written by `gandalf augment` gives D u Z)",
    "gandalf": "G = D u Z: original + label points with co-occurrence soft targets (the paper)",
    "gandalf-tempered": "D u Z with tempered soft targets (shrunk, size-weighted, at most 10 co-labels at half "
                        "weight) and label points at half loss weight",
    "identity": "Z^1 u D: original + label points with self-annotation only",
    "z-only": "Z: label points only",
    "uniform": "U(G, N): N points drawn uniformly from G",
    "glas": "G with y = sigmoid(S) (GLaS's symmetrised conditionals)",
    "random-walk": "D u Z with ECLARE's random-walk graph",
    "labelmix": "D, each batch transformed by LabelMix (p 0.4, tail-skewed label choice)",
    "synonym": "D, each batch's texts rewritten with nearest-word synonyms (p 0.4 a point, 0.3 a word)",
    "mixup": "D + 0.4 N MixUp points (two points' inputs and targets interpolated)",
    "label-mixup": "D + 0.4 N Label-MixUp points (a point's input interpolated with one of its labels' text)",
    "auto": "the training set that does best on the validation split (see train/auto.py)",
}
