"""A trained model directory ready to answer queries: ranked label ids, texts and scores, for
Python (:func:`load_predictor`), ``gandalf predict`` and ``gandalf serve``."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

from .errors import DataFormatError
from .jsonio import JSONProblem, loads


class Predictor:
    """A loaded model directory. ``predict_labels(texts, k)`` gives, for each text, its top ``k``
    labels best first as ``{"id", "text", "score"}``."""

    def __init__(self, model, directory: Path | None = None):
        self.model, self.directory = model, directory

    @property
    def label_uids(self) -> list[str]:
        return self.model.label_uids

    @property
    def label_texts(self) -> list[str]:
        return self.model.label_texts

    @property
    def n_labels(self) -> int:
        return len(self.model.label_uids)

    def predict_labels(
        self, texts: list[str], k: int = 5, uids: list[str | None] | None = None, drop_namesakes: bool = False
    ) -> list[list[dict]]:
        """See :meth:`.models.base.LabelledModel.predict_labels` (``uids``: in-catalogue queries'
        own ids, whose labels are left out; ``drop_namesakes``: the queries are new items, and
        labels of exactly their text are left out)."""
        return self.model.predict_labels(texts, k, uids, drop_namesakes)

    def rank_labels(
        self, texts: list[str], k: int = 5, uids: list[str | None] | None = None, drop_namesakes: bool = False
    ) -> tuple[list[list[dict]], list[bool]]:
        """:meth:`predict_labels` and whether the model knows a word of each text, at once."""
        return self.model.rank_labels(texts, k, uids, drop_namesakes)

    def known_queries(self, texts: list[str]) -> list[bool]:
        """Whether the model knows a word of each text (see :meth:`.models.base.LabelledModel.known_queries`)."""
        return self.model.known_queries(texts)

    def check_labels(self, uids: list[str], texts: list[str], where) -> None:
        """Refuse a dataset whose labels are not the model's (ids and texts compared)."""
        if len(uids) != self.n_labels:
            raise DataFormatError(
                where,
                None,
                f"the dataset has {len(uids):,} labels but the model was trained on "
                f"{self.n_labels:,}: predict with the dataset it was trained on",
            )
        diff = next((j for j in range(len(uids)) if uids[j] != self.label_uids[j] or texts[j] != self.label_texts[j]), None)
        if diff is not None:
            raise DataFormatError(
                where,
                None,
                f"label {diff} is {uids[diff]!r} in the dataset but {self.label_uids[diff]!r} "
                f"in the model ({len(uids):,} labels on both sides): another label set",
            )


def load_predictor(model_dir: str | Path, light: bool = False) -> Predictor:
    """A saved model directory (any kind), ready to answer queries. ``light``: a linear model is
    read with numpy alone (:mod:`gandalf_xmc.models.linear_reader`), which starts several times
    faster and answers one query at a time, and so are a knn model and a linear-knn blend without
    the label-text similarity (:mod:`gandalf_xmc.models.blend_reader`); other models load as usual."""
    d = Path(model_dir)
    if not d.is_dir():
        raise DataFormatError(d, None, "no such model directory")
    if not (d / "model.json").is_file():
        raise DataFormatError(d, None, "not a model directory (no model.json); train one with 'gandalf train'")
    try:
        model = _load_light(d) if light else None
        if model is None:
            from .models.registry import load_trained

            model = load_trained(d)
    except DataFormatError:
        raise
    except FileNotFoundError as exc:
        raise DataFormatError(d, None, f"the model directory is incomplete: {Path(exc.filename).name} is missing") from None
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, EOFError, IndexError, zipfile.BadZipFile) as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise DataFormatError(d, None, f"damaged model directory ({first})") from None
    return Predictor(model, d)


def _load_light(d: Path):
    """The numpy-only reader for a model one can read (linear, knn, linear-knn without the text part), else None."""
    from .jsonio import read_json_file

    spec = read_json_file(d / "model.json")
    from .models import blend_reader, linear_reader

    try:
        if linear_reader.can_read(spec):
            return linear_reader.LinearReader(d)
        if blend_reader.can_read(spec):
            return blend_reader.reader_for(d, spec)
    except linear_reader.NeedsFullReader:
        pass
    return None


def split_queries(predictor: Predictor, data: str | Path, split: str) -> tuple[list[str], list[str], Path, list[str]]:
    """What ``gandalf predict --data`` predicts: the texts and uids of ``split`` of ``data`` (a
    directory or a suite name), the dataset's directory, and the loader's notes. A whole dataset
    (its label file present) must have the model's labels; a directory of new points only is read
    with the model's labels, its targets optional."""
    from .data.dataset import find_split_file, load_dataset
    from .data.formats import read_lf_json
    from .data.suite import resolve

    directory = resolve(data)
    if find_split_file(directory, "lbl") is not None or (directory / "lbl_X.txt").exists():
        ds = load_dataset(data, splits=(split,), derive_filters=False)
        predictor.check_labels(ds.label_uids, ds.label_texts, ds.path)
        return ds.split(split).texts, ds.split(split).uids, directory, list(ds.notes)
    split_path = find_split_file(directory, split)
    if split_path is None:
        raise DataFormatError(directory / f"{split}.json.gz", None, f"missing '{split}' split file")
    points = read_lf_json(split_path, predictor.n_labels, require_targets=None)
    return points.texts, points.uids, directory, []


