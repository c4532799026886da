"""Validation protocols: random, whole groups, and new items (near-duplicates and same-label
siblings of a held-out point leave training), checked against a brute-force reading."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gandalf_xmc.data.dataset import Split, XMCDataset
from gandalf_xmc.errors import ConfigError
from gandalf_xmc.features import TextFeaturizer
from gandalf_xmc.workflow.validation import NEAR_DUPLICATE, carve_validation, folds_available

from helpers import run_cli


def dataset(groups=True) -> XMCDataset:
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(40)]
    texts, rows = [], []
    for i in range(120):
        base = " ".join(rng.choice(words, size=5, replace=False))
        # every fifth point copies the one before it (near-duplicates), others are fresh
        texts.append(texts[-1] + " extra" if i % 5 == 4 else base)
        rows.append(sorted(set(rng.choice(30, size=2, replace=False).tolist())))
    rows[7] = rows[3]  # two points with the same label set (siblings)
    Y = sp.csr_matrix(
        (np.ones(sum(map(len, rows)), np.float32), (np.repeat(np.arange(120), [len(r) for r in rows]), np.concatenate(rows))),
        shape=(120, 30),
    )
    split = Split(
        [f"p{i}" for i in range(120)],
        texts,
        Y,
        np.zeros((0, 2), np.int64),
        groups=[f"g{i % 12}" for i in range(120)] if groups else None,
    )
    return XMCDataset("toy", [f"L{j}" for j in range(30)], [f"label {j}" for j in range(30)], {"trn": split})


def test_random_protocol_is_a_seeded_partition():
    ds = dataset()
    rest, valid = carve_validation(ds, 0.25, seed=3)
    assert len(valid) == 30 and len(rest.train) == 90
    assert sorted(valid.uids + rest.train.uids) == sorted(ds.train.uids)
    again, valid2 = carve_validation(ds, 0.25, seed=3)
    assert valid2.uids == valid.uids


def test_folds_are_disjoint_shares_of_one_seeded_order():
    ds = dataset()
    assert folds_available(120, 0.25) == 4 and folds_available(120, 0.3) == 3 and folds_available(120, 0.0) == 0
    _, first = carve_validation(ds, 0.25, seed=3)
    shares = [carve_validation(ds, 0.25, seed=3, fold=f) for f in range(4)]
    assert shares[0][1].uids == first.uids  # fold 0 is the share a call without a fold holds out
    held = [set(valid.uids) for _, valid in shares]
    assert all(len(h) == 30 for h in held) and set().union(*held) == set(ds.train.uids)  # disjoint, all points
    for rest, valid in shares:
        assert sorted(rest.train.uids + valid.uids) == sorted(ds.train.uids)
    # the new-items protocol draws point by point too; its folds drop the copies of their own points
    rest, valid = carve_validation(ds, 0.25, seed=3, protocol="new-items", fold=2)
    assert set(valid.uids) == held[2] and not set(rest.train.uids) & held[2]
    with pytest.raises(ConfigError, match="no validation fold 4"):
        carve_validation(ds, 0.25, seed=3, fold=4)
    with pytest.raises(ConfigError, match="no validation fold 1 of the group protocol"):
        carve_validation(ds, 0.25, seed=3, protocol="group", fold=1)


def test_group_protocol_holds_out_whole_groups():
    ds = dataset()
    rest, valid = carve_validation(ds, 0.25, seed=1, protocol="group")
    held, kept = set(valid.groups), set(rest.train.groups)
    assert held and kept and not held & kept  # every group on one side only
    assert len(valid) == 10 * len(held) and len(valid) >= 30  # groups of 10 until a quarter is reached
    assert sorted(valid.uids + rest.train.uids) == sorted(ds.train.uids)
    with pytest.raises(ConfigError, match="needs a 'group' key"):
        carve_validation(dataset(groups=False), 0.25, seed=1, protocol="group")


def test_new_items_protocol_drops_near_duplicates_and_siblings_by_brute_force():
    ds = dataset()
    rest, valid = carve_validation(ds, 0.25, seed=2, protocol="new-items")
    index = {u: i for i, u in enumerate(ds.train.uids)}
    v = np.array([index[u] for u in valid.uids])
    t = np.array([index[u] for u in rest.train.uids])
    # brute force: dense cosines of the same TF-IDF rows, label sets as Python sets
    X = TextFeaturizer().fit_transform(ds.train.texts).toarray()
    cos = X @ X[v].T
    sets = [frozenset(ds.train.Y[i].indices.tolist()) for i in range(len(ds.train))]
    held_sets = {sets[i] for i in v}
    close = {i for i in range(len(ds.train)) if cos[i].max() >= NEAR_DUPLICATE or sets[i] in held_sets}
    assert set(t.tolist()) == set(range(len(ds.train))) - close
    assert set(v.tolist()) <= close and len(close) > len(v)  # some training points did leave
    assert not set(t.tolist()) & set(v.tolist())


def test_cli_records_the_protocol_and_refuses_group_without_groups(tiny_dir, tmp_path, capsys):
    import json

    code, _, err = run_cli(
        [
            "train",
            "--data",
            str(tiny_dir),
            "--out",
            str(tmp_path / "m"),
            "--valid-fraction",
            "0.25",
            "--valid-protocol",
            "new-items",
        ],
        capsys,
    )
    assert code == 0, err
    assert json.loads((tmp_path / "m" / "training.json").read_text())["valid_protocol"] == "new-items"
    code, _, err = run_cli(["train", "--data", str(tiny_dir), "--out", str(tmp_path / "g"), "--valid-protocol", "group"], capsys)
    assert code == 2 and err.startswith("error: the group protocol needs a 'group' key"), err


def test_future_protocol_takes_held_out_items_out_of_the_label_space():
    import numpy as np
    import scipy.sparse as sp

    from gandalf_xmc.data.dataset import Split, XMCDataset
    from gandalf_xmc.workflow.validation import carve_validation

    labels = ["L0", "L1", "L2", "L3"]
    Y = sp.csr_matrix(np.array([[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 1], [0, 1, 0, 1]], dtype=np.float32))
    uids = ["L0", "x", "L2", "y"]  # points 0 and 2 are themselves labels L0 and L2
    fp = np.array([[0, 0], [2, 2]])
    ds = XMCDataset("toy", labels, ["zero", "one", "two", "three"], {"trn": Split(uids, ["a", "b", "c", "d"], Y, fp)})
    for seed in range(6):
        rest, valid = carve_validation(ds, 0.5, seed, "future")
        held = set(valid.uids)
        gone = [j for j, u in enumerate(labels) if u in held]
        keep = [j for j in range(4) if j not in gone]
        assert rest.label_uids == [labels[j] for j in keep] and rest.n_labels == len(keep)
        assert rest.label_texts == [ds.label_texts[j] for j in keep]
        rows = {u: i for i, u in enumerate(uids)}
        assert rest.train.Y.toarray().tolist() == [Y.toarray()[rows[u], keep].tolist() for u in rest.train.uids]
        assert valid.Y.toarray().tolist() == [Y.toarray()[rows[u], keep].tolist() for u in valid.uids]
        # a training point keeps its own label's pair (renumbered); a held-out item has no own label left
        assert {(rest.train.uids[r], rest.label_uids[j]) for r, j in rest.train.filter_pairs.tolist()} == {
            (u, u) for u in rest.train.uids if u in ("L0", "L2")
        }
        assert valid.filter_pairs.size == 0


def test_future_family_protocol_holds_out_whole_families_and_their_labels():
    """Items built together (a family: their group key) are held out together, and every label that
    is a held-out item leaves the label space: a held-out item's sibling is no answer either."""
    labels = ["a1", "a2", "b1", "c1", "c2", "d1"]
    uids = ["a1", "a2", "b1", "c1", "c2", "d1", "x"]
    groups = ["a", "a", "b", "c", "c", "d", "x"]
    Y = sp.csr_matrix(
        np.array(
            [
                [0, 1, 0, 0, 0, 1],
                [1, 0, 1, 0, 0, 0],
                [0, 0, 0, 1, 0, 1],
                [0, 0, 1, 0, 1, 0],
                [0, 0, 0, 1, 0, 1],
                [1, 0, 0, 0, 0, 0],
                [0, 1, 1, 0, 1, 0],
            ],
            dtype=np.float32,
        )
    )
    fp = np.array([[i, i] for i in range(6)])
    ds = XMCDataset(
        "toy", labels, [f"text {u}" for u in labels], {"trn": Split(uids, [f"text {u}" for u in uids], Y, fp, groups=groups)}
    )
    seen = set()
    for seed in range(8):
        rest, valid = carve_validation(ds, 0.3, seed, "future-family")
        held = set(valid.uids)
        families = {g for u, g in zip(uids, groups) if u in held}
        assert held == {u for u, g in zip(uids, groups) if g in families}  # whole families, nothing else
        assert set(rest.train.uids) == set(uids) - held
        keep = [j for j, u in enumerate(labels) if u not in held]
        assert rest.label_uids == [labels[j] for j in keep]
        rows = {u: i for i, u in enumerate(uids)}
        assert valid.Y.toarray().tolist() == [Y.toarray()[rows[u], keep].tolist() for u in valid.uids]
        assert valid.filter_pairs.size == 0
        seen.add(frozenset(families))
    assert len(seen) > 2  # the seed chooses the families


def test_future_protocol_is_for_benchmarks_only(tiny_dir, tmp_path):
    import pytest

    from gandalf_xmc.augment import AugmentConfig
    from gandalf_xmc.data import load_dataset
    from gandalf_xmc.errors import ConfigError
    from gandalf_xmc.models.registry import model_config
    from gandalf_xmc.workflow.pipeline import train_model

    with pytest.raises(ConfigError, match="the future protocol is for benchmarks/suite.py"):
        train_model(
            load_dataset(tiny_dir),
            tmp_path / "m",
            model_config("linear"),
            AugmentConfig("none"),
            valid_protocol="future",
            progress=False,
        )
    assert not (tmp_path / "m").exists()
