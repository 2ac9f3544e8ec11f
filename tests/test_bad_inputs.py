"""Bad input and faults against every ``ltr`` command: exit 2, one line, no traceback, nothing lost.

A table-driven battery (issue 13). Every case runs one command in this process through
``ltr.cli.main`` on a malformed input, a bad option value or an impossible destination, and checks:

- exit status 2 (argparse's own refusals included: it exits 2 too);
- no traceback, and the last line of stderr is the ``ltr ...: error: ...`` line;
- that line names the place (the option, the file, the TOML key) given in the case;
- the inputs and the outputs of earlier commands (a data folder, model folders, a click log) are
  byte for byte unchanged, and no half-written folder (``.NAME.partial-PID``) is left behind.

The shared inputs are tiny (a few queries), built once per module; no case trains for real, so the
whole battery takes seconds. Faults that need the operating system to fail (a full disk, a folder
that cannot be written) are simulated with monkeypatch at the end of the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from ltr.cli import main

# --------------------------------------------------------------------------------------------------
# The world: small inputs and earlier outputs, made once
# --------------------------------------------------------------------------------------------------


def _svm_lines(n_queries: int, n_docs: int, n_features: int, seed: int, qid0: int = 1) -> str:
    rng = np.random.default_rng(seed)
    lines = []
    for q in range(n_queries):
        for d in range(n_docs):
            label = int(rng.integers(0, 4))
            feats = " ".join(f"{j + 1}:{rng.normal():.3f}" for j in range(n_features))
            lines.append(f"{label} qid:{qid0 + q} {feats} # docid = q{qid0 + q}d{d}")
    return "\n".join(lines) + "\n"


def _quiet_main(argv):
    code = None
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refusals and --help
        code = exc.code
    return code


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("world"))


def build_world(root: Path) -> dict[str, str]:
    """Inputs (a data folder) and earlier outputs (model folders, a click log, synthetic data)."""
    data = root / "data"
    data.mkdir()
    (data / "train.txt").write_text(_svm_lines(8, 6, 5, 1))
    (data / "valid.txt").write_text(_svm_lines(3, 6, 5, 2, qid0=100))
    (data / "test.txt").write_text(_svm_lines(3, 6, 5, 3, qid0=200))
    (data / "narrow.txt").write_text(_svm_lines(3, 6, 3, 4, qid0=300))
    rng = np.random.default_rng(0)
    s = rng.normal(size=200)
    y = (rng.random(200) < 1 / (1 + np.exp(-2 * s))).astype(int)
    (data / "scores.txt").write_text("\n".join(f"{v:.6f}" for v in s) + "\n")
    (data / "labels.txt").write_text("\n".join(map(str, y)) + "\n")
    (data / "groups.txt").write_text("\n".join(f"g{i // 4}" for i in range(200)) + "\n")
    qrels = "".join(f"{200 + q} 0 q{200 + q}d{d} {(d * 7 + q) % 3}\n" for q in range(3) for d in range(6))
    (data / "qrels.txt").write_text(qrels)
    run = "".join(f"{200 + q} Q0 q{200 + q}d{d} {d + 1} {10 - d}.5 tag\n" for q in range(3) for d in range(6))
    (data / "run.txt").write_text(run)
    (data / "ok.toml").write_text("[train]\nepochs = 1\n")
    models = root / "models"
    models.mkdir()
    base = ["--train", str(data / "train.txt"), "--valid", str(data / "valid.txt"), "--quiet"]
    assert _quiet_main(["train", *base, "--model", "linear", "--epochs", "1", "--out", str(models / "linear")]) == 0
    assert _quiet_main(["gbdt", *base, "--num-boost-round", "3", "--out", str(models / "gbdt")]) == 0
    clicks = root / "clicks"
    assert _quiet_main(["clicks", "simulate", "--data", str(data / "train.txt"), "--out", str(clicks),
                        "--sessions-per-query", "3", "--randomize-fraction", "0.5", "--top-k", "4", "--quiet"]) == 0
    synth = root / "synth"
    assert _quiet_main(["synth", "--out", str(synth), "--queries", "12", "--mean-length", "4", "--features", "3",
                        "--quiet"]) == 0
    _parquet(data / "train.parquet", n_queries=4, seed=5)
    assert _quiet_main(["convert", str(data / "train.txt"), "--out", str(root / "store"), "--quiet"]) == 0
    paths = {name: str(data / f"{name}.txt") for name in
             ("train", "valid", "test", "narrow", "scores", "labels", "groups", "qrels", "run")}
    paths.update(data=str(data), toml=str(data / "ok.toml"), lin=str(models / "linear"), gb=str(models / "gbdt"),
                 log=str(clicks / "clicks.npz"), clicks=str(clicks), synth=str(synth), root=str(root),
                 pq=str(data / "train.parquet"), store=str(root / "store"))
    return paths


def _parquet(path: Path, n_queries: int = 4, seed: int = 5, **changes) -> None:
    """A Parquet file: qid, label, docid, weight, f1..f3; ``changes`` replace or drop (None) columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    n = 4 * n_queries
    cols = {"qid": np.repeat(np.arange(1, n_queries + 1), 4), "label": rng.integers(0, 3, n),
            "docid": [f"d{i}" for i in range(n)], "weight": np.ones(n),
            **{f"f{j}": rng.normal(size=n) for j in range(1, 4)}}
    for k, v in changes.items():
        if v is None:
            cols.pop(k)
        else:
            cols[k] = v(cols.get(k)) if callable(v) else v
    pq.write_table(pa.table(cols), path)


def snapshot(root: str) -> dict[str, str]:
    """sha256 of every regular file under ``root`` (data caches excluded: a load may write them); a FIFO
    or socket is recorded by kind, never read (reading a FIFO blocks)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            if name.endswith(".ltrcache.npz"):
                continue
            p = Path(dirpath) / name
            key = str(p.relative_to(root))
            out[key] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "not a regular file"
        for name in dirnames:
            out[str((Path(dirpath) / name).relative_to(root)) + "/"] = "dir"
    return out


class Hung(Exception):
    pass


def _alarm(signum, frame):
    raise Hung("the command did not finish in 20 s (did it open a FIFO?)")


def run_cli(argv: list[str], capsys) -> tuple[int | None, str]:
    """``ltr.cli.main(argv)`` -> (exit status, stderr); a hang of 20 s fails the test."""
    capsys.readouterr()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)
    try:
        code = _quiet_main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return code, capsys.readouterr().err


def assert_refused(code, err: str, expect: tuple[str, ...]) -> None:
    assert code == 2, f"exit status {code}, stderr:\n{err}"
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("ltr") and "error:" in lines[-1], err
    last = lines[-1].lower()
    for word in expect:
        assert word.lower() in last, f"{word!r} not in the message: {lines[-1]}"


# --------------------------------------------------------------------------------------------------
# Hostile files
# --------------------------------------------------------------------------------------------------
def _parquet_bytes(columns: dict) -> bytes:
    """A Parquet file of ``columns`` as bytes (for :func:`put`)."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pa.table(columns), out)
    return out.getvalue()


def put(name: str, content: str | bytes) -> Callable[[Path, dict], dict]:
    """A setup writing ``content`` into ``tmp/name``; the case refers to it as ``{bad}``."""

    def setup(tmp: Path, w: dict) -> dict:
        p = tmp / name
        p.write_bytes(content.encode() if isinstance(content, str) else content)
        return {"bad": str(p)}

    return setup


def fifo(name: str = "pipe") -> Callable[[Path, dict], dict]:
    def setup(tmp: Path, w: dict) -> dict:
        p = tmp / name
        os.mkfifo(p)
        return {"bad": str(p)}

    return setup


def folder(name: str = "a_folder") -> Callable[[Path, dict], dict]:
    def setup(tmp: Path, w: dict) -> dict:
        p = tmp / name
        p.mkdir()
        (p / "inside.txt").write_text("x")
        return {"bad": str(p)}

    return setup


def a_file(name: str = "a_file") -> Callable[[Path, dict], dict]:
    return put(name, "I am a file\n")


def model_copy(which: str, edit: Callable[[Path], None]) -> Callable[[Path, dict], dict]:
    """A copy of a model folder of the world, then ``edit(folder)``."""

    def setup(tmp: Path, w: dict) -> dict:
        import shutil

        dst = tmp / "model"
        shutil.copytree(w[which], dst)
        edit(dst)
        return {"bad": str(dst)}

    return setup


def edit_json(name: str, **changes) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        d = json.loads((folder / name).read_text())
        d.update(changes)
        (folder / name).write_text(json.dumps(d))

    return edit


def write(name: str, content: str | bytes) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        p = folder / name
        if p.is_dir():
            import shutil

            shutil.rmtree(p)
        p.write_bytes(content.encode() if isinstance(content, str) else content)

    return edit


def make_dir(name: str) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        (folder / name).unlink()
        (folder / name).mkdir()

    return edit


def truncate(name: str, keep: int = 40) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        p = folder / name
        p.write_bytes(p.read_bytes()[:keep])

    return edit


