"""The files ``gandalf augment`` writes, read by other XMC tools in their own environment: PECOS
trains on the ``--format npz`` matrices (soft targets as its relevance matrix), napkinXC on the
``--format bow`` file, and both predict; the predictions come back to ``gandalf evaluate`` as
``.npz``.

    python benchmarks/interop.py [--data jargon] [--npz-augment gandalf]
                                 [--bow-augment identity]

The npz files carry soft targets (the paper's Gandalf by default); the bag-of-words format has
0/1 labels only, so it gets a training set without soft targets (``identity``). Runs in the
peers' environment of ``peers.py``. Prints one line per tool with the shapes it read and the test
P@1 that ``gandalf evaluate`` gives its predictions; exits non-zero if a tool cannot read a file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from peers import peers_python

CHILD = r"""
import json, sys
import numpy as np, scipy.sparse as sp
tool, d, out = sys.argv[1:4]
if tool == "pecos":
    from pecos.utils import smat_util
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel
    X, Y, R = (smat_util.load_matrix(f"{d}/{n}.trn.npz").tocsr().astype(np.float32) for n in ("X", "Y", "R"))
    C = Indexer.gen(LabelEmbeddingFactory.create(Y, X, method="pifa"), indexer_type="hierarchicalkmeans")
    model = XLinearModel.train(X, Y, C=C, R=R)
    Xt = smat_util.load_matrix(f"{d}/X.tst.npz").tocsr().astype(np.float32)
    P = model.predict(Xt, only_topk=5).tocsr()
    shapes = {"X": X.shape, "Y": Y.shape, "R soft values": int((R.data != 1).sum())}
else:
    from napkinxc.datasets import load_libsvm_file
    from napkinxc.models import PLT
    X, Y = load_libsvm_file(f"{d}/train.txt")
    model = PLT(f"{out}.plt", seed=0)
    model.fit(X, Y)
    Xt, _ = load_libsvm_file(f"{d}/test.txt")
    res = model.predict_proba(Xt, top_k=5)
    n_labels = int(open(f"{d}/train.txt").readline().split()[2])
    rows = [i for i, r in enumerate(res) for _ in r]
    P = sp.csr_matrix(([s for r in res for _, s in r], (rows, [l for r in res for l, _ in r])), shape=(Xt.shape[0], n_labels))
    shapes = {"X": X.shape, "points with labels": sum(1 for y in Y if len(y))}
sp.save_npz(out, P.astype(np.float32))
print(json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in shapes.items()}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="jargon")
    ap.add_argument("--npz-augment", default="gandalf")
    ap.add_argument("--bow-augment", default="identity")
    args = ap.parse_args()
    python = peers_python()
    gandalf = [sys.executable, "-m", "gandalf_xmc.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        augment = {"npz": args.npz_augment, "bow": args.bow_augment}
        for fmt in ("npz", "bow"):
            subprocess.run(
                [
                    *gandalf,
                    "augment",
                    "--data",
                    args.data,
                    "--augment",
                    augment[fmt],
                    "--format",
                    fmt,
                    "--out",
                    str(work / fmt),
                    "--no-progress",
                ],
                check=True,
                capture_output=True,
            )
        for tool, fmt in (("pecos", "npz"), ("napkinxc", "bow")):
            pred = work / f"pred-{tool}.npz"
            run = subprocess.run([str(python), "-c", CHILD, tool, str(work / fmt), str(pred)], capture_output=True, text=True)
            if run.returncode != 0:
                raise SystemExit(f"{tool} could not read --augment {augment[fmt]} --format {fmt}: {run.stderr.strip()[-2000:]}")
            shapes = json.loads(run.stdout.strip().splitlines()[-1])
            scores = subprocess.run(
                [*gandalf, "evaluate", str(pred), "--data", args.data, "-k", "1", "--json"],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            print(
                f"{tool} read gandalf augment --augment {augment[fmt]} --format {fmt}: {shapes}; "
                f"gandalf evaluate of its .npz predictions: P@1 {json.loads(scores)['P@1']:.2f}"
            )


if __name__ == "__main__":
    main()
