"""Nothing read from a model directory may run code (checkpoints are loaded without unpickling)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")  # the [neural] extra

import os

from helpers import assert_clean_failure, run_cli, write_tiny_dataset


class _Payload:
    """Unpickling this calls os.system: what an attacker would put into a shared checkpoint."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_resume_refuses_a_pickled_payload_in_the_checkpoint(tmp_path, capsys):
    data = write_tiny_dataset(tmp_path / "data")
    out = tmp_path / "model"
    code, _, err = run_cli(
        [
            "train",
            "--model",
            "astec",
            "--data",
            str(data),
            "--out",
            str(out),
            "--epochs",
            "1",
            "--valid-fraction",
            "0",
            "--keep-checkpoints",
        ],
        capsys,
    )
    assert code == 0, err
    last = out / "checkpoints" / "last.pt"
    assert last.is_file()
    marker = tmp_path / "code-ran"
    torch.save({"model": _Payload(marker), "epoch": 0}, last)
    code, _, err = run_cli(
        [
            "train",
            "--model",
            "astec",
            "--data",
            str(data),
            "--out",
            str(out),
            "--epochs",
            "2",
            "--valid-fraction",
            "0",
            "--resume",
        ],
        capsys,
    )
    assert not marker.exists(), "unpickling the checkpoint ran code"
    assert_clean_failure(code, err, "last.pt", "not a readable checkpoint")


def test_resume_without_a_checkpoint_is_one_line(tmp_path, capsys):
    data = write_tiny_dataset(tmp_path / "data")
    code, _, err = run_cli(["train", "--model", "astec", "--data", str(data), "--out", str(tmp_path / "m"), "--resume"], capsys)
    assert_clean_failure(code, err, "last.pt", "nothing to resume")