def click_log(**changes) -> Callable[[Path, dict], dict]:
    """The world's click log with some arrays replaced (``meta`` as a dict)."""

    def setup(tmp: Path, w: dict) -> dict:
        with np.load(w["log"], allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        for k, v in changes.items():
            if v is None:
                arrays.pop(k)
            elif k == "meta":
                arrays[k] = np.array(json.dumps(v))
            else:
                arrays[k] = v(arrays[k]) if callable(v) else v
        p = tmp / "hostile.npz"
        with open(p, "wb") as fh:
            np.savez(fh, **arrays)
        return {"bad": str(p)}

    return setup


def marked_dir(tmp: Path, w: dict) -> dict:
    """A folder holding the user's data (no ltr run-folder mark)."""
    import shutil

    d = tmp / "mine"
    d.mkdir()
    shutil.copy(w["train"], d / "train.txt")
    shutil.copy(w["valid"], d / "valid.txt")
    return {"bad": str(d), "mytrain": str(d / "train.txt"), "myvalid": str(d / "valid.txt")}


def _narrow_model(tmp: Path, w: dict) -> dict:
    """A linear model folder for 4 features (the world's data has 5)."""
    from ltr.train.models import LinearScorer, save_model

    save_model(LinearScorer(4), tmp / "m4")
    return {"bad": str(tmp / "m4")}


def parquet(**changes) -> Callable[[Path, dict], dict]:
    """A hostile Parquet file (see :func:`_parquet`) as ``{bad}``."""

    def setup(tmp: Path, w: dict) -> dict:
        _parquet(tmp / "bad.parquet", **changes)
        return {"bad": str(tmp / "bad.parquet")}

    return setup


def store_copy(edit: Callable[[Path], None]) -> Callable[[Path, dict], dict]:
    """A copy of the world's store (from ``ltr convert``), then ``edit(folder)``."""
    return lambda tmp, w: model_copy("store", edit)(tmp, w)


def read_only_store(tmp: Path, w: dict) -> dict:
    """A copy of the store in a folder nobody may write (root still may: the refusal must come from
    the folder being an input, not from the operating system)."""
    d = store_copy(lambda f: None)(tmp, w)
    os.chmod(d["bad"], 0o555)
    return d


def space(body: str, kind: str = '"neural"', metric: str = '"ndcg@10"', train: str = "{train}",
          epochs: str = "1") -> Callable[[Path, dict], dict]:
    """A tune space TOML over the world's data (``{bad}``), 1 epoch, ``body`` added."""

    def setup(tmp: Path, w: dict) -> dict:
        head = (f'[tune]\nkind = {kind}\nmetric = {metric}\n[data]\ntrain = "{train.format(**w, tmp=tmp)}"\n'
                f'valid = "{w["valid"]}"\n[train]\nepochs = {epochs}\n')
        (tmp / "space.toml").write_text(head + body)
        return {"bad": str(tmp / "space.toml")}

    return setup


# --------------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------------
@dataclass
class Case:
    id: str
    argv: list[str]
    expect: tuple[str, ...] = ()
    setup: Callable[[Path, dict], dict] | None = None
    protect: tuple[str, ...] = field(default_factory=tuple)  # extra placeholders whose files must survive


SVM_GOOD = "1 qid:1 1:0.5 2:0.1 3:0 4:1 5:2\n0 qid:1 1:0.2 2:0.3 3:1 4:0 5:1\n"
T = ["train", "--train", "{train}", "--valid", "{valid}", "--quiet", "--epochs", "1", "--out", "{tmp}/out"]
G = ["gbdt", "--train", "{train}", "--valid", "{valid}", "--quiet", "--num-boost-round", "2", "--out", "{tmp}/out"]
P = ["predict", "--model", "{lin}", "--data", "{test}", "--out", "{tmp}/out.run"]
E = ["eval", "--qrels", "{qrels}", "--run", "{run}"]
C = ["calibrate", "--scores", "{scores}", "--labels", "{labels}", "--method", "platt", "--out", "{tmp}/cal"]
S = ["clicks", "simulate", "--data", "{train}", "--out", "{tmp}/sim", "--quiet", "--sessions-per-query", "1"]
EST = ["clicks", "estimate", "--log", "{log}"]
EV = ["clicks", "evaluate", "--log", "{log}", "--data", "{train}"]
OB = ["clicks", "open-bandit", "--data"]
SY = ["synth", "--out", "{tmp}/syn", "--quiet", "--queries", "10", "--mean-length", "3", "--features", "2"]
A = ["ablate", "--out", "{tmp}/abl", "--no-progress", "--no-tensorboard", "--workers", "1"]


def svm_cases(prefix: str, argv_with_bad: list[str]) -> list[Case]:
    """Every malformed SVMlight/LETOR file, given where ``{bad}`` stands in ``argv_with_bad``."""
    c = lambda name, content, *expect: Case(f"{prefix}-{name}", argv_with_bad, expect, put("bad.txt", content))  # noqa: E731
    return [
        Case(f"{prefix}-missing", argv_with_bad, ("not found",), lambda t, w: {"bad": str(t / "nope.txt")}),
        Case(f"{prefix}-folder", argv_with_bad, ("is a folder",), folder()),
        Case(f"{prefix}-fifo", argv_with_bad, ("not a regular file",), fifo()),
        Case(f"{prefix}-under-a-file", argv_with_bad, ("is a file, not a folder",),
             lambda t, w: {"bad": w["train"] + "/x.txt"}),
        c("empty", "", "bad.txt", "empty"),
        c("blank-lines", "\n\n  \n", "bad.txt", "no data"),
        c("binary", bytes(range(256)) * 4, "bad.txt"),
        c("bad-token", SVM_GOOD + "1 qid:2 1:abc\n", "bad.txt:3", "not a number"),
        c("no-qid", SVM_GOOD + "1 1:1\n", "bad.txt:3", "qid"),
        c("nan-label", SVM_GOOD + "nan qid:2 1:1\n", "bad.txt:3", "label"),
        c("inf-feature", SVM_GOOD + "1 qid:2 1:inf\n", "bad.txt:3", "infinite"),
        c("index-zero", SVM_GOOD + "1 qid:2 0:1\n", "bad.txt:3", "index 0"),
        c("huge-index", "1 qid:1 100000000:1.0\n", "bad.txt", "100000000"),
        c("index-1e12", "1 qid:1 1000000000000:1.0\n", "bad.txt", "1000000000000"),
        c("index-2e19", "1 qid:1 20000000000000000000:1.0\n", "bad.txt:1"),
        c("qid-20-digits", "1 qid:12345678901234567890 1:1\n", "bad.txt:1", "qid"),
        c("negative-index", SVM_GOOD + "1 qid:2 -3:1\n", "bad.txt:3", "index"),
        c("decreasing-index", SVM_GOOD + "1 qid:2 3:1 2:1\n", "bad.txt:3", "increase"),
        c("not-contiguous", SVM_GOOD + "1 qid:2 1:1\n1 qid:1 1:1\n", "bad.txt:4", "contiguous"),
        c("label-2000", "2000 qid:1 1:1\n0 qid:1 1:2\n", "bad.txt:1", "2000"),
        c("label-1e30", "1e30 qid:1 1:1\n0 qid:1 1:2\n", "bad.txt:1", "label"),
        c("no-features", "1 qid:1\n0 qid:1\n", "bad.txt", "no features"),
        c("qid-text", "1 qid:abc 1:1\n", "bad.txt:1", "qid"),
        c("utf16", "1 qid:1 1:1\n".encode("utf-16"), "bad.txt"),
    ]


CASES: list[Case] = [
    # ------------------------------------------------------------------ readers, through ltr train
    *svm_cases("train-data", ["train", "--train", "{bad}", "--valid", "{valid}", "--quiet", "--epochs", "1", "--out", "{tmp}/o"]),
    *svm_cases("train-valid", ["train", "--train", "{train}", "--valid", "{bad}", "--quiet", "--epochs", "1", "--out", "{tmp}/o"])[:5],
    *svm_cases("gbdt-test", G + ["--test", "{bad}"])[:5],
    *svm_cases("predict-data", ["predict", "--model", "{lin}", "--data", "{bad}", "--out", "{tmp}/r.run"]),
    *svm_cases("simulate-data", ["clicks", "simulate", "--data", "{bad}", "--out", "{tmp}/sim", "--quiet"])[:5],
    Case("train-query-sidecar-bad", T[:2] + ["{bad}"] + T[3:], ("bad.txt.query:1", "group size"),
         lambda t, w: (put("bad.txt", "1 1:1\n0 1:2\n")(t, w), (t / "bad.txt.query").write_text("x\n"))[0]),
    Case("train-query-sidecar-sum", T[:2] + ["{bad}"] + T[3:], ("bad.txt.query", "add up"),
         lambda t, w: (put("bad.txt", "1 1:1\n0 1:2\n")(t, w), (t / "bad.txt.query").write_text("3\n"))[0]),
    # ------------------------------------------------------------------ ltr train options
    Case("train-epochs-0", T + ["--epochs", "0"], ("--epochs", ">= 1")),
    Case("train-epochs-text", T + ["--epochs", "two"], ("--epochs",)),
    Case("train-batch-size-0", T + ["--batch-size", "0"], ("--batch-size",)),
    Case("train-bucket-size-0", T + ["--bucket-size", "0"], ("--bucket-size",)),
    Case("train-lr-0", T + ["--lr", "0"], ("--lr", "> 0")),
    Case("train-lr-negative", T + ["--lr", "-1"], ("--lr",)),
    Case("train-lr-nan", T + ["--lr", "nan"], ("--lr", "nan")),
    Case("train-lr-inf", T + ["--lr", "inf"], ("--lr",)),
    Case("train-weight-decay-negative", T + ["--weight-decay", "-0.1"], ("--weight-decay",)),
    Case("train-weight-decay-nan", T + ["--weight-decay", "nan"], ("--weight-decay",)),
    Case("train-patience-0", T + ["--patience", "0"], ("--patience",)),
    Case("train-seed-negative", T + ["--seed", "-1"], ("--seed",)),
    Case("train-seed-huge", T + ["--seed", str(2**70)], ("--seed",)),
    Case("train-seed-400-digits", T + ["--seed", "9" * 400], ("--seed",)),
    Case("train-lr-400-digits", T + ["--lr", "9" * 400], ("--lr",)),
    Case("train-dropout-1", T + ["--dropout", "1"], ("--dropout",)),
    Case("train-dropout-negative", T + ["--dropout", "-0.5"], ("--dropout",)),
    Case("train-dropout-nan", T + ["--dropout", "nan"], ("--dropout",)),
    Case("train-hidden-text", T + ["--hidden", "a,b"], ("--hidden",)),
    Case("train-hidden-zero", T + ["--hidden", "0"], ("--hidden",)),
    Case("train-hidden-negative", T + ["--hidden", "16,-3"], ("--hidden",)),
    Case("train-hidden-empty", T + ["--hidden", ","], ("--hidden",)),
    Case("train-loss-unknown", T + ["--loss", "bogus"], ("bogus",)),
    Case("train-activation-unknown", T + ["--activation", "bogus"], ("bogus",)),
    Case("train-monitor-unknown", T + ["--monitor", "bogus@3"], ("bogus",)),
    Case("train-metrics-unknown", T + ["--metrics", "ndcg@10,bogus"], ("bogus",)),
    Case("train-metrics-cutoff-0", T + ["--metrics", "ndcg@0"], ("ndcg@0",)),
    Case("train-preset-unknown", T + ["--preset", "bogus"], ("bogus",)),
    Case("train-device-unknown", T + ["--device", "tpu"], ("tpu",)),
    Case("train-model-unknown", T + ["--model", "forest"], ("--model",)),
    Case("train-normalize-unknown", T + ["--normalize", "zscore"], ("--normalize",)),
    Case("train-out-under-file", T[:-2] + ["--out", "{train}/run"], ("--out", "is a file")),
    Case("train-out-is-file", T[:-2] + ["--out", "{train}"], ("--out", "not a folder")),
    Case("train-out-is-file-force", T[:-2] + ["--out", "{train}", "--force"], ("--out", "not a folder")),
    Case("train-out-exists", T[:-2] + ["--out", "{lin}"], ("already exists",)),
    Case("train-force-data-folder", ["train", "--train", "{mytrain}", "--valid", "{myvalid}", "--quiet", "--epochs", "1",
                                     "--out", "{bad}", "--force"], ("--out",), marked_dir, ("mytrain", "myvalid")),
    Case("train-force-world-data", T[:-2] + ["--out", "{data}", "--force"], ("--out",)),
    Case("train-force-synth-folder", T[:-2] + ["--out", "{synth}", "--force"], ("--out",)),
    Case("train-force-dot", T[:-2] + ["--out", ".", "--force"], ("--out",)),
    Case("train-checkpoint-dir-is-file", T + ["--checkpoint-dir", "{train}"], ("--checkpoint-dir",)),
    Case("train-checkpoint-dir-under-file", T + ["--checkpoint-dir", "{train}/ck"], ("--checkpoint-dir",)),
    Case("train-valid-narrower-ok-but-wider", ["train", "--train", "{narrow}", "--valid", "{valid}", "--quiet",
                                               "--out", "{tmp}/o"], ("valid.txt", "feature")),
    Case("train-checkpoint-hostile", T + ["--ensemble", "1", "--checkpoint-dir", "{bad}"], ("last.pt",),
         lambda t, w: ((t / "ck").mkdir(), (t / "ck" / "last.pt").write_bytes(b"\x80\x04garbage"), {"bad": str(t / "ck")})[2]),
    Case("train-ensemble-over-one-model-checkpoint", T + ["--checkpoint-dir", "{bad}"], ("last.pt", "--ensemble 1"),
         lambda t, w: ((t / "ck").mkdir(), (t / "ck" / "last.pt").write_bytes(b"\x80\x04garbage"), {"bad": str(t / "ck")})[2]),
    # ------------------------------------------------------------------ ltr train --config (TOML)
    *[Case(f"train-toml-{name}", T + ["--config", "{bad}"], expect, put("run.toml", body)) for name, body, expect in [
        ("bad-syntax", "[train\nepochs = 1\n", ("run.toml", "toml")),
        ("unknown-table", "[trian]\nepochs = 1\n", ("run.toml", "trian")),
        ("unknown-key", "[train]\nepoch = 1\n", ("run.toml", "epoch")),
        ("table-not-table", "train = 5\n", ("run.toml", "train")),
        ("epochs-bool", "[train]\nepochs = true\n", ("run.toml", "epochs", "boolean")),
        ("epochs-float", "[train]\nepochs = 2.0\n", ("run.toml", "epochs", "integer")),
        ("epochs-text", "[train]\nepochs = \"2\"\n", ("run.toml", "epochs")),
        ("patience-float", "[train]\npatience = 2.5\n", ("run.toml", "patience")),
        ("batch-size-1e9", "[train]\nbatch_size = 1e9\n", ("run.toml", "batch_size")),
        ("lr-text", "[train]\nlr = \"0.1\"\n", ("run.toml", "lr")),
        ("lr-nan", "[train]\nlr = nan\n", ("run.toml", "lr")),
        ("lr-bool", "[train]\nlr = true\n", ("run.toml", "lr")),
        ("weight-decay-negative", "[train]\nweight_decay = -1.0\n", ("run.toml", "weight_decay")),
        ("grad-clip-negative", "[train]\ngrad_clip = -1.0\n", ("run.toml", "grad_clip")),
        ("grad-clip-zero", "[train]\ngrad_clip = 0\n", ("run.toml", "grad_clip")),
        ("min-delta-nan", "[train]\nmin_delta = nan\n", ("run.toml", "min_delta")),
        ("seed-negative", "[train]\nseed = -3\n", ("run.toml", "seed")),
        ("seed-float", "[train]\nseed = 1.5\n", ("run.toml", "seed")),
        ("monitor-number", "[train]\nmonitor = 3\n", ("run.toml", "monitor")),
        ("metrics-string", "[train]\nmetrics = \"ndcg@10\"\n", ("run.toml", "metrics")),
        ("metrics-numbers", "[train]\nmetrics = [1, 2]\n", ("run.toml", "metrics")),
        ("progress-text", "[train]\nprogress = \"no\"\n", ("run.toml", "progress")),
        ("resume-int", "[train]\nresume = 1\n", ("run.toml", "resume")),
        ("eval-rows-0", "[train]\neval_rows = 0\n", ("run.toml", "eval_rows")),
        ("bucket-size-0", "[train]\nbucket_size = 0\n", ("run.toml", "bucket_size")),
        ("conventions-list", "[train]\nconventions = [1]\n", ("run.toml", "conventions")),
        ("conventions-bogus", "[train.conventions]\ngain = \"cubic\"\n", ("cubic",)),
        ("device-bogus", "[train]\ndevice = \"gpu0\"\n", ("gpu0",)),
        ("batch-norm-text", "[model]\nbatch_norm = \"false\"\n", ("run.toml", "batch_norm")),
        ("batch-norm-int", "[model]\nbatch_norm = 0\n", ("run.toml", "batch_norm")),
        ("hidden-text", "[model]\nhidden = \"64\"\n", ("run.toml", "hidden")),
        ("hidden-zero", "[model]\nhidden = [0]\n", ("run.toml", "hidden")),
        ("hidden-float", "[model]\nhidden = [6.5]\n", ("run.toml", "hidden")),
        ("dropout-bool", "[model]\ndropout = true\n", ("run.toml", "dropout")),
        ("dropout-2", "[model]\ndropout = 2.0\n", ("run.toml", "dropout")),
        ("model-type", "[model]\ntype = \"forest\"\n", ("run.toml", "type")),
        ("model-unknown-key", "[model]\ndepth = 3\n", ("run.toml", "depth")),  # (layers: the attention scorer's)
        ("model-layers-zero", "[model]\ntype = \"attention\"\nlayers = 0\n", ("run.toml", "layers")),
        ("activation-bogus", "[model]\nactivation = \"swish2\"\n", ("run.toml", "activation")),
        ("normalize-bogus", "[model]\nnormalize = \"z\"\n", ("normalize",)),
        ("loss-name-number", "[loss]\nname = 5\n", ("run.toml", "name")),
        ("loss-name-bogus", "[loss]\nname = \"bogus\"\n", ("bogus",)),
        ("loss-sigma-text", "[loss]\nname = \"ranknet\"\nsigma = \"x\"\n", ("sigma",)),
        ("loss-sigma-negative", "[loss]\nname = \"ranknet\"\nsigma = -1.0\n", ("sigma",)),
        ("loss-unknown-arg", "[loss]\nname = \"ranknet\"\nsigmaa = 1.0\n", ("sigmaa",)),
        ("bom-then-bad", "\ufeff[train]\nepochs = 0\n", ("run.toml", "epochs")),
        ("binary", bytes(range(256)), ("run.toml",)),
    ]],
    Case("train-toml-missing", T + ["--config", "{tmp}/none.toml"], ("none.toml", "not found")),
    Case("train-toml-folder", T + ["--config", "{bad}"], ("is a folder",), folder()),
    Case("train-toml-fifo", T + ["--config", "{bad}"], ("not a regular file",), fifo()),
    # ------------------------------------------------------------------ ltr gbdt
    Case("gbdt-rounds-0", G + ["--num-boost-round", "0"], ("--num-boost-round",)),
    Case("gbdt-rounds-negative", G + ["--num-boost-round", "-5"], ("--num-boost-round",)),
    Case("gbdt-early-stopping-negative", G + ["--early-stopping-rounds", "-1"], ("--early-stopping-rounds",)),
    Case("gbdt-learning-rate-0", G + ["--learning-rate", "0"], ("--learning-rate",)),
    Case("gbdt-learning-rate-nan", G + ["--learning-rate", "nan"], ("--learning-rate",)),
    Case("gbdt-num-leaves-1", G + ["--num-leaves", "1"], ("--num-leaves",)),
    Case("gbdt-seed-negative", G + ["--seed", "-1"], ("--seed",)),
    Case("gbdt-metrics-bogus", G + ["--metrics", "bogus"], ("bogus",)),
    Case("gbdt-preset-bogus", G + ["--preset", "bogus"], ("bogus",)),
    Case("gbdt-out-under-file", G[:-2] + ["--out", "{train}/x"], ("--out", "is a file")),
    Case("gbdt-force-data-folder", ["gbdt", "--train", "{mytrain}", "--valid", "{myvalid}", "--quiet",
                                    "--num-boost-round", "2", "--out", "{bad}", "--force"], ("--out",), marked_dir,
         ("mytrain", "myvalid")),
    Case("gbdt-label-2000", G[:2] + ["{bad}"] + G[3:], ("bad.txt", "2000"), put("bad.txt", "2000 qid:1 1:1\n0 qid:1 1:2\n")),
    *[Case(f"gbdt-toml-{name}", G + ["--config", "{bad}"], expect, put("g.toml", body)) for name, body, expect in [
        ("rounds-text", "[gbdt]\nnum_boost_round = \"10\"\n", ("g.toml", "num_boost_round")),
        ("rounds-0", "[gbdt]\nnum_boost_round = 0\n", ("g.toml", "num_boost_round")),
        ("eval-at-0", "[gbdt]\neval_at = [0]\n", ("g.toml", "eval_at")),
        ("eval-at-int", "[gbdt]\neval_at = 5\n", ("g.toml", "eval_at")),
        ("monitor-k-0", "[gbdt]\nmonitor_k = 0\n", ("g.toml", "monitor_k")),
        ("seed-bool", "[gbdt]\nseed = true\n", ("g.toml", "seed")),
        ("gain-bogus", "[gbdt]\ngain = \"cubic\"\n", ("g.toml", "gain")),
        ("metrics-string", "[gbdt]\nmetrics = \"ndcg@10\"\n", ("g.toml", "metrics")),
        ("unknown-key", "[gbdt]\nrounds = 3\n", ("g.toml", "rounds")),
        ("lightgbm-leaves-text", "[lightgbm]\nnum_leaves = \"abc\"\n", ("num_leaves",)),
        ("lightgbm-label-gain", "[lightgbm]\nlabel_gain = [0, 1]\n", ("label_gain",)),
        ("lightgbm-table", "[lightgbm]\nx = {a = 1}\n", ("g.toml", "x")),
        ("unknown-table", "[train]\nepochs = 1\n", ("g.toml", "train")),
    ]],
    # ------------------------------------------------------------------ ltr predict
    Case("predict-model-missing", ["predict", "--model", "{tmp}/nomodel", "--data", "{test}", "--out", "{tmp}/r"], ("--model", "not found")),
    Case("predict-model-is-file", ["predict", "--model", "{train}", "--data", "{test}", "--out", "{tmp}/r"], ("--model", "not a folder")),
    Case("predict-model-no-json", P[:2] + ["{bad}"] + P[3:], ("model.json",), folder()),
    *[Case(f"predict-lin-{name}", P[:2] + ["{bad}"] + P[3:], expect, model_copy("lin", edit)) for name, edit, expect in [
        ("json-garbage", write("model.json", "{not json"), ("model.json",)),
        ("json-list", write("model.json", "[1, 2]"), ("model.json",)),
        ("json-is-folder", make_dir("model.json"), ("model.json", "folder")),
        ("json-type-bogus", edit_json("model.json", type="forest"), ("model.json", "forest")),
        ("json-n-features-negative", edit_json("model.json", n_features=-5), ("model.json", "n_features")),
        ("json-n-features-huge", edit_json("model.json", n_features=10**12), ("model.json",)),
        ("json-n-features-text", edit_json("model.json", n_features="5"), ("model.json", "n_features")),
        ("json-hidden-huge", edit_json("model.json", type="mlp", hidden=[10**9]), ("model.json",)),
        ("json-normalizer-bogus", edit_json("model.json", normalizer="cube"), ("model.json", "cube")),
        ("json-extra-key", edit_json("model.json", colour="red"), ("model.json", "colour")),
        ("pt-missing", lambda f: (f / "model.pt").unlink(), ("model.pt",)),
        ("pt-truncated", truncate("model.pt"), ("model.pt",)),
        ("pt-garbage", write("model.pt", b"\x00garbage" * 10), ("model.pt",)),
        ("pt-empty", write("model.pt", b""), ("model.pt",)),
        ("pt-folder", make_dir("model.pt"), ("model.pt",)),
        ("pt-other-shape", edit_json("model.json", n_features=4), ("model.pt",)),
    ]],
    *[Case(f"predict-gbdt-{name}", ["predict", "--model", "{bad}", "--data", "{test}", "--out", "{tmp}/r"], expect,
           model_copy("gb", edit)) for name, edit, expect in [
        ("file-escapes", edit_json("model.json", file="../../../../etc/passwd"), ("model.json", "inside")),
        ("file-absolute", edit_json("model.json", file="/etc/passwd"), ("model.json", "inside")),
        ("file-number", edit_json("model.json", file=5), ("model.json", "file")),
        ("file-missing", lambda f: (f / "model.txt").unlink(), ("model.txt",)),
        ("txt-garbage", write("model.txt", "tree\nnot a model\n"), ("model.txt",)),
        ("txt-empty", write("model.txt", ""), ("model.txt",)),
        ("txt-fifo", lambda f: ((f / "model.txt").unlink(), os.mkfifo(f / "model.txt")), ("model.txt",)),
        ("n-features-bogus", edit_json("model.json", n_features="x"), ("model.json", "n_features")),
        ("n-features-mismatch", edit_json("model.json", n_features=9), ("model.json",)),
    ]],
    Case("predict-narrower-data", P[:4] + ["{narrow}"] + P[5:], ("narrow.txt", "3 features", "5")),
    Case("predict-narrower-data-gbdt", ["predict", "--model", "{gb}", "--data", "{narrow}", "--out", "{tmp}/r"], ("narrow.txt", "5")),
    Case("predict-out-is-data", P[:-1] + ["{test}"], ("--out", "input")),
    Case("predict-out-is-folder", P[:-1] + ["{data}"], ("--out", "folder")),
    Case("predict-out-under-file", P[:-1] + ["{train}/r.run"], ("--out", "is a file")),
    Case("predict-qrels-is-data", P + ["--qrels", "{test}"], ("--qrels", "input")),
    Case("predict-qrels-is-out", P + ["--qrels", "{tmp}/out.run"], ("--qrels", "--out")),
    Case("predict-qrels-under-file", P + ["--qrels", "{train}/q"], ("--qrels", "is a file")),
    Case("predict-tag-space", P + ["--tag", "two words"], ("tag",)),
    Case("predict-device-bogus", P + ["--device", "tpu"], ("tpu",)),
    # ------------------------------------------------------------------ ltr eval
    *[Case(f"eval-qrels-{name}", ["eval", "--qrels", "{bad}", "--run", "{run}"], expect, setup) for name, setup, expect in [
        ("missing", lambda t, w: {"bad": str(t / "none")}, ("not found",)),
        ("folder", folder(), ("is a folder",)),
        ("fifo", fifo(), ("not a regular file",)),
        ("fields", put("q.txt", "200 0 d1\n"), ("q.txt:1", "4 fields")),
        ("rel-text", put("q.txt", "200 0 d1 high\n"), ("q.txt:1", "relevance")),
        ("rel-nan", put("q.txt", "200 0 d1 nan\n"), ("q.txt:1", "relevance")),
        ("rel-huge", put("q.txt", "200 0 q200d0 2000\n"), ("q.txt:1", "2000")),
        ("duplicate", put("q.txt", "200 0 d1 1\n200 0 d1 2\n"), ("q.txt:2", "twice")),
        ("binary", put("q.txt", bytes(range(256))), ("q.txt",)),
        ("empty", put("q.txt", ""), ("q.txt",)),
        ("no-overlap", put("q.txt", "999 0 d 1\n"), ("no query",)),
    ]],
    *[Case(f"eval-run-{name}", ["eval", "--qrels", "{qrels}", "--run", "{bad}"], expect, setup) for name, setup, expect in [
        ("missing", lambda t, w: {"bad": str(t / "none")}, ("not found",)),
        ("folder", folder(), ("is a folder",)),
        ("fifo", fifo(), ("not a regular file",)),
        ("fields", put("r.txt", "200 Q0 d1 1\n"), ("r.txt:1", "fields")),
        ("score-text", put("r.txt", "200 Q0 d1 1 high tag\n"), ("r.txt:1", "score")),
        ("score-nan", put("r.txt", "200 Q0 d1 1 nan tag\n"), ("r.txt:1", "score")),
        ("duplicate", put("r.txt", "200 Q0 d1 1 2 t\n200 Q0 d1 2 1 t\n"), ("r.txt:2", "twice")),
    ]],
    Case("eval-relevance-level-nan", E + ["--relevance-level", "nan"], ("--relevance-level",)),
    Case("eval-relevance-level-inf", E + ["--relevance-level", "inf"], ("--relevance-level",)),
    Case("eval-metrics-bogus", E + ["--metrics", "ndcg@10,bogus"], ("bogus",)),
    Case("eval-metrics-empty", E + ["--metrics", ","], ("--metrics",)),
    Case("eval-metrics-cutoff", E + ["--metrics", "ndcg@-1"], ("ndcg@-1",)),
    Case("eval-preset-bogus", E + ["--preset", "bogus"], ("--preset",)),
    Case("eval-output-folder", E + ["--output", "{data}"], ("--output", "folder")),
    Case("eval-output-is-run", E + ["--output", "{run}"], ("--output", "input")),
    Case("eval-output-under-file", E + ["--output", "{run}/x.json"], ("--output", "is a file")),
    # ------------------------------------------------------------------ ltr calibrate
    *[Case(f"calibrate-scores-{name}", C[:2] + ["{bad}"] + C[3:], expect, setup) for name, setup, expect in [
        ("missing", lambda t, w: {"bad": str(t / "none")}, ("--scores", "not found")),
        ("folder", folder(), ("--scores", "is a folder")),
        ("fifo", fifo(), ("--scores", "not a regular file")),
        ("text", put("s.txt", "0.1\nabc\n"), ("s.txt:2", "not a number")),
        ("nan", put("s.txt", "0.1\nnan\n"), ("s.txt:2", "finite")),
        ("empty-line", put("s.txt", "0.1\n\n0.2\n"), ("s.txt:2", "empty")),
        ("empty", put("s.txt", ""), ("s.txt", "no values")),
        ("rows", put("s.txt", "0.1\n0.2\n"), ("rows",)),
        ("npy-2d", lambda t, w: (np.save(t / "s.npy", np.zeros((2, 2))), {"bad": str(t / "s.npy")})[1], ("s.npy", "1-d")),
        ("npy-garbage", put("s.npy", b"garbage"), ("s.npy",)),
        ("npy-object", put("s.npy", b"\x93NUMPY\x01\x00v\x00{'descr': '|O', 'fortran_order': False, 'shape': (2,), }" + b" " * 50 + b"\n"), ("s.npy",)),
        ("constant", put("s.txt", "0.5\n" * 200), ("constant",)),
    ]],
    Case("calibrate-labels-2", C[:4] + ["{bad}"] + C[5:], ("l.txt:1", "label"), put("l.txt", "2\n" * 200)),
    Case("calibrate-groups-rows", C + ["--groups", "{bad}"], ("rows",), put("g.txt", "a\nb\n")),
    Case("calibrate-fit-fraction-0", C + ["--fit-fraction", "0"], ("--fit-fraction",)),
    Case("calibrate-fit-fraction-above-1", C + ["--fit-fraction", "1.5"], ("--fit-fraction",)),
    Case("calibrate-fit-fraction-nan", C + ["--fit-fraction", "nan"], ("--fit-fraction",)),
    Case("calibrate-bins-0", C + ["--bins", "0"], ("--bins",)),
    Case("calibrate-seed-negative", C + ["--seed", "-1"], ("--seed",)),
    Case("calibrate-method-bogus", C[:-4] + ["--method", "bogus", "--out", "{tmp}/c"], ("--method",)),
    Case("calibrate-out-is-file", C[:-1] + ["{scores}"], ("--out", "not a folder")),
    Case("calibrate-out-under-file", C[:-1] + ["{scores}/c"], ("--out", "is a file")),
    Case("calibrate-out-data-folder", C[:-1] + ["{data}"], ("--out",)),
    Case("calibrate-tensorboard-under-file", C + ["--tensorboard", "{scores}/tb"], ("--tensorboard", "is a file")),
    # ------------------------------------------------------------------ ltr clicks simulate
    Case("simulate-eta-nan", S + ["--eta", "nan"], ("--eta",)),
    Case("simulate-eta-negative", S + ["--eta", "-1"], ("--eta",)),
    Case("simulate-eps-negative", S + ["--eps", "-0.1"], ("--eps",)),
    Case("simulate-eps-above-1", S + ["--eps", "1.5"], ("--eps",)),
    Case("simulate-max-label-nan", S + ["--max-label", "nan"], ("--max-label",)),
    Case("simulate-max-label-0", S + ["--max-label", "0"], ("--max-label",)),
    Case("simulate-top-k-negative", S + ["--top-k", "-1"], ("--top-k",)),
    Case("simulate-sessions-0", S + ["--sessions-per-query", "0"], ("--sessions-per-query",)),
    Case("simulate-randomize-1.5", S + ["--randomize-fraction", "1.5"], ("--randomize-fraction",)),
    Case("simulate-swap-nan", S + ["--swap-fraction", "nan"], ("--swap-fraction",)),
    Case("simulate-logger-temperature-negative", S + ["--logger-temperature", "-1"], ("--logger-temperature",)),
    Case("simulate-logger-temperature-inf", S + ["--logger-temperature", "inf"], ("--logger-temperature",)),
    Case("simulate-fractions-sum", S + ["--swap-fraction", "0.6", "--randomize-fraction", "0.6"], ("fraction",)),
    Case("simulate-noise-negative", S + ["--logger-noise", "-1"], ("--logger-noise",)),
    Case("simulate-noise-nan", S + ["--logger-noise", "nan"], ("--logger-noise",)),
    Case("simulate-seed-negative", S + ["--seed", "-1"], ("--seed",)),
    Case("simulate-logger-ridge-0", S + ["--logger-ridge", "0"], ("--logger-ridge",)),
    Case("simulate-logger-ridge-text", S + ["--logger-ridge", "ten"], ("--logger-ridge",)),
    Case("simulate-logger-ridge-and-noise", S + ["--logger-ridge", "5", "--logger-noise", "1"], ("--logger-noise",)),
    Case("simulate-logger-scores-rows", S + ["--logger-scores", "{scores}"], ("--logger-scores", "rows")),
    Case("simulate-logger-scores-fifo", S + ["--logger-scores", "{bad}"], ("not a regular file",), fifo()),
    Case("simulate-logger-model-missing", S + ["--logger-model", "{tmp}/none"], ("--logger-model",)),
    Case("simulate-logger-model-wider", ["clicks", "simulate", "--data", "{narrow}", "--out", "{tmp}/sim", "--quiet",
                                         "--logger-model", "{lin}"], ("narrow.txt", "features")),
    Case("simulate-out-under-file", S[:4] + ["--out", "{train}/sim"] + S[6:], ("--out", "is a file")),
    Case("simulate-out-exists", S[:4] + ["--out", "{clicks}"] + S[6:], ("already exists",)),
    Case("simulate-force-data-folder", ["clicks", "simulate", "--data", "{mytrain}", "--out", "{bad}", "--force", "--quiet"],
         ("--out",), marked_dir, ("mytrain",)),
    # ------------------------------------------------------------------ ltr clicks estimate / evaluate
    *[Case(f"estimate-log-{name}", ["clicks", "estimate", "--log", "{bad}"], expect, setup) for name, setup, expect in [
        ("missing", lambda t, w: {"bad": str(t / "none.npz")}, ("not found",)),
        ("folder", folder(), ("is a folder",)),
        ("fifo", fifo(), ("not a regular file",)),
        ("garbage", put("c.npz", b"garbage" * 10), ("c.npz",)),
        ("truncated", lambda t, w: put("c.npz", Path(w["log"]).read_bytes()[:200])(t, w), ("c.npz",)),
        ("empty", put("c.npz", b""), ("c.npz",)),
        ("missing-array", click_log(click=None), ("click",)),
        ("meta-not-json", click_log(meta="{x"), ("hostile.npz",)),
        ("short-array", click_log(click=lambda a: a[:-1]), ("hostile.npz",)),
        ("position-0", click_log(position=lambda a: a * 0), ("hostile.npz", "position")),
        ("click-5", click_log(click=lambda a: a * 0 + 5), ("hostile.npz", "click")),
        ("doc-negative", click_log(doc=lambda a: a * 0 - 1), ("hostile.npz", "doc")),
        ("propensity-nan", click_log(propensity=lambda a: a * np.nan), ("hostile.npz", "propensity")),
        ("session-out-of-range", click_log(session=lambda a: a + 10**6), ("hostile.npz", "session")),
        ("mode-7", click_log(session_mode=lambda a: a * 0 + 7), ("hostile.npz", "session_mode")),
        ("float-arrays", click_log(position=lambda a: a.astype(float) + 0.5), ("hostile.npz", "position")),
        ("2d-array", click_log(click=lambda a: np.stack([a, a])), ("hostile.npz", "click")),
    ]],
    Case("estimate-positions-0", EST + ["--positions", "0"], ("--positions",)),
    Case("estimate-confidence-1", EST + ["--confidence", "1"], ("--confidence",)),
    Case("estimate-confidence-nan", EST + ["--confidence", "nan"], ("--confidence",)),
    Case("estimate-swap-without-swaps", EST + ["--method", "swap"], ("swap",)),
    Case("estimate-json-folder", EST + ["--json", "{data}"], ("--json", "folder")),
    Case("estimate-json-is-log", EST + ["--json", "{log}"], ("--json", "input")),
    Case("estimate-json-under-file", EST + ["--json", "{log}/e.json"], ("--json", "is a file")),
    Case("evaluate-scores-rows", EV + ["--scores", "{scores}"], ("--scores", "rows")),
    Case("evaluate-scores-nan", EV + ["--scores", "{bad}"], ("s.txt:1",), put("s.txt", "nan\n")),
    Case("evaluate-other-data", ["clicks", "evaluate", "--log", "{log}", "--data", "{test}", "--ranker", "{lin}"], ("--log",)),
    Case("evaluate-k-0", EV + ["--ranker", "{lin}", "--k", "0"], ("--k",)),
    Case("evaluate-clip-0", EV + ["--ranker", "{lin}", "--clip", "0"], ("--clip",)),
    Case("evaluate-clip-2", EV + ["--ranker", "{lin}", "--clip", "2"], ("--clip",)),
    Case("evaluate-clip-nan", EV + ["--ranker", "{lin}", "--clip", "nan"], ("--clip",)),
    Case("evaluate-ranker-not-folder", EV + ["--ranker", "{train}"], ("--ranker", "not a folder")),
    Case("evaluate-ranker-missing", EV + ["--ranker", "{tmp}/none"], ("--ranker",)),
    Case("evaluate-json-folder", EV + ["--ranker", "{lin}", "--json", "{data}"], ("--json", "folder")),
    Case("evaluate-json-is-data", EV + ["--ranker", "{lin}", "--json", "{train}"], ("--json", "input")),
    Case("evaluate-log-hostile", ["clicks", "evaluate", "--log", "{bad}", "--data", "{train}", "--ranker", "{lin}"],
         ("--log", "not simulated"), click_log(doc=lambda a: a + 10**6)),
    # ------------------------------------------------------------------ ltr clicks open-bandit
    Case("open-bandit-missing", OB + ["{tmp}/none"], ("--data", "not found")),
    Case("open-bandit-file", OB + ["{train}"], ("--data", "not a folder")),
    Case("open-bandit-empty-folder", OB + ["{bad}"], ("a_folder",), folder()),
    Case("open-bandit-confidence", OB + ["{data}", "--confidence", "1.5"], ("--confidence",)),
    Case("open-bandit-resamples-0", OB + ["{data}", "--resamples", "0"], ("--resamples",)),
    Case("open-bandit-seed-negative", OB + ["{data}", "--seed", "-1"], ("--seed",)),
    Case("open-bandit-campaign-escape", OB + ["{data}", "--campaign", "../../etc"], ("--campaign",)),
    Case("open-bandit-garbage-csv", OB + ["{bad}", "--policy", "random"], ("all.csv",),
         lambda t, w: ((t / "ob" / "random" / "all").mkdir(parents=True),
                       (t / "ob" / "random" / "all" / "all.csv").write_text("a,b\n1\n"),
                       {"bad": str(t / "ob")})[2]),
    Case("open-bandit-csv-fifo", OB + ["{bad}", "--policy", "random"], ("all.csv",),
         lambda t, w: ((t / "ob" / "random" / "all").mkdir(parents=True),
                       os.mkfifo(t / "ob" / "random" / "all" / "all.csv"),
                       {"bad": str(t / "ob")})[2]),
    Case("open-bandit-json-folder", OB + ["{data}", "--json", "{data}"], ("--json",)),
    # ------------------------------------------------------------------ ltr synth
    Case("synth-queries-0", SY + ["--queries", "0"], ("--queries",)),
    Case("synth-queries-negative", SY + ["--queries", "-5"], ("--queries",)),
    Case("synth-features-0", SY + ["--features", "0"], ("--features",)),
    Case("synth-mean-length-0", SY + ["--mean-length", "0"], ("--mean-length",)),
    Case("synth-mean-length-nan", SY + ["--mean-length", "nan"], ("--mean-length",)),
    Case("synth-max-length-0", SY + ["--max-length", "0"], ("--max-length",)),
    Case("synth-empty-share-1.5", SY + ["--empty-share", "1.5"], ("--empty-share",)),
    Case("synth-empty-share-nan", SY + ["--empty-share", "nan"], ("--empty-share",)),
    Case("synth-label-noise-negative", SY + ["--label-noise", "-1"], ("--label-noise",)),
    Case("synth-users-0", SY + ["--users", "0"], ("--users",)),
    Case("synth-valid-share-nan", SY + ["--valid-share", "nan"], ("--valid-share",)),
    Case("synth-shares-sum", SY + ["--valid-share", "0.6", "--test-share", "0.5"], ("share",)),
    Case("synth-seed-negative", SY + ["--seed", "-1"], ("--seed",)),
    Case("synth-out-is-file", ["synth", "--out", "{train}", "--quiet"], ("--out", "not a folder")),
    Case("synth-out-under-file", ["synth", "--out", "{train}/x", "--quiet"], ("--out", "is a file")),
    Case("synth-out-exists", ["synth", "--out", "{synth}", "--quiet"], ("already holds",)),
    Case("synth-force-user-data", ["synth", "--out", "{bad}", "--force", "--quiet"], ("--out",), marked_dir,
         ("mytrain", "myvalid")),
    # ------------------------------------------------------------------ ltr ablate
    *[Case(f"ablate-toml-{name}", A + ["--config", "{bad}"], expect, put("a.toml", body)) for name, body, expect in [
        ("bad-syntax", "[ablation\n", ("a.toml",)),
        ("no-datasets", "[ablation]\nseeds = 2\n", ("a.toml", "datasets")),
        ("unknown-table", "[ablaton]\n", ("a.toml", "ablaton")),
        ("unknown-key", "[ablation]\nseed = 2\n[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\n", ("a.toml", "seed")),
        ("method-bogus", "[ablation]\nmethods = [\"bogus\"]\nreference = \"bogus\"\n[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\n", ("bogus",)),
        ("methods-string", "[ablation]\nmethods = \"ranknet\"\n[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\n", ("a.toml", "methods")),
        ("seeds-text", "[ablation]\nseeds = \"3\"\n[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\n", ("a.toml", "seeds")),
        ("seeds-0", "[ablation]\nseeds = 0\n[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\n", ("a.toml", "seeds")),
        ("seeds-bool", "[ablation]\nseeds = true\n[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\n", ("a.toml", "seeds")),
        ("confidence-2", "[ablation]\nconfidence = 2.0\n[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\n", ("a.toml", "confidence")),
        ("resamples-0", "[ablation]\nn_resamples = 0\n[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\n", ("a.toml", "n_resamples")),
        ("threads-0", "[ablation]\nthreads_per_cell = 0\n[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\n", ("a.toml", "threads_per_cell")),
        ("train-epochs-bool", "[train]\nepochs = true\n[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\n", ("a.toml", "epochs")),
        ("train-lr-negative", "[train]\nlr = -1.0\n[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\n", ("a.toml", "lr")),
        ("model-hidden-text", "[model]\nhidden = \"x\"\n[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\n", ("a.toml", "hidden")),
        ("gbdt-rounds-text", "[gbdt]\nnum_boost_round = \"x\"\n[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\n", ("a.toml", "num_boost_round")),
        ("dataset-kind", "[[datasets]]\nname = \"s\"\nkind = \"parquet2\"\n", ("a.toml", "parquet2")),
        ("dataset-name-slash", "[[datasets]]\nname = \"../x\"\nkind = \"synthetic\"\n", ("a.toml", "../x")),
        ("dataset-svm-missing", "[[datasets]]\nname = \"s\"\nkind = \"svmlight\"\ntrain = \"/nonexistent/t.txt\"\ntest = \"/nonexistent/t.txt\"\n", ("/nonexistent/t.txt",)),
        ("dataset-synthetic-bogus", "[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\nn_queries = -4\n", ("n_queries",)),
        ("dataset-folds-missing", "[[datasets]]\nname = \"s\"\nkind = \"folds\"\npath = \"/nonexistent\"\n", ("/nonexistent",)),
        ("datasets-not-list", "datasets = 3\n", ("a.toml", "datasets")),
    ]],
    Case("ablate-toml-missing", A + ["--config", "{tmp}/none.toml"], ("none.toml",)),
    Case("ablate-toml-folder", A + ["--config", "{bad}"], ("is a folder",), folder()),
    Case("ablate-toml-fifo", A + ["--config", "{bad}"], ("not a regular file",), fifo()),
    Case("ablate-workers-negative", A + ["--quick", "--workers", "-1"], ("--workers",)),
    Case("ablate-seeds-0", A + ["--quick", "--seeds", "0"], ("--seeds",)),
    Case("ablate-methods-bogus", A + ["--quick", "--methods", "bogus"], ("bogus",)),
    Case("ablate-methods-without-reference", A + ["--quick", "--methods", "lambdarank"], ("reference",)),
    Case("ablate-reference-bogus", A + ["--quick", "--reference", "bogus"], ("bogus",)),
    Case("ablate-datasets-bogus", A + ["--quick", "--datasets", "bogus"], ("--datasets",)),
    Case("ablate-report-only-empty", A + ["--quick", "--report-only"], ("missing",)),
    Case("ablate-out-under-file", ["ablate", "--quick", "--out", "{train}/abl", "--no-progress"], ("--out", "is a file")),
    Case("ablate-out-is-file", ["ablate", "--quick", "--out", "{train}", "--no-progress"], ("--out", "not a folder")),
    # ------------------------------------------------------------------ more options and files of every command
    Case("eval-gain-bogus", E + ["--gain", "cubic"], ("--gain",)),
    Case("eval-ties-bogus", E + ["--ties", "random"], ("--ties",)),
    Case("eval-empty-bogus", E + ["--empty", "nan"], ("--empty",)),
    Case("eval-relevance-level-text", E + ["--relevance-level", "high"], ("--relevance-level",)),
    Case("eval-metrics-cutoff-text", E + ["--metrics", "ndcg@ten"], ("ndcg@ten",)),
    Case("eval-output-is-qrels", E + ["--output", "{qrels}"], ("--output", "input")),
    Case("calibrate-platt-input-bogus", C + ["--platt-input", "probit"], ("--platt-input",)),
    Case("calibrate-groups-missing", C + ["--groups", "{tmp}/none"], ("--groups", "not found")),
    Case("calibrate-groups-folder", C + ["--groups", "{bad}"], ("--groups", "is a folder"), folder()),
    Case("calibrate-groups-fifo", C + ["--groups", "{bad}"], ("--groups", "not a regular file"), fifo()),
    Case("calibrate-labels-fifo", C[:4] + ["{bad}"] + C[5:], ("--labels", "not a regular file"), fifo()),
    Case("calibrate-labels-text", C[:4] + ["{bad}"] + C[5:], ("l.txt:1", "label"), put("l.txt", "yes\n" * 200)),
    Case("calibrate-labels-one-class", C[:4] + ["{bad}"] + C[5:], ("positives",), put("l.txt", "1\n" * 200)),
    Case("calibrate-bins-text", C + ["--bins", "many"], ("--bins",)),
    Case("calibrate-out-is-train-folder", C[:-1] + ["{lin}"], ("--out",)),
    Case("estimate-method-bogus", EST + ["--method", "bogus"], ("--method",)),
    Case("estimate-positions-text", EST + ["--positions", "all"], ("--positions",)),
    Case("evaluate-log-missing", ["clicks", "evaluate", "--log", "{tmp}/none.npz", "--data", "{train}", "--ranker", "{lin}"], ("not found",)),
    Case("evaluate-log-fifo", ["clicks", "evaluate", "--log", "{bad}", "--data", "{train}", "--ranker", "{lin}"], ("not a regular file",), fifo()),
    Case("evaluate-data-fifo", ["clicks", "evaluate", "--log", "{log}", "--data", "{bad}", "--ranker", "{lin}"], ("--data", "not a regular file"), fifo()),
    Case("evaluate-scores-fifo", EV + ["--scores", "{bad}"], ("--scores", "not a regular file"), fifo()),
    Case("evaluate-propensity-bogus", EV + ["--ranker", "{lin}", "--propensity", "magic"], ("--propensity",)),
    Case("evaluate-ranker-narrower-data", ["clicks", "evaluate", "--log", "{log}", "--data", "{narrow}", "--ranker", "{lin}"], ("--log",)),
    Case("evaluate-ranker-hostile", EV + ["--ranker", "{bad}"], ("model.pt",), model_copy("lin", truncate("model.pt"))),
    Case("simulate-model-bogus", S + ["--model", "dcm"], ("--model",)),
    Case("simulate-logger-model-hostile", S + ["--logger-model", "{bad}"], ("model.json", "inside"),
         model_copy("gb", edit_json("model.json", file="../x"))),
    Case("simulate-logger-scores-nan", S + ["--logger-scores", "{bad}"], ("s.txt:1",), put("s.txt", "nan\n")),
    Case("simulate-out-is-input-folder", ["clicks", "simulate", "--data", "{train}", "--out", "{data}", "--quiet", "--force"], ("--out",)),
    Case("open-bandit-policy-bogus", OB + ["{data}", "--policy", "greedy"], ("--policy",)),
    Case("open-bandit-interval-bogus", OB + ["{data}", "--interval", "exact"], ("--interval",)),
    Case("open-bandit-json-under-file", OB + ["{data}", "--json", "{train}/x.json"], ("--json", "is a file")),
    Case("predict-model-fifo", ["predict", "--model", "{bad}", "--data", "{test}", "--out", "{tmp}/r"], ("--model",), fifo()),
    Case("predict-data-wider", ["predict", "--model", "{bad}", "--data", "{test}", "--out", "{tmp}/r"], ("--data", "5 features", "4"),
         lambda t, w: _narrow_model(t, w)),
    Case("predict-out-is-model-file", P[:-1] + ["{lin}/model.pt"], ("--out",)),
    Case("train-test-fifo", T + ["--test", "{bad}"], ("--test", "not a regular file"), fifo()),
    Case("train-test-label-2000", T + ["--test", "{bad}"], ("bad.txt:1", "2000"), put("bad.txt", "2000 qid:1 1:1 5:1\n")),
    Case("train-out-is-input", T[:-1] + ["{valid}"], ("--out",)),
    Case("train-out-holds-config", T[:-2] + ["--out", "{bad}", "--force", "--config", "{bad}/run.toml"], ("--out",),
         lambda t, w: ((t / "d").mkdir(), (t / "d" / "run.toml").write_text("[train]\nepochs = 1\n"), {"bad": str(t / "d")})[2]),
    Case("gbdt-config-fifo", G + ["--config", "{bad}"], ("not a regular file",), fifo()),
    Case("gbdt-train-folder", G[:2] + ["{bad}"] + G[3:], ("--train", "is a folder"), folder()),
    Case("gbdt-gain-bogus", G + ["--gain", "cubic"], ("--gain",)),
    *[Case(f"toml-more-{name}", (T if cmd == "t" else G) + ["--config", "{bad}"], expect, put("m.toml", body))
      for name, cmd, body, expect in [
          ("metrics-empty-list", "t", "[train]\nmetrics = []\n", ("m.toml", "metrics")),
          ("epochs-huge-float", "t", "[train]\nepochs = 1e400\n", ("m.toml", "epochs")),
          ("preset-list", "t", "[train]\npreset = [\"trec_eval\"]\n", ("m.toml", "preset")),
          ("hidden-huge", "t", "[model]\nhidden = [100000000]\n", ("m.toml", "hidden")),
          ("hidden-empty", "t", "[model]\nhidden = []\n", ("m.toml", "hidden")),
          ("loss-k-0", "t", "[loss]\nname = \"lambdarank\"\nk = 0\n", ("m.toml", "k")),
          ("loss-k-float", "t", "[loss]\nname = \"lambdarank\"\nk = 2.5\n", ("m.toml", "k")),
          ("loss-gain-bogus", "t", "[loss]\nname = \"lambdarank\"\ngain = \"cubic\"\n", ("m.toml", "gain")),
          ("loss-reduction-none", "t", "[loss]\nname = \"ranknet\"\nreduction = \"none\"\n", ("m.toml", "reduction")),
          ("loss-table-nested", "t", "[loss.x]\ny = 1\n", ("x",)),
          ("gbdt-early-stopping-negative", "g", "[gbdt]\nearly_stopping_rounds = -1\n", ("m.toml", "early_stopping_rounds")),
          ("gbdt-preset-number", "g", "[gbdt]\npreset = 1\n", ("m.toml", "preset")),
          ("lightgbm-nan", "g", "[lightgbm]\nlearning_rate = nan\n", ("m.toml", "learning_rate")),
          ("lightgbm-negative-rate", "g", "[lightgbm]\nlearning_rate = -1.0\n", ("learning_rate",)),
          ("lightgbm-objective-bogus", "g", "[lightgbm]\nobjective = \"ranking2\"\n", ("ranking2",)),
      ]],
    *[Case(f"ablate-more-{name}", A + ["--config", "{bad}"], expect, put("a.toml", body + "[[datasets]]\nname = \"s\"\nkind = \"synthetic\"\n"))
      for name, body, expect in [
          ("loss-options-not-table", "[loss_options]\nranknet = 3\n", ("a.toml", "loss_options")),
          ("loss-options-sigma", "[loss_options.ranknet]\nsigma = -1.0\n", ("a.toml", "sigma")),
          ("metrics-empty", "[ablation]\nmetrics = []\n", ("a.toml", "metrics")),
          ("seeds-negative", "[ablation]\nseeds = [-1, 2]\n", ("a.toml", "seeds")),
          ("seeds-repeat", "[ablation]\nseeds = [1, 1]\n", ("a.toml", "seeds")),
          ("reference-number", "[ablation]\nreference = 3\n", ("a.toml", "reference")),
          ("train-reserved-seed", "[train]\nseed = 3\n", ("a.toml", "seed")),
          ("lightgbm-table", "[lightgbm]\nx = {a = 1}\n", ("a.toml", "x")),
          ("gbdt-unknown", "[gbdt]\nrounds = 3\n", ("a.toml", "rounds")),
          ("model-dropout-1", "[model]\ndropout = 1.0\n", ("a.toml", "dropout")),
      ]],
    # ------------------------------------------------------------------ ltr compare
    *[Case(f"compare-{name}", ["compare", "--qrels", "{qrels}", "--run", "{run}", "--run", "{bad}", *extra], expect, setup)
      for name, extra, setup, expect in [
          ("run-missing", [], lambda t, w: {"bad": str(t / "none")}, ("not found",)),
          ("run-folder", [], folder(), ("is a folder",)),
          ("run-fifo", [], fifo(), ("not a regular file",)),
          ("run-score-nan", [], put("r.txt", "200 Q0 q200d0 1 nan t\n"), ("r.txt:1", "score")),
          ("confidence-1", ["--confidence", "1"], a_file(), ("--confidence",)),
          ("resamples-0", ["--resamples", "0"], a_file(), ("--resamples",)),
          ("seed-negative", ["--seed", "-1"], a_file(), ("--seed",)),
          ("test-bogus", ["--test", "wilcoxon2"], a_file(), ("--test",)),
          ("relevance-level-nan", ["--relevance-level", "nan"], a_file(), ("--relevance-level",)),
          ("max-grade-0", ["--max-grade", "0"], a_file(), ("--max-grade",)),
      ]],
    Case("compare-one-run", ["compare", "--qrels", "{qrels}", "--run", "{run}"], ("two --run",)),
    Case("compare-qrels-fifo", ["compare", "--qrels", "{bad}", "--run", "{run}", "--run", "{run}"], ("not a regular file",), fifo()),
    Case("compare-latex-is-run", ["compare", "--qrels", "{qrels}", "--run", "{run}", "--run", "{run}", "--name", "a",
                                  "--name", "b", "--latex", "{run}"], ("--latex", "input")),
    Case("compare-plot-folder", ["compare", "--qrels", "{qrels}", "--run", "{run}", "--run", "{run}", "--name", "a",
                                 "--name", "b", "--plot", "{data}"], ("--plot", "folder")),
    Case("compare-json-under-file", ["compare", "--qrels", "{qrels}", "--run", "{run}", "--run", "{run}", "--name", "a",
                                     "--name", "b", "--json", "{run}/x.json"], ("--json", "is a file")),
    Case("ablate-out-data-folder", ["ablate", "--quick", "--out", "{data}", "--no-progress", "--report-only"], ("--out",)),
]


# --------------------------------------------------------------------------------------------------
# Commands and options added after issue 13: convert, Parquet, stores, export, tune, importance,
# --nproc, Dask, attention/ensembles, predict --format
# --------------------------------------------------------------------------------------------------
CV = ["convert", "{bad}", "--out", "{tmp}/st", "--quiet"]
PQ_T = ["train", "--train", "{bad}", "--valid", "{valid}", "--quiet", "--epochs", "1", "--out", "{tmp}/o"]
ST_T = ["train", "--train", "{bad}", "--valid", "{store}", "--quiet", "--epochs", "1", "--out", "{tmp}/o"]
X = ["export", "--model", "{lin}", "--format", "torchscript", "--out", "{tmp}/m.pt"]
TU = ["tune", "--config", "{bad}", "--trials", "1", "--out", "{tmp}/tu"]
IM = ["importance", "--model", "{lin}", "--data", "{test}", "--repeats", "1"]
NaN = float("nan")
LR = "[space.train]\nlr = { float = [1e-3, 1e-2] }\n"

NEW_CASES: list[Case] = [
    # ------------------------------------------------------------------ ltr convert
    *svm_cases("convert-src", CV)[:8],
    Case("convert-out-is-src", ["convert", "{train}", "--out", "{train}", "--quiet"], ("--out",)),
    Case("convert-out-data-folder-force", ["convert", "{train}", "--out", "{data}", "--force", "--quiet"], ("--out",)),
    Case("convert-out-existing-store", ["convert", "{train}", "--out", "{store}", "--quiet"], ("--out", "--force")),
    Case("convert-out-under-file", ["convert", "{train}", "--out", "{train}/st", "--quiet"], ("--out", "is a file")),
    Case("convert-out-model-folder-force", ["convert", "{train}", "--out", "{lin}", "--force", "--quiet"], ("--out",)),
    Case("convert-block-rows-0", CV + ["--block-rows", "0"], ("--block-rows",), a_file()),
    Case("convert-block-rows-negative", CV + ["--block-rows", "-5"], ("--block-rows",), a_file()),
    Case("convert-n-features-0", CV + ["--n-features", "0"], ("--n-features",), a_file()),
    Case("convert-n-features-text", CV + ["--n-features", "five"], ("--n-features",), a_file()),
    Case("convert-n-features-narrower", ["convert", "{train}", "--out", "{tmp}/st", "--quiet", "--n-features", "2"],
         ("train.txt", "2")),
    Case("convert-query-file-missing", ["convert", "{train}", "--out", "{tmp}/st", "--quiet", "--query-file", "{tmp}/none"],
         ("--query-file", "not found")),
    Case("convert-query-file-fifo", ["convert", "{train}", "--out", "{tmp}/st", "--quiet", "--query-file", "{bad}"],
         ("--query-file", "not a regular file"), fifo()),
    Case("convert-sort-by-query", ["convert", "{pq}", "--out", "{tmp}/st", "--quiet", "--sort-by-query"], ("--sort-by-query",)),
    Case("convert-parquet-label-column-missing", CV + ["--label-column", "grade"], ("grade",), parquet()),
    Case("convert-parquet-query-column-missing", CV + ["--query-column", "topic"], ("topic",), parquet()),
    Case("convert-parquet-feature-columns-missing", CV + ["--feature-columns", "f1,f9"], ("f9",), parquet()),
    Case("convert-parquet-feature-columns-empty", CV + ["--feature-columns", ""], ("--feature-columns",), parquet()),
    Case("convert-parquet-feature-columns-repeat", CV + ["--feature-columns", "f1,f1"], ("f1",), parquet()),
    Case("convert-parquet-feature-is-text", CV + ["--feature-columns", "f1,docid"], ("docid",), parquet()),
    Case("convert-parquet-nan-label", CV, ("bad.parquet", "label"), parquet(label=lambda v: np.where(np.arange(len(v)) == 3, NaN, v))),
    Case("convert-parquet-nan-feature", CV, ("bad.parquet", "f2"), parquet(f2=lambda v: np.where(np.arange(len(v)) == 5, NaN, v))),
    Case("convert-parquet-label-2000", CV, ("bad.parquet", "2000"), parquet(label=lambda v: np.where(np.arange(len(v)) == 1, 2000, v))),
    Case("convert-parquet-qid-not-contiguous", CV, ("bad.parquet", "contiguous"), parquet(qid=lambda v: np.tile(np.arange(1, 5), 4))),
    Case("convert-parquet-no-label", CV, ("label",), parquet(label=None)),
    Case("convert-parquet-weight-negative", CV + ["--weight-column", "weight"], ("weight",),
         parquet(weight=lambda v: -v)),
    Case("convert-parquet-weight-nan", CV + ["--weight-column", "weight"], ("weight",),
         parquet(weight=lambda v: np.where(np.arange(len(v)) == 0, NaN, v))),
    Case("convert-parquet-truncated", CV, ("bad.parquet",), lambda t, w: put("bad.parquet", Path(w["pq"]).read_bytes()[:300])(t, w)),
    Case("convert-parquet-empty-folder", CV, ("bad",), lambda t, w: ((t / "bad").mkdir(), {"bad": str(t / "bad")})[1]),
    # ------------------------------------------------------------------ Parquet inputs of train, gbdt, predict, clicks
    Case("train-parquet-label-column-missing", PQ_T + ["--label-column", "grade"], ("grade",), parquet()),
    Case("train-parquet-doc-id-column-missing", PQ_T + ["--doc-id-column", "url"], ("url",), parquet()),
    Case("train-parquet-weight-column-missing", PQ_T + ["--weight-column", "w"], ("w",), parquet()),
    Case("train-parquet-nan-feature", PQ_T, ("bad.parquet", "f1"), parquet(f1=lambda v: np.full(len(v), NaN))),
    Case("train-parquet-inf-feature", PQ_T, ("bad.parquet", "f3"), parquet(f3=lambda v: np.where(np.arange(len(v)) == 2, np.inf, v))),
    Case("train-parquet-fifo", PQ_T, ("--train", "not a regular file"), fifo("p.parquet")),
    Case("train-parquet-folder-no-files", PQ_T, ("--train",), folder()),
    Case("gbdt-parquet-feature-columns-missing", ["gbdt", "--train", "{bad}", "--valid", "{pq}", "--quiet",
         "--num-boost-round", "2", "--out", "{tmp}/o", "--feature-columns", "f1,nope"], ("nope",), parquet()),
    Case("gbdt-parquet-valid-lacks-feature", ["gbdt", "--train", "{pq}", "--valid", "{bad}", "--quiet", "--num-boost-round", "2",
         "--out", "{tmp}/o"], ("f3",), parquet(f3=None)),
    Case("predict-parquet-missing-feature", ["predict", "--model", "{bad}", "--data", "{tmp}/p.parquet", "--out", "{tmp}/r.run"],
         ("f3",), lambda t, w: (_quiet_main(["train", "--train", w["pq"], "--valid", w["pq"], "--quiet", "--epochs", "1",
                                             "--model", "linear", "--out", str(t / "m")]),
                                _parquet(t / "p.parquet", f3=None), {"bad": str(t / "m")})[2]),
    Case("simulate-parquet-nan-label", ["clicks", "simulate", "--data", "{bad}", "--out", "{tmp}/sim", "--quiet"],
         ("bad.parquet", "label"), parquet(label=lambda v: np.full(len(v), NaN))),
    # ------------------------------------------------------------------ stores as inputs
    Case("store-truncated-features", ST_T, ("features.npy",), store_copy(truncate("features.npy", 100))),
    Case("store-features-missing", ST_T, ("features",), store_copy(lambda f: (f / "features.npy").unlink())),
    Case("store-json-not-json", ST_T, ("store.json",), store_copy(write("store.json", "{nope"))),
    Case("store-json-list", ST_T, ("store.json",), store_copy(write("store.json", "[1, 2]"))),
    Case("store-json-n-items-wrong", ST_T, ("store",), store_copy(edit_json("store.json", n_items=7))),
    Case("store-json-n-items-text", ST_T, ("store.json", "n_items"), store_copy(edit_json("store.json", n_items="many"))),
    Case("store-json-format-other", ST_T, ("store.json", "format"), store_copy(edit_json("store.json", format="v9"))),
    Case("store-json-array-outside", ST_T, ("store.json",), store_copy(edit_json("store.json", arrays={"features": "../../x.npy"}))),
    Case("store-labels-truncated", ST_T, ("labels",), store_copy(truncate("labels.npy", 90))),
    Case("store-offsets-garbled", ST_T, ("store",), store_copy(lambda f: np.save(f / "query_offsets.npy", np.array([0, 50, 3, 999])))),
    Case("store-as-valid-narrower", ["train", "--train", "{train}", "--valid", "{bad}", "--quiet", "--epochs", "1", "--out", "{tmp}/o"],
         ("--valid", "3 features"), lambda t, w: ((_quiet_main(["convert", w["narrow"], "--out", str(t / "ns"), "--quiet"])), {"bad": str(t / "ns")})[1]),
    Case("predict-out-inside-a-store-copy", ["predict", "--model", "{lin}", "--data", "{bad}", "--out", "{bad}/r.run"],
         ("--out",), read_only_store),
    Case("store-out-inside-store", ["predict", "--model", "{lin}", "--data", "{store}", "--out", "{store}/r.run"], ("--out",)),
    Case("store-train-out-is-store", ["train", "--train", "{store}", "--valid", "{valid}", "--quiet", "--epochs", "1",
                                      "--out", "{store}", "--force"], ("--out",)),
    # ------------------------------------------------------------------ ltr export
    Case("export-lightgbm-folder-torchscript", ["export", "--model", "{gb}", "--format", "torchscript", "--out", "{tmp}/m.pt"],
         ("--model", "exports to ONNX only")),
    Case("export-model-missing", ["export", "--model", "{tmp}/none", "--format", "onnx", "--out", "{tmp}/m.onnx"], ("not found",)),
    Case("export-model-is-file", ["export", "--model", "{train}", "--format", "onnx", "--out", "{tmp}/m.onnx"], ("--model",)),
    Case("export-model-pt-truncated", ["export", "--model", "{bad}", "--format", "torchscript", "--out", "{tmp}/m.pt"],
         ("model.pt",), model_copy("lin", truncate("model.pt"))),
    Case("export-model-json-bogus-type", ["export", "--model", "{bad}", "--format", "torchscript", "--out", "{tmp}/m.pt"],
         ("model.json",), model_copy("lin", edit_json("model.json", type="forest"))),
    Case("export-format-bogus", X[:4] + ["tflite"] + X[5:], ("--format",)),
    Case("export-out-is-model-pt", X[:-1] + ["{lin}/model.pt"], ("--out",)),
    Case("export-out-inside-model", X[:-1] + ["{lin}/exported.pt"], ("--out",)),
    Case("export-out-is-folder", X[:-1] + ["{data}"], ("--out", "folder")),
    Case("export-out-under-file", X[:-1] + ["{train}/m.pt"], ("--out", "is a file")),
    # ------------------------------------------------------------------ ltr tune
    Case("tune-trials-0", TU[:4] + ["0"] + TU[5:], ("--trials",), space(LR)),
    Case("tune-trials-negative", TU[:4] + ["-2"] + TU[5:], ("--trials",), space(LR)),
    Case("tune-config-missing", ["tune", "--config", "{tmp}/none.toml", "--trials", "1", "--out", "{tmp}/tu"], ("not found",)),
    Case("tune-config-fifo", TU, ("not a regular file",), fifo()),
    Case("tune-config-folder", TU, ("is a folder",), folder()),
    Case("tune-out-is-file", TU[:-1] + ["{train}"], ("--out",), space("[space.train]\nlr = { float = [1e-3, 1e-2] }\n")),
    Case("tune-out-data-folder", TU[:-1] + ["{data}"], ("--out",), space("[space.train]\nlr = { float = [1e-3, 1e-2] }\n")),
    Case("tune-query-file-bogus", TU + ["--query-file", "test=x"], ("--query-file",), space("[space.train]\nlr = { float = [1e-3, 1e-2] }\n")),
    Case("tune-train-missing", TU + ["--train", "{tmp}/none.txt"], ("not found",), space("[space.train]\nlr = { float = [1e-3, 1e-2] }\n")),
    Case("tune-kind-bogus", TU, ("space.toml", "kind"), space(LR, kind='"forest"')),
    Case("tune-kind-number", TU, ("space.toml", "kind"), space(LR, kind="3")),
    Case("tune-metric-bogus", TU, ("space.toml", "metric"), space(LR, metric='"ndcg@ten"')),
    Case("tune-data-train-missing", TU, ("not found",), space(LR, train="{tmp}/none.txt")),
    Case("tune-data-train-fifo", TU, ("not a regular file",), lambda t, w: (os.mkfifo(t / "p"), space(LR, train=str(t / "p"))(t, w))[1]),
    Case("tune-fixed-epochs-0", TU, ("space.toml", "epochs"), space(LR, epochs="0")),
    Case("tune-fixed-epochs-text", TU, ("space.toml", "epochs"), space(LR, epochs='"1"')),
    *[Case(f"tune-space-{name}", TU, expect, space(body)) for name, body, expect in [
        ("not-toml", "[space\n", ("space.toml",)),
        ("no-space", "", ("space",)),
        ("low-above-high", "[space.train]\nlr = { float = [1e-2, 1e-4] }\n", ("space.toml", "lr")),
        ("log-zero", "[space.train]\nlr = { float = [0.0, 1e-2], log = true }\n", ("space.toml", "lr")),
        ("nan-bound", "[space.train]\nlr = { float = [nan, 1e-2] }\n", ("space.toml", "lr")),
        ("int-floats", "[space.train]\nbatch_size = { int = [1.5, 8] }\n", ("space.toml", "batch_size")),
        ("choices-empty", "[space.model]\nactivation = { choices = [] }\n", ("space.toml", "activation")),
        ("choices-bogus", "[space.model]\nactivation = { choices = [\"relu\", \"bogus\"] }\n", ("activation",)),
        ("unknown-key", "[space.train]\nlearning_rate = { float = [1e-3, 1e-2] }\n", ("learning_rate",)),
        ("unknown-table", "[space.optimizer]\nlr = { float = [1e-3, 1e-2] }\n", ("optimizer",)),
        ("not-a-table", "[space.train]\nlr = 0.1\n", ("space.toml", "lr")),
        ("two-kinds", "[space.train]\nlr = { float = [1e-3, 1e-2], choices = [1] }\n", ("space.toml", "lr")),
        ("negative-lr-range", "[space.train]\nlr = { float = [-1.0, -0.1] }\n", ("lr",)),
        ("step-zero", "[space.train]\nbatch_size = { int = [1, 8], step = 0 }\n", ("space.toml", "batch_size")),
    ]],
    # ------------------------------------------------------------------ ltr importance
    Case("importance-repeats-0", IM[:-1] + ["0"], ("--repeats",)),
    Case("importance-confidence-1", IM + ["--confidence", "1"], ("--confidence",)),
    Case("importance-confidence-nan", IM + ["--confidence", "nan"], ("--confidence",)),
    Case("importance-top-negative", IM + ["--top", "-1"], ("--top",)),
    Case("importance-seed-negative", IM + ["--seed", "-1"], ("--seed",)),
    Case("importance-metric-bogus", IM + ["--metric", "ndcg@ten"], ("ndcg@ten",)),
    Case("importance-preset-bogus", IM + ["--preset", "galago"], ("galago",)),
    Case("importance-model-missing", ["importance", "--model", "{tmp}/none", "--data", "{test}"], ("not found",)),
    Case("importance-model-hostile", ["importance", "--model", "{bad}", "--data", "{test}"], ("model.pt",), model_copy("lin", truncate("model.pt"))),
    Case("importance-data-narrower", ["importance", "--model", "{lin}", "--data", "{narrow}"], ("--data",)),
    Case("importance-data-fifo", ["importance", "--model", "{lin}", "--data", "{bad}"], ("not a regular file",), fifo()),
    Case("importance-out-is-file", IM + ["--out", "{train}"], ("--out",)),
    Case("importance-out-model-folder", IM + ["--out", "{lin}"], ("--out",)),
    Case("importance-json-is-data", IM + ["--json", "{test}"], ("--json",)),
    Case("importance-json-under-file", IM + ["--json", "{train}/x.json"], ("--json", "is a file")),
    Case("importance-device-bogus", IM + ["--device", "tpu"], ("tpu",)),
    # ------------------------------------------------------------------ ltr train --nproc, attention, ensembles
    Case("train-nproc-0", T + ["--nproc", "0"], ("--nproc",)),
    Case("train-nproc-negative", T + ["--nproc", "-1"], ("--nproc",)),
    Case("train-nproc-text", T + ["--nproc", "two"], ("--nproc",)),
    Case("train-nproc-huge", T + ["--nproc", "100000"], ("--nproc",)),
    Case("train-ensemble-0", T + ["--ensemble", "0"], ("--ensemble",)),
    Case("train-ensemble-negative", T + ["--ensemble", "-3"], ("--ensemble",)),
    Case("train-attention-heads-0", T + ["--model", "attention", "--heads", "0"], ("--heads",)),
    Case("train-attention-layers-0", T + ["--model", "attention", "--layers", "0"], ("--layers",)),
    Case("train-attention-width-0", T + ["--model", "attention", "--width", "0"], ("--width",)),
    Case("train-attention-width-not-multiple", T + ["--model", "attention", "--width", "7", "--heads", "2"], ("width", "heads")),
    Case("train-attention-input-noise-negative", T + ["--model", "attention", "--input-noise", "-1"], ("--input-noise",)),
    Case("train-attention-input-noise-nan", T + ["--model", "attention", "--input-noise", "nan"], ("--input-noise",)),
    Case("train-model-bogus", T + ["--model", "gru"], ("--model",)),
    Case("train-loss-bogus", T + ["--loss", "lambdamart9"], ("lambdamart9",)),
    Case("train-toml-ensemble-float", T + ["--config", "{bad}"], ("m.toml", "ensemble"), put("m.toml", "[model]\nensemble = 2.5\n")),
    Case("train-toml-heads-text", T + ["--config", "{bad}"], ("m.toml", "heads"), put("m.toml", "[model]\ntype = \"attention\"\nheads = \"2\"\n")),
    # ------------------------------------------------------------------ ltr gbdt on Dask
    Case("gbdt-dask-workers-0", G + ["--dask-workers", "0"], ("--dask-workers",)),
    Case("gbdt-dask-workers-negative", G + ["--dask-workers", "-1"], ("--dask-workers",)),
    Case("gbdt-dask-workers-and-scheduler", G + ["--dask-workers", "2", "--dask-scheduler", "tcp://127.0.0.1:1"], ("--dask-workers", "--dask-scheduler")),
    Case("gbdt-dask-scheduler-bogus", G + ["--dask-scheduler", "not an address"], ("--dask-scheduler",)),
    Case("gbdt-dask-scheduler-unreachable", G + ["--dask-scheduler", "tcp://127.0.0.1:1"], ("--dask-scheduler",)),
    # ------------------------------------------------------------------ ltr predict --format, '-'
    Case("predict-format-bogus", P + ["--format", "csv"], ("--format",)),
    Case("new-predict-out-is-data", P[:-1] + ["{test}"], ("--out",)),
    Case("predict-out-inside-model", P[:-1] + ["{lin}/r.run"], ("--out",)),
    Case("new-predict-out-is-folder", P[:-1] + ["{data}"], ("--out",)),
    Case("new-predict-qrels-is-data", P + ["--qrels", "{test}"], ("--qrels",)),
    Case("predict-qrels-equals-out", P + ["--qrels", "{tmp}/out.run"], ("--qrels",)),
    Case("predict-tag-with-space", P + ["--tag", "a b"], ("--tag",)),
    # ------------------------------------------------------------------ options of issue 20, 22 and 24's fourth round
    Case("gbdt-external-memory-svmlight", G + ["--engine", "xgboost", "--external-memory"], ("--external-memory", "ltr convert")),
    Case("gbdt-external-memory-lightgbm", G + ["--external-memory"], ("--external-memory", "lightgbm")),
    Case("synth-query-relative-negative", SY + ["--query-relative", "-1"], ("--query-relative",)),
    Case("synth-query-relative-nan", SY + ["--query-relative", "nan"], ("--query-relative",)),
    Case("clicks-train-dla-update-bogus", ["clicks", "train", "--data", "{train}", "--log", "{log}", "--out", "{tmp}/ct",
                                           "--estimator", "dla", "--dla-propensity-update", "bogus"],
         ("--dla-propensity-update",)),
    Case("clicks-train-dla-reference-bogus", ["clicks", "train", "--data", "{train}", "--log", "{log}", "--out", "{tmp}/ct",
                                              "--estimator", "dla", "--dla-relevance-reference", "mean"],
         ("--dla-relevance-reference",)),
    *[Case(f"clicks-train-{name}", ["clicks", "train", "--data", "{train}", "--log", "{log}", "--valid", "{valid}",
                                    "--out", "{tmp}/ct", "--quiet", *argv], expect) for name, argv, expect in [
        ("lightgbm-dla", ["--engine", "lightgbm", "--estimator", "dla"], ("--engine lightgbm", "position-bias")),
        ("position-bias-neural", ["--estimator", "position-bias"], ("--engine lightgbm",)),
        ("position-bias-xgboost", ["--engine", "xgboost", "--estimator", "position-bias"], ("--engine xgboost",)),
        ("lightgbm-naive-randomized", ["--engine", "lightgbm", "--estimator", "naive", "--propensity", "randomized"],
         ("--propensity randomized", "ips, policy-aware and doubly-robust only")),
        ("xgboost-naive-randomized", ["--engine", "xgboost", "--estimator", "naive", "--propensity", "randomized"],
         ("--propensity randomized", "policy-aware only")),
        ("lightgbm-rounds-0", ["--engine", "lightgbm", "--rounds", "0"], ("--rounds",)),
        ("em-iterations-0", ["--estimator", "rem", "--em-iterations", "0"], ("--em-iterations",)),
        ("em-iterations-text", ["--estimator", "rem", "--em-iterations", "many"], ("--em-iterations",)),
        ("em-iterations-ips", ["--estimator", "ips", "--em-iterations", "20"],
         ("--em-iterations 20", "--estimator rem and --propensity estimated only")),
    ]],
    *[Case(f"clicks-train-external-memory-{name}", ["clicks", "train", "--data", "{train}", "--log", log, "--valid",
                                                    "{valid}", "--out", "{tmp}/ct", "--quiet", "--external-memory", *argv],
           expect, setup) for name, log, argv, expect, setup in [
        ("lightgbm", "{log}", ["--engine", "lightgbm"], ("--external-memory", "--engine lightgbm"), None),
        ("xgboost-dla", "{log}", ["--engine", "xgboost", "--estimator", "dla"], ("--external-memory", "--estimator dla"), None),
        ("npz-log", "{log}", ["--engine", "xgboost", "--estimator", "naive"], ("--external-memory", "clicks.npz", "Parquet"),
         None),
        ("unsorted-log", "{bad}", ["--engine", "xgboost", "--estimator", "naive"],
         ("--external-memory", "back.parquet", "sort the log's rows by session"),
         put("back.parquet", _parquet_bytes({"session": [1, 1, 0, 0], "query": [0, 0, 0, 0], "doc": [0, 1, 0, 1],
                                             "position": [1, 2, 1, 2], "click": [1, 0, 0, 1]}))),
    ]],
    Case("estimate-harvest-text-ids", EST + ["{bad}", "--method", "harvest"], ("text.parquet", "integer indices"),
         put("text.parquet", _parquet_bytes({"session": [0, 0], "query": ["q", "q"], "doc": ["a", "b"],
                                             "position": [1, 2], "click": [1, 0]}))),
    Case("blend-cv-one-query-valid", ["blend", "--models", "{lin}", "{gb}", "--valid", "{bad}", "--weights", "cv",
                                      "--out", "{tmp}/b"], ("rule cv", "1 query"), put("one.txt", SVM_GOOD)),
]
CASES += NEW_CASES


def check_refusal(case: Case, world: dict, tmp_path: Path, capsys) -> None:
    """The battery's rules for one case: exit 2 with one line naming the place, the inputs and earlier
    outputs unchanged (a folder given as the bad input included), no ``.partial`` left behind."""
    extra = case.setup(tmp_path, world) if case.setup else {}
    values = {**world, **extra, "tmp": str(tmp_path)}
    argv = [a.format(**values) for a in case.argv]
    before = snapshot(world["root"])
    mine = snapshot(values["bad"]) if "bad" in extra and Path(extra["bad"]).is_dir() else None
    protected = {k: hashlib.sha256(Path(values[k]).read_bytes()).hexdigest() for k in case.protect}
    code, err = run_cli(argv, capsys)
    assert_refused(code, err, case.expect)
    assert snapshot(world["root"]) == before, "an input or an earlier output changed"
    if mine is not None:
        assert snapshot(values["bad"]) == mine, "the input folder changed"
    for k, digest in protected.items():
        assert Path(values[k]).is_file(), f"{values[k]} was deleted"
        assert hashlib.sha256(Path(values[k]).read_bytes()).hexdigest() == digest
    leftovers = [p for p in Path(world["root"]).rglob(".*partial*")] + list(tmp_path.rglob(".*partial*"))
    assert not leftovers, leftovers


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_cleanly(case: Case, world, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check_refusal(case, world, tmp_path, capsys)


def test_battery_is_large():
    """The battery covers every command with well over the issue's ~270 hostile inputs' share."""
    commands = {c.argv[0] if c.argv[0] != "clicks" else "clicks " + c.argv[1] for c in CASES}
    assert commands >= {"train", "gbdt", "predict", "eval", "calibrate", "clicks simulate", "clicks estimate",
                        "clicks evaluate", "clicks open-bandit", "synth", "ablate", "compare"}
    assert len(CASES) >= 250
    new = {c.argv[0] for c in NEW_CASES}
    assert new >= {"convert", "export", "tune", "importance", "train", "gbdt", "predict"}


# --------------------------------------------------------------------------------------------------
# Faults the operating system makes (a full disk, a folder that cannot be written), simulated
# --------------------------------------------------------------------------------------------------
def test_full_disk_mid_run_is_one_line_and_leaves_nothing(world, tmp_path, capsys, monkeypatch):
    import errno

    import ltr.base.io_utils

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ltr.base.io_utils.os, "fsync", full)
    before = snapshot(world["root"])
    out = tmp_path / "run"
    code, err = run_cli(["gbdt", "--train", world["train"], "--valid", world["valid"], "--quiet",
                         "--num-boost-round", "2", "--out", str(out)], capsys)
    assert_refused(code, err, ("no space left on the device", "nothing finished was replaced"))
    assert not out.exists() and list(tmp_path.iterdir()) == []  # no run folder, no .partial
    assert snapshot(world["root"]) == before


def test_read_only_destination_is_refused_before_work(world, tmp_path, capsys, monkeypatch):
    import ltr.base.checks

    real = os.access
    monkeypatch.setattr(ltr.base.checks.os, "access", lambda p, mode: False if mode & os.W_OK else real(p, mode))
    code, err = run_cli(["eval", "--qrels", world["qrels"], "--run", world["run"], "--output", str(tmp_path / "r.json")], capsys)
    assert_refused(code, err, ("--output", "not writable"))
    code, err = run_cli(T[:-1] + [str(tmp_path / "run")], capsys)
    assert_refused(code, err, ("--out", "not writable"))


def test_a_refused_rename_is_one_line(world, tmp_path, capsys, monkeypatch):
    import errno

    import ltr.base.io_utils

    def refuse(src, dst):
        raise PermissionError(errno.EACCES, "Permission denied", str(dst))

    monkeypatch.setattr(ltr.base.io_utils.os, "replace", refuse)
    target = tmp_path / "r.json"
    code, err = run_cli(["eval", "--qrels", world["qrels"], "--run", world["run"], "--output", str(target)], capsys)
    assert_refused(code, err, (str(target), "permission denied"))
    assert list(tmp_path.iterdir()) == []  # the temporary file is gone too


# --------------------------------------------------------------------------------------------------
# Leftovers of killed runs
# --------------------------------------------------------------------------------------------------
def _dead_pid() -> int:
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_stale_partial_folders_are_removed_and_reported(world, tmp_path, capsys):
    dead = _dead_pid()
    stale = tmp_path / f".run.partial-{dead}"
    stale.mkdir()
    (stale / "model.pt").write_bytes(b"half")
    alive = tmp_path / f".run.partial-{os.getppid()}"  # a run still going: kept
    alive.mkdir()
    other = tmp_path / f".other.partial-{dead}"  # another destination's: kept
    other.mkdir()
    code, err = run_cli(["gbdt", "--train", world["train"], "--valid", world["valid"], "--quiet",
                         "--num-boost-round", "2", "--out", str(tmp_path / "run")], capsys)
    assert code == 0, err
    assert f"removed {stale}, left by run process {dead}, which is gone" in err
    assert not stale.exists() and alive.is_dir() and other.is_dir() and (tmp_path / "run" / "model.txt").is_file()


def test_stale_old_folder_is_put_back_when_the_destination_is_missing(tmp_path, capsys):
    from ltr.runs.folder import clean_stale_partials

    dead = _dead_pid()
    old = tmp_path / f".run.old-{dead}"
    old.mkdir()
    (old / "model.txt").write_text("previous run")
    clean_stale_partials(tmp_path / "run")
    assert (tmp_path / "run" / "model.txt").read_text() == "previous run" and not old.exists()
    assert "restored" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# Silent wrong results that are now right (exit 0 with the right number) or refused
# --------------------------------------------------------------------------------------------------
def _eval_json(capsys, qrels, run, *extra):
    """{stamped name: mean} of `ltr eval --json` (per-query values too with --per-query)."""
    capsys.readouterr()
    assert main(["eval", "--qrels", str(qrels), "--run", str(run), "--json", *extra]) == 0
    report = json.loads(capsys.readouterr().out)
    return {m["stamped"]: (m["mean"], m.get("per_query")) for m in report["metrics"].values()}


def test_utf8_bom_in_trec_files_does_not_rename_the_first_query(world, tmp_path, capsys):
    plain = _eval_json(capsys, world["qrels"], world["run"], "--per-query")
    for name in ("qrels", "run"):
        bom = tmp_path / f"{name}.txt"
        bom.write_bytes(b"\xef\xbb\xbf" + Path(world[name]).read_bytes())
        args = {"qrels": world["qrels"], "run": world["run"], name: bom}
        assert _eval_json(capsys, args["qrels"], args["run"], "--per-query") == plain


def test_utf8_bom_in_svmlight_column_and_toml_files(world, tmp_path):
    from ltr.data import load_svmlight
    from ltr.data.columns import read_number_column
    from ltr.train.config import read_toml

    bom = b"\xef\xbb\xbf"
    (tmp_path / "t.txt").write_bytes(bom + Path(world["train"]).read_bytes())
    assert load_svmlight(tmp_path / "t.txt", cache=False).equals(load_svmlight(world["train"], cache=False))
    (tmp_path / "s.txt").write_bytes(bom + b"0.5\n0.25\n")
    assert read_number_column(tmp_path / "s.txt").tolist() == [0.5, 0.25]
    (tmp_path / "c.toml").write_bytes(bom + b"[train]\nepochs = 2\n")
    assert read_toml(tmp_path / "c.toml") == {"train": {"epochs": 2}}


def test_negative_qrels_labels_are_judged_non_relevant_with_gain_zero(tmp_path, capsys):
    """One rule (ltr.data.labels): a negative label is worth what a 0 is, and the name says so."""
    run = tmp_path / "run.txt"
    run.write_text("1 Q0 a 1 3 t\n1 Q0 b 2 2 t\n1 Q0 c 3 1 t\n")
    neg, zero = tmp_path / "neg.txt", tmp_path / "zero.txt"
    neg.write_text("1 0 a -2\n1 0 b 1\n1 0 c 2\n")
    zero.write_text("1 0 a 0\n1 0 b 1\n1 0 c 2\n")
    with_neg = _eval_json(capsys, neg, run, "--metrics", "ndcg@3")
    with_zero = _eval_json(capsys, zero, run, "--metrics", "ndcg@3")
    (name_neg, (v_neg, _)), = with_neg.items()
    (name_zero, (v_zero, _)), = with_zero.items()
    assert "zero_gain_below=0" in name_neg and "zero_gain_below" not in name_zero
    d = 1 / np.log2([2, 3, 4])
    assert v_neg == pytest.approx(v_zero) == pytest.approx((0 * d[0] + 1 * d[1] + 3 * d[2]) / (3 * d[0] + 1 * d[1]))


def test_huge_labels_are_refused_not_turned_into_nan(tmp_path):
    from ltr.data import load_svmlight
    from ltr.base.errors import DataFormatError

    for label in ("2000", "1e30", "1024"):
        (tmp_path / "h.txt").write_text(f"1 qid:1 1:1\n{label} qid:1 1:2\n")
        with pytest.raises(DataFormatError, match=r"h.txt:2: label .* too large"):
            load_svmlight(tmp_path / "h.txt", cache=False)
    (tmp_path / "h.txt").write_text("1 qid:1 1:1\n1023 qid:1 1:2\n")
    assert load_svmlight(tmp_path / "h.txt", cache=False).labels.max() == 1023


def test_grad_clip_and_other_config_values_are_checked_in_python_too():
    from ltr.base.errors import LtrError
    from ltr.train.config import TrainConfig

    for bad in ({"grad_clip": -1.0}, {"grad_clip": 0.0}, {"lr": float("nan")}, {"epochs": True}, {"patience": 2.5},
                {"batch_size": 1e9}, {"seed": -1}, {"weight_decay": -0.1}, {"progress": "no"}):
        with pytest.raises(LtrError, match=next(iter(bad))):
            TrainConfig(**bad)
    assert TrainConfig(grad_clip=1, epochs=np.int64(3), lr=np.float32(0.5)).grad_clip == 1.0


@pytest.mark.parametrize("change, field_name", [
    ({"slope": float("nan")}, "slope"), ({"slope": -2.0}, "slope"), ({"intercept": float("inf")}, "intercept"),
    ({"input": "probit"}, "input"), ({"smoothed_targets": "yes"}, "smoothed_targets"), ({"logit_eps": 0.7}, "logit_eps"),
    ({"n_fit": -1}, "n_fit"),
])
def test_calibrator_json_with_impossible_values_is_refused(tmp_path, change, field_name):
    from ltr.calibrate.factory import load_calibrator, make_calibrator
    from ltr.base.errors import LtrError

    rng = np.random.default_rng(0)
    s = rng.normal(size=200)
    y = (rng.random(200) < 1 / (1 + np.exp(-s))).astype(float)
    path = tmp_path / "cal.json"
    make_calibrator("platt", input="score").fit(s, y).save(path)
    good = load_calibrator(path)
    d = json.loads(path.read_text())
    d.update(change)
    path.write_text(json.dumps(d))
    with pytest.raises(LtrError, match=f"cal.json.*{field_name}"):
        load_calibrator(path)
    assert good.predict(np.array([0.0]))[0] == pytest.approx(1 / (1 + np.exp(-good.intercept_)))


@pytest.mark.parametrize("change, what", [
    (lambda d: d["y_thresholds"].__setitem__(0, 1.5), "y_thresholds"),
    (lambda d: d["y_thresholds"].__setitem__(0, float("nan")), "y_thresholds"),
    (lambda d: d["X_thresholds"].reverse(), "non-decreasing"),
    (lambda d: d.pop("tie_margin"), "tie_margin"),
    (lambda d: d.__setitem__("strict", 1), "strict"),
])
def test_isotonic_json_with_impossible_values_is_refused(tmp_path, change, what):
    from ltr.calibrate.factory import load_calibrator, make_calibrator
    from ltr.base.errors import LtrError

    rng = np.random.default_rng(1)
    s = rng.normal(size=300)
    y = (rng.random(300) < 1 / (1 + np.exp(-2 * s))).astype(float)
    path = tmp_path / "iso.json"
    make_calibrator("isotonic-strict").fit(s, y).save(path)
    d = json.loads(path.read_text())
    change(d)
    path.write_text(json.dumps(d))
    with pytest.raises(LtrError, match=what):
        load_calibrator(path)


def test_histogram_of_huge_finite_scores_is_written(tmp_path):
    """`ltr train --lr 1e6` ended in TensorBoard's "The histogram is empty" for scores beyond 1e20."""
    from ltr.runs.tensorboard_log import TensorBoardLogger

    logger = TensorBoardLogger(tmp_path)
    logger.histogram("valid/scores", np.array([1e25, -1e300, 3.0, np.inf]), 1)
    logger.close()
    assert list(tmp_path.glob("events.out.tfevents.*"))


# --------------------------------------------------------------------------------------------------
# The data cache: keyed on the whole content, checked on load, never much larger than its source
# --------------------------------------------------------------------------------------------------
def test_cache_sees_one_byte_changed_in_the_middle_with_size_and_mtime_kept(tmp_path):
    from ltr.data import load_svmlight

    path = tmp_path / "big.txt"
    path.write_text(_svm_lines(400, 10, 5, 7))  # > 128 KiB: the old key sampled only both ends
    first = load_svmlight(path)
    raw = bytearray(path.read_bytes())
    st = os.stat(path)
    middle = raw.index(b"\n", len(raw) // 2) + 1  # the label of a line in the middle
    row = raw[:middle].count(b"\n")
    raw[middle:middle + 1] = b"3" if raw[middle:middle + 1] != b"3" else b"2"
    path.write_bytes(bytes(raw))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns
    second = load_svmlight(path)
    assert "cache" not in second.meta  # parsed again
    assert second.labels[row] == float(raw[middle:middle + 1]) != first.labels[row]


@pytest.mark.parametrize("tamper", ["labels-nan", "offsets", "features-shape", "qids-short", "labels-huge"])
def test_crafted_cache_with_the_right_key_is_rebuilt_not_trusted(tmp_path, tamper):
    from ltr.data import load_svmlight

    path = tmp_path / "d.txt"
    path.write_text(_svm_lines(5, 4, 3, 2))
    truth = load_svmlight(path, cache_dir="beside")
    cache = tmp_path / "d.txt.ltrcache.npz"
    with np.load(cache, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    if tamper == "labels-nan":
        arrays["labels"] = arrays["labels"] * np.nan
    elif tamper == "labels-huge":
        arrays["labels"] = arrays["labels"] + 1e30
    elif tamper == "offsets":
        arrays["query_offsets"] = arrays["query_offsets"][::-1].copy()
    elif tamper == "features-shape":
        arrays["features"] = np.zeros((3, 3), np.float32)
    else:
        arrays["query_ids"] = arrays["query_ids"][:1]
    with open(cache, "wb") as fh:
        np.savez(fh, **arrays)
    again = load_svmlight(path, cache_dir="beside")
    assert "cache" not in again.meta and again.equals(truth)
    assert load_svmlight(path, cache_dir="beside").meta["cache"] == str(cache)  # the rebuilt cache is good again


def test_cache_of_a_sparse_wide_file_stays_small(tmp_path):
    from ltr.data import load_svmlight
    from ltr.data.cache import MAX_CACHE_RATIO

    lines = [f"{i % 3} qid:{i // 5} {1 + (i * 7919) % 59999}:1.5 60000:2" for i in range(200)]
    path = tmp_path / "wide.txt"
    path.write_text("\n".join(lines) + "\n")
    first = load_svmlight(path, cache_dir="beside")
    assert first.features.shape == (200, 60000)  # 48 MB dense from 5 KB: allowed, under the 64 MiB floor
    cache = tmp_path / "wide.txt.ltrcache.npz"
    assert cache.stat().st_size <= MAX_CACHE_RATIO * path.stat().st_size + (1 << 20)
    second = load_svmlight(path, cache_dir="beside")
    assert second.meta["cache"] == str(cache) and second.equals(first)


def test_absurd_width_is_refused_before_allocating(tmp_path):
    import tracemalloc

    from ltr.data import load_svmlight
    from ltr.base.errors import DataFormatError

    path = tmp_path / "one.txt"
    path.write_text("1 qid:1 100000000:1.0\n")
    tracemalloc.start()
    try:
        with pytest.raises(DataFormatError, match=r"one.txt:1: feature index 100000000 would make a dense matrix"):
            load_svmlight(path, cache=False)
        with pytest.raises(DataFormatError, match="n_features=200000000"):
            load_svmlight(path, n_features=200_000_000, cache=False)
        assert tracemalloc.get_traced_memory()[1] < 50 << 20
    finally:
        tracemalloc.stop()


# --------------------------------------------------------------------------------------------------
# Resuming a checkpoint: fingerprints of the data, the loss, the model and the configuration
# --------------------------------------------------------------------------------------------------
@pytest.fixture
def fitted(tmp_path):
    import losses
    from ltr.data import load_svmlight
    from ltr.train.models import MLPScorer
    from ltr.train.trainer import TrainConfig, Trainer

    (tmp_path / "t.txt").write_text(_svm_lines(8, 6, 5, 1))
    (tmp_path / "v.txt").write_text(_svm_lines(3, 6, 5, 2, qid0=100))
    train, valid = load_svmlight(tmp_path / "t.txt", cache=False), load_svmlight(tmp_path / "v.txt", cache=False)
    ck = tmp_path / "ck"

    def fit(train_ds=train, valid_ds=valid, loss=None, activation="relu", **cfg):
        import torch

        torch.manual_seed(0)
        model = MLPScorer(5, hidden=(4,), activation=activation)
        config = TrainConfig(**{"epochs": 1, "progress": False, "checkpoint_dir": str(ck), "resume": True, **cfg})
        return Trainer(model, loss or losses.RankNet(), config).fit(train_ds, valid_ds)

    fit()
    return fit, train, valid, ck


@pytest.mark.parametrize("change, words", [
    ("train", "the training data changed"),
    ("valid", "the validation data changed"),
    ("loss", "the loss changed (checkpoint: losses"),
    ("model", "the model changed"),
    ("config", "the configuration differs in lr"),
])
def test_resume_refuses_a_checkpoint_of_other_inputs_naming_what_changed(fitted, change, words):
    import losses
    from ltr.base.errors import LtrError

    fit, train, valid, ck = fitted
    kwargs = {
        "train": {"train_ds": _relabel(train)},
        "valid": {"valid_ds": _relabel(valid)},
        "loss": {"loss": losses.RankNet(sigma=2.0)},
        "model": {"activation": "tanh"},
        "config": {"lr": 0.5},
    }[change]
    with pytest.raises(LtrError, match="cannot resume") as info:
        fit(epochs=2, **kwargs)
    assert words in str(info.value) and str(ck / "last.pt") in str(info.value)
    assert fit(epochs=2).epochs_run == 2  # the unchanged run resumes


def _relabel(ds):
    from dataclasses import replace

    labels = ds.labels.copy()
    labels[0] = 4 - labels[0]
    return replace(ds, labels=labels)


@pytest.mark.parametrize("damage", ["model-int", "no-rng", "history-int", "old-format", "list"])
def test_damaged_checkpoint_of_the_right_format_is_refused(fitted, damage):
    import torch

    from ltr.base.errors import LtrError

    fit, train, valid, ck = fitted
    state = torch.load(ck / "last.pt", weights_only=True)
    if damage == "model-int":
        state["model"] = 5
    elif damage == "no-rng":
        del state["rng"]
    elif damage == "history-int":
        state["history"] = 3
        state["optimizer"] = {"state": 1}
    elif damage == "old-format":
        state["format"] = "ltr-checkpoint-1"
    else:
        state = [1, 2]
    torch.save(state, ck / "last.pt")
    with pytest.raises(LtrError, match="last.pt"):
        fit(epochs=2)


def test_cli_resume_with_other_validation_data_is_refused(world, tmp_path, capsys):
    base = ["train", "--train", world["train"], "--quiet", "--model", "linear", "--checkpoint-dir", str(tmp_path / "ck")]
    assert run_cli(base + ["--epochs", "1", "--valid", world["valid"], "--out", str(tmp_path / "a")], capsys)[0] == 0
    code, err = run_cli(base + ["--epochs", "2", "--valid", world["test"], "--out", str(tmp_path / "b")], capsys)
    assert_refused(code, err, ("last.pt", "the validation data changed"))
    assert not (tmp_path / "b").exists()


# --------------------------------------------------------------------------------------------------
# The ablation guide's snippet and the worker processes
# --------------------------------------------------------------------------------------------------
def test_ablation_guide_snippet_has_the_main_guard():
    guide = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "ablation.md").read_text()
    blocks = [b for b in guide.split("```python")[1:] if "run_ablation(" in b.split("```")[0]]
    assert blocks, "docs/guide/ablation.md has no Python snippet calling run_ablation"
    for block in blocks:
        code = block.split("```")[0]
        assert 'if __name__ == "__main__":' in code
        compile(code, "ablation.md", "exec")  # it parses as a script


def test_run_ablation_in_a_starting_worker_says_what_to_do(monkeypatch, tmp_path):
    import multiprocessing

    from ltr.base.errors import LtrError
    from ltr.study import ablation

    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    with pytest.raises(LtrError, match='if __name__ == "__main__"'):
        ablation.run_ablation(ablation.quick_config(), tmp_path / "abl", workers=2, progress=False)
    assert not (tmp_path / "abl").exists()
