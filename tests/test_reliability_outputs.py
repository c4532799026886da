"""Second reliability round, outputs: ``predict --out`` by the new-or-``--force`` rule (never an
input, a device or pipe written to and left as it is), staging clean-up that removes only what
this program made, ``reproduce --out`` by the same rule. Each case asserts the exact line, the exit
status and that nothing outside the output changed (sizes and hashes)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import threading

import pytest

from helpers import copy_model, refused, run_cli, snapshot


@pytest.fixture
def queries(tmp_path):
    path = tmp_path / "q.txt"
    path.write_text("red apple\nwhale\n")
    return path


# ---------------------------------------------------------------------------------------------- predict --out


def test_predict_out_never_replaces_the_dataset_it_reads(work, model_dir, capsys):
    tmp, data = work
    for force in ([], ["--force"]):
        refused(
            capsys,
            tmp,
            ["predict", str(model_dir), "--data", str(data), "--out", str(data / "tst.json.gz"), *force],
            f"{data / 'tst.json.gz'}: is an input of this command ({data}): choose another --out",
        )


def test_predict_out_never_replaces_its_query_file(model_dir, queries, capsys):
    for force in ([], ["--force"]):
        refused(
            capsys,
            queries.parent,
            ["predict", str(model_dir), "--input", str(queries), "--out", str(queries), *force],
            f"{queries}: is an input of this command ({queries}): choose another --out",
        )


def test_predict_out_never_writes_into_the_model(model_dir, tmp_path, queries, capsys):
    m = copy_model(model_dir, tmp_path / "m")
    for name in ("model.json", "new.txt"):
        refused(
            capsys,
            tmp_path,
            ["predict", str(m), "--input", str(queries), "--out", str(m / name), "--force"],
            f"{m / name}: is inside {m}, which this command reads: choose another --out",
        )


def test_predict_out_needs_force_for_an_existing_file(model_dir, queries, capsys):
    out = queries.parent / "p.jsonl"
    out.write_text("mine\n")
    refused(
        capsys,
        queries.parent,
        ["predict", str(model_dir), "--input", str(queries), "--out", str(out)],
        f"{out}: exists; pass --force to replace it",
    )
    code, _, err = run_cli(["predict", str(model_dir), "--input", str(queries), "--out", str(out), "--force"], capsys)
    assert code == 0, err
    assert [line.split('"labels"')[0] for line in out.read_text().splitlines()] == [
        '{"text": "red apple", ',
        '{"text": "whale", ',
    ]


def test_predict_out_through_a_link_writes_the_file_and_keeps_the_link(model_dir, queries, capsys):
    target = queries.parent / "target.jsonl"
    target.write_text("old\n")
    link = queries.parent / "link.jsonl"
    link.symlink_to(target.name)
    code, _, err = run_cli(["predict", str(model_dir), "--input", str(queries), "--out", str(link), "--force"], capsys)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_text().count("\n") == 2 and target.read_text().startswith('{"text": "red apple"')


def test_predict_out_dash_is_standard_output(model_dir, work, capsys):
    tmp, data = work
    before = snapshot(tmp)
    code, out, err = run_cli(["predict", str(model_dir), "--data", str(data), "--out", "-", "-k", "2"], capsys)
    assert code == 0, err
    assert out.splitlines()[0] == "3 4" and len(out.splitlines()) == 4
    assert snapshot(tmp) == before


def test_predict_out_to_a_fifo_is_written_to_not_replaced(model_dir, queries, capsys):
    fifo = queries.parent / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(open(fifo, "rb").read()))
    reader.start()
    code, _, err = run_cli(["predict", str(model_dir), "--input", str(queries), "--out", str(fifo)], capsys)
    reader.join(timeout=60)
    assert code == 0, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert received and received[0].decode().count("\n") == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_predict_out_to_a_device_node_stays_a_device(model_dir, queries, capsys):
    null = queries.parent / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # what /dev/null is
    code, _, err = run_cli(["predict", str(model_dir), "--input", str(queries), "--out", str(null)], capsys)
    assert code == 0, err
    assert stat.S_ISCHR(os.stat(null).st_mode) and os.stat(null).st_rdev == os.makedev(1, 3)


# ---------------------------------------------------------------------------------------------- staging clean-up


def _staging(parent, out_name: str, kind: str = "staging", marked: bool = True, suffix: str = "abcd1234"):
    ending = "tmp" if kind == "staging" else "old"
    d = parent / f".{out_name}.gandalf-{kind}-{suffix}.{ending}"
    d.mkdir()
    if marked:
        (d / ".gandalf-staging").touch()
    return d


def test_clean_up_leaves_a_users_directories_and_another_outputs_staging(work, capsys):
    tmp, data = work
    o = tmp / "o"
    o.mkdir()
    mine = o / ".res.mine.tmp"
    mine.mkdir()
    (mine / "f").write_text("x")
    other_writer = _staging(o, "res.b")  # a live writer of o/res.b: its marker is there
    (other_writer / "part2.txt").write_text("half")
    unmarked = _staging(o, "res", marked=False, suffix="zzzz9999")  # the exact pattern, but not ours
    (unmarked / "keep").write_text("k")
    code, _, err = run_cli(["augment", "--data", str(data), "--out", str(o / "res"), "--no-progress"], capsys)
    assert code == 0, err
    assert (mine / "f").read_text() == "x"
    assert (other_writer / "part2.txt").read_text() == "half"
    assert (unmarked / "keep").read_text() == "k"
    assert (o / "res" / "trn.json.gz").is_file() and not (o / "res" / ".gandalf-staging").exists()


def test_a_killed_writers_staging_is_removed_and_its_old_output_put_back(work, capsys):
    tmp, data = work
    o = tmp / "o"
    o.mkdir()
    stale = _staging(o, "res")
    (stale / "half.txt").write_text("h")
    old = _staging(o, "res", kind="old")  # killed between moving res away and moving the new one in
    (old / "previous").mkdir()
    (old / "previous" / "mine.txt").write_text("the old output")
    from gandalf_xmc.data.atomic import _make_staging, output_lock

    with output_lock(o / "res"):
        fresh = _make_staging(o / "res")
    assert not stale.exists() and not old.exists()
    assert (o / "res" / "mine.txt").read_text() == "the old output"
    assert fresh.is_dir() and fresh.name.startswith(".res.gandalf-staging-")


def test_an_empty_directory_of_the_exact_pattern_is_an_interrupted_mkdtemp(work):
    tmp, _ = work
    empty = _staging(tmp, "res", marked=False)
    from gandalf_xmc.data.atomic import _remove_staging

    _remove_staging(tmp / "res")
    assert not empty.exists()


# ---------------------------------------------------------------------------------------------- reproduce --out


def test_reproduce_out_that_holds_other_files_is_refused(work, capsys):
    tmp, data = work
    out = tmp / "report"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    refused(
        capsys,
        tmp,
        ["reproduce", "--data", str(data), "--out", str(out), "--quick"],
        f"{out}: holds 'notes.txt', which is not part of a report: choose a new --out, or pass --force to write "
        "the report into it",
    )


def test_reproduce_out_inside_the_dataset_is_refused(work, capsys):
    tmp, data = work
    refused(
        capsys,
        tmp,
        ["reproduce", "--data", str(data), "--out", str(data / "report"), "--quick", "--force"],
        f"{data / 'report'}: is the input {data} (or inside it): choose another --out",
    )


def test_reproduce_takes_the_lock(work, capsys):
    tmp, data = work
    from gandalf_xmc.paths import cache_root

    out = tmp / "report"
    lock = cache_root() / "locks" / (hashlib.sha1(str(out.resolve()).encode()).hexdigest() + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        refused(
            capsys,
            tmp,
            ["reproduce", "--data", str(data), "--out", str(out), "--quick"],
            f"{out}: another gandalf command is writing it; wait for it to finish",
        )


def test_reproduce_without_the_neural_extra_names_it(work, capsys, monkeypatch):
    import sys

    tmp, data = work
    monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not installed
    monkeypatch.delitem(sys.modules, "gandalf_xmc.models.neural_xmc", raising=False)
    refused(
        capsys,
        tmp,
        ["reproduce", "--data", str(data), "--out", str(tmp / "r"), "--models", "astec", "--quick"],
        "the astec model needs the 'neural' extra (torch is not installed): pip install -c constraints.txt -e '.[neural]'",
    )


# ---------------------------------------------------------------------------------------------- the cache


def test_an_unwritable_cache_is_named_as_the_cache(work, capsys, monkeypatch):
    tmp, data = work
    blocker = tmp / "not-a-directory"
    blocker.write_text("x")
    monkeypatch.setenv("GANDALF_CACHE", str(blocker))
    refused(
        capsys,
        tmp,
        ["augment", "--data", str(data), "--out", str(tmp / "out")],
        f"{blocker / 'locks'}: the cache directory cannot be written (Not a directory); set GANDALF_CACHE to a "
        "writable directory",
    )