def read_queries(source: str):
    """``(text, uid or None, the line's other fields)`` of each query of a file (one a line; JSON
    lines with a 'title' or 'text', optionally the query's own 'uid', and any other fields, which
    the answers keep), or of stdin for '-' (lines bounded as :mod:`.inputs` bounds them; a device
    or FIFO named as the file is refused)."""
    from .inputs import bounded_lines, open_input

    fh = sys.stdin.buffer if source == "-" else open_input(source)
    name = "<stdin>" if source == "-" else source
    try:
        for lineno, raw in bounded_lines(fh, name):
            try:
                line = raw.decode("utf-8").rstrip("\r")
            except UnicodeDecodeError:
                raise DataFormatError(name, lineno, "not valid UTF-8 text") from None
            if line.startswith("{"):
                try:
                    obj = loads(line)
                except JSONProblem as exc:
                    raise DataFormatError(name, lineno, f"a line starting with '{{' must be a JSON object: {exc}") from None
                text = obj.get("title", obj.get("text")) if isinstance(obj, dict) else None
                if not isinstance(text, str):
                    raise DataFormatError(name, lineno, "a JSON line needs a string 'title' or 'text'")
                uid = obj.get("uid")
                if uid is not None and (isinstance(uid, bool) or not isinstance(uid, (str, int))):
                    raise DataFormatError(name, lineno, "'uid' must be a string or an integer")
                fields = {k: v for k, v in obj.items() if k not in ("uid", "text", "labels")}
                yield text, None if uid is None else str(uid), fields
            else:
                yield line, None, {}
    finally:
        if source != "-":
            fh.close()


def predict_lines(
    predictor: Predictor,
    source: str | None,
    out: str | Path | None,
    k: int,
    batch: int = 2048,
    force: bool = False,
    drop_namesakes: bool = False,
    queries=None,
    inputs: tuple = (),
) -> int:
    """Rank the labels of every query of ``source`` and write one JSON line a query: ``uid`` when
    the query gave one, the JSON line's other fields as they were, ``text`` and ``labels`` (a
    query's own label, by its uid, is left out; with ``drop_namesakes`` so are labels of exactly
    its text), to ``out`` or stdout; returns the number of queries. ``out`` follows
    :func:`.data.atomic.check_output_file`'s rule (``force``; never the query file nor inside the
    model directory). ``queries``: ``(text, uid or None, fields)`` to rank instead of ``source``'s
    lines (a dataset split's points), with ``inputs`` the files they come from."""
    from .data.atomic import output_file

    def lines():
        buffer = []
        for query in read_queries(source) if queries is None else queries:
            buffer.append(query)
            if len(buffer) == batch:
                yield from _ranked(buffer)
                buffer = []
        if buffer:
            yield from _ranked(buffer)

    def _ranked(queries):
        texts, uids = [q[0] for q in queries], [q[1] for q in queries]
        ranked, known = predictor.rank_labels(texts, k, uids, drop_namesakes)
        for (text, uid, fields), labels, knows in zip(queries, ranked, known):
            answer = {
                **({} if uid is None else {"uid": uid}),
                **fields,
                "text": text,
                "labels": labels,
                **({} if knows else {"out_of_vocabulary": True}),
            }
            yield json.dumps(answer, ensure_ascii=False) + "\n"

    n = 0
    if out is None:
        for line in lines():
            sys.stdout.write(line)
            n += 1
        sys.stdout.flush()
        return n
    inputs = inputs or (() if source in (None, "-") else (source,))
    with output_file(out, force, inputs, closed=(predictor.directory,)) as fh:
        for line in lines():
            fh.write(line.encode("utf-8"))
            n += 1
    return n


def model_info(model_dir: str | Path) -> dict:
    """What a model directory holds, from its description files alone (no weights are read): kind,
    settings, label count, training data and augmentation, validation metrics of the chosen epoch,
    training time, files and bytes on disk, the version that wrote it (models written since it is
    recorded). ``gandalf info`` prints it, ``GET /info`` of a server answers it."""
    from .jsonio import read_json_file

    d = Path(model_dir)
    if not (d / "model.json").is_file():
        raise DataFormatError(d, None, "not a model directory (no model.json); train one with 'gandalf train'")
    spec = read_json_file(d / "model.json")
    if not isinstance(spec, dict):
        raise DataFormatError(d / "model.json", None, "expected a JSON object")
    training = read_json_file(d / "training.json") if (d / "training.json").is_file() else {}
    training = training if isinstance(training, dict) else {}
    result = spec.get("result") if isinstance(spec.get("result"), dict) else {}
    history = result.get("history") or []
    best = result.get("best_epoch")
    chosen = history[best] if isinstance(best, int) and 0 <= best < len(history) else {}
    validation_run = training.get("validation_run") if isinstance(training.get("validation_run"), dict) else {}
    if isinstance(validation_run.get("metrics"), dict):  # a refitted model's own history has no validation
        chosen = validation_run["metrics"]
    files = [p for p in d.rglob("*") if p.is_file() and "checkpoints" not in p.relative_to(d).parts]
    augment = training.get("augment") if isinstance(training.get("augment"), dict) else {}
    return {
        "directory": str(d),
        "kind": spec.get("kind"),
        "settings": spec.get("model"),
        "labels": spec.get("n_labels"),
        "version": training.get("gandalf_version"),
        "training": {
            "dataset": training.get("dataset"),
            "source": training.get("source"),
            "augment": augment.get("augmentation", augment.get("training_set")),  # the older key
            "points": training.get("n_train"),
            "validation_points": training.get("n_valid"),
            "valid_protocol": training.get("valid_protocol"),
            "valid_source": training.get("valid_source"),
            "refit": training.get("refit", False),
            "seconds": result.get("seconds"),
            "device": result.get("device"),
        },
        "validation": {k: v for k, v in chosen.items() if isinstance(v, (int, float)) and "@" in k},
        "files": len(files),
        "bytes": sum(p.stat().st_size for p in files),
        "has_checkpoints": (d / "checkpoints").is_dir(),
    }
