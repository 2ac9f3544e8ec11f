"""The command line as a new user meets it: help text, data-format options, clear errors, thread settings."""

from __future__ import annotations

import argparse
import gc
import json
import os

import numpy as np
import pytest

from ltr.cli import HelpFormatter, build_parser, main
from ltr.data import RankingDataset, save_svmlight


def _parsers(parser, path=("ltr",)):
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _parsers(child, path + (name,))


def test_help_states_each_default_once_and_none_for_required_options():
    for name, parser in _parsers(build_parser()):
        assert parser.formatter_class is HelpFormatter, name
        text = parser.format_help()
        assert "(default: None)" not in text, name
        for action in parser._actions:
            shown = HelpFormatter("x")._get_help_string(action).replace("%(default)s", str(action.default))
            assert shown.count("(default") <= 1, (name, action.dest, shown)
            if action.required:
                assert "%(default)" not in shown, (name, action.dest)
    train_help = " ".join(dict(_parsers(build_parser()))["ltr train"].format_help().split())
    assert "(default softmax: the defaults study of docs/experiments.md)" in train_help and "softmax) (default" not in train_help


def test_top_level_help_lists_each_command_by_the_summary_its_module_registers():
    from ltr.cli import COMMANDS, SUMMARIES, _command_in

    full = build_parser()
    sub = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    assert {c.dest: c.help for c in sub._choices_actions} == SUMMARIES and list(SUMMARIES) == list(COMMANDS)
    # `ltr --help` builds no command's parser, and prints the same text
    assert build_parser(()).format_help() == full.format_help()
    assert _command_in(["--help"]) == () and _command_in(["eval", "--run", "x"]) == ("eval",)
    assert _command_in(["-h", "bogus"]) == ()


def test_a_named_command_is_the_only_parser_built(capsys):
    named = build_parser(("eval",))
    sub = next(a for a in named._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == ["eval"]
    # its own help and errors are the full parser's
    full = dict(_parsers(build_parser()))["ltr eval"]
    assert dict(_parsers(named))["ltr eval"].format_help() == full.format_help()
    assert main(["eval", "--qrels", "q.txt", "--run", "r.txt", "--bogus"]) == 2
    assert "ltr eval: error: unrecognized arguments: --bogus" in capsys.readouterr().err


def test_one_blas_thread_inside_the_block_and_the_limit_restored_after():
    from threadpoolctl import threadpool_info, threadpool_limits

    from ltr.base.threads import one_blas_thread

    def blas_threads():
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    np.ones((4, 4)) @ np.ones((4, 4))  # numpy's BLAS is loaded
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        assert before and (set(before) == {2} or os.cpu_count() == 1)
        with one_blas_thread():
            assert blas_threads() == [1] * len(before)
        assert blas_threads() == before
        with pytest.raises(ZeroDivisionError), one_blas_thread():  # restored when the block raises too
            1 / 0
        assert blas_threads() == before


def test_the_loss_count_agrees_in_readme_help_and_registry():
    """README's count of losses, `ltr train --help`'s list and losses.loss_names() are one set."""
    import re
    from pathlib import Path

    from losses.registry import LOSSES, loss_names
    from ltr.train.config import LOSS_NAMES

    assert LOSS_NAMES == tuple(LOSSES) and sorted(LOSS_NAMES) == loss_names()
    words = ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
             "nineteen", "twenty"]
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    counted = re.findall(r"\b(\w+) ranking losses", readme)
    assert counted and all(words.index(w) + 10 == len(loss_names()) for w in counted), counted
    train_help = " ".join(dict(_parsers(build_parser()))["ltr train"].format_help().split())
    listed = re.search(r"loss name for losses.get_loss: ([a-z0-9_, ]+);", train_help).group(1).split(", ")
    assert listed == list(LOSS_NAMES)


def test_every_command_reading_data_files_takes_zero_based_and_query_file():
    reading = []
    for name, parser in _parsers(build_parser()):
        opts = {o: a for a in parser._actions for o in a.option_strings}
        if any(o in opts and opts[o].metavar == "FILE" for o in ("--data", "--train")):
            reading.append(name)
            assert "--zero-based" in opts and "--query-file" in opts, name
    assert {"ltr train", "ltr gbdt", "ltr predict", "ltr importance", "ltr clicks simulate", "ltr clicks evaluate"} <= set(reading)


def _zero_based_files(tmp_path):
    """A 0-based file without qid (groups in a separate file), and the same data 1-based with qid."""
    rng = np.random.default_rng(0)
    lengths = np.array([4, 6, 5, 3, 7, 5])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    x = np.round(rng.normal(size=(offsets[-1], 3)), 3).astype(np.float32)
    y = rng.integers(0, 3, offsets[-1]).astype(float)
    lines = [f"{int(v)} " + " ".join(f"{j}:{x[i, j]:.3f}" for j in range(3)) for i, v in enumerate(y)]
    (tmp_path / "zero.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "zero.grp").write_text("\n".join(map(str, lengths)) + "\n")
    save_svmlight(RankingDataset(x, y, offsets, np.arange(6)), tmp_path / "one.txt")
    return tmp_path / "zero.txt", tmp_path / "zero.grp"


def test_zero_based_and_query_file_reach_the_reader(tmp_path, capsys):
    data, groups = _zero_based_files(tmp_path)
    common = ["--train", str(data), "--valid", str(data), "--epochs", "1", "--quiet", "--model", "linear"]
    # without the options the messages name the options a CLI user can pass
    assert main(["train", *common, "--out", str(tmp_path / "a")]) == 2
    assert "pass --zero-based" in capsys.readouterr().err
    assert main(["train", *common, "--zero-based", "--out", str(tmp_path / "a")]) == 2
    assert "--query-file FILE" in capsys.readouterr().err
    assert main(["train", *common, "--query-file", "valid.grp", "--zero-based", "--out", str(tmp_path / "a")]) == 2
    assert "expected one of train=FILE, valid=FILE, test=FILE" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
    assert main(["train", *common, "--zero-based", "--query-file", f"train={groups}", "--query-file", f"valid={groups}",
                 "--out", str(tmp_path / "a")]) == 0
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["data"]["train"]["n_queries"] == 6 and summary["data"]["train"]["n_features"] == 3
    # predict reads the 0-based file as the 1-based one with qid: the same scores
    assert main(["predict", "--model", str(tmp_path / "a"), "--data", str(data), "--zero-based", "--query-file", str(groups),
                 "--out", str(tmp_path / "zero.run")]) == 0
    assert main(["predict", "--model", str(tmp_path / "a"), "--data", str(tmp_path / "one.txt"), "--out", str(tmp_path / "one.run")]) == 0
    zero = [line.split()[4] for line in (tmp_path / "zero.run").read_text().splitlines()]
    one = [line.split()[4] for line in (tmp_path / "one.run").read_text().splitlines()]
    assert zero == one


def test_clicks_estimate_on_a_file_that_is_not_a_log(tmp_path, capsys):
    text_file = tmp_path / "train.txt"
    text_file.write_text("1 qid:1 1:0.5\n")
    assert main(["clicks", "estimate", "--log", str(text_file)]) == 2
    err = capsys.readouterr().err
    assert f"--log {text_file}: not a click log" in err and "ltr clicks simulate" in err and "pickle" not in err


def test_calibration_report_says_what_before_means(tmp_path, capsys):
    rng = np.random.default_rng(0)
    s = rng.normal(size=400) * 2
    y = (rng.random(400) < 1 / (1 + np.exp(-s))).astype(int)
    (tmp_path / "s.txt").write_text("\n".join(map(str, s)) + "\n")
    (tmp_path / "y.txt").write_text("\n".join(map(str, y)) + "\n")
    assert main(["calibrate", "--scores", str(tmp_path / "s.txt"), "--labels", str(tmp_path / "y.txt"),
                 "--method", "platt", "--out", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert "before = sigmoid(scores)" in out
    assert json.loads((tmp_path / "c" / "report.json").read_text())["before_is"].startswith("sigmoid(scores)")


def test_thread_knob_is_checked_and_passive_waiting_is_the_default(monkeypatch, capsys):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setenv("LTR_THREADS", "two")
    assert main(["eval", "--help"]) == 2
    assert "LTR_THREADS='two'" in capsys.readouterr().err
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("LTR_THREADS", "1")
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE" and os.environ["OMP_NUM_THREADS"] == "1"


def test_the_command_spaces_the_collectors_full_passes_and_keeps_collection_off(capsys):
    """``ltr`` raises the full pass's threshold from CPython's 10 to 100 (ltr.base.collector), keeps the
    young and middle thresholds, and leaves automatic collection off when it was off."""
    before = gc.get_threshold()
    try:
        for set_before, expected in [((700, 10, 10), (700, 10, 100)), ((0, 10, 10), (0, 10, 10))]:
            gc.set_threshold(*set_before)
            with pytest.raises(SystemExit):
                main(["eval", "--help"])
            assert gc.get_threshold() == expected
    finally:
        gc.set_threshold(*before)


def test_ablation_data_sets_take_zero_based_and_query_file(tmp_path):
    from ltr.data import load_svmlight
    from ltr.study.ablation import DatasetSpec, load_splits

    data, groups = _zero_based_files(tmp_path)
    # the same rows 0-based with qid, for the validation and test files (query_file is the training file's)
    sizes = [int(n) for n in groups.read_text().split()]
    qids = [q for q, n in enumerate(sizes) for _ in range(n)]
    lines = data.read_text().splitlines()
    (tmp_path / "zeroq.txt").write_text("".join(f"{ln.split(' ', 1)[0]} qid:{q} {ln.split(' ', 1)[1]}\n" for q, ln in zip(qids, lines)))
    spec = DatasetSpec("zero", "svmlight", {"train": str(data), "valid": str(tmp_path / "zeroq.txt"), "test": str(tmp_path / "zeroq.txt"),
                                            "query_file": str(groups), "zero_based": True})
    train, valid, test = load_splits(spec, None)
    one = load_svmlight(tmp_path / "one.txt", cache=False)
    for ds in (train, valid, test):
        assert ds.features.tolist() == one.features.tolist() and ds.query_offsets.tolist() == one.query_offsets.tolist()


def test_a_closed_pipe_stops_quietly_and_keeps_the_run_folder(tmp_path, monkeypatch, capsys):
    """`ltr clicks simulate ... | head -1`: the reader goes away while the report prints. The command
    exits 141 (as a Unix tool killed by SIGPIPE) without an error message, and the log it simulated is
    in place, because the report is printed after the folder is written."""
    import io
    import sys

    rng = np.random.default_rng(0)
    offsets = np.arange(0, 60, 6)
    ds = RankingDataset(rng.normal(size=(54, 3)).astype(np.float32), rng.integers(0, 3, 54).astype(float), offsets,
                        np.arange(9))
    save_svmlight(ds, tmp_path / "data.txt")

    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    rc = main(["clicks", "simulate", "--data", str(tmp_path / "data.txt"), "--out", str(tmp_path / "sim"),
               "--sessions-per-query", "3", "--quiet"])
    monkeypatch.undo()
    assert rc == 141
    assert (tmp_path / "sim" / "clicks.npz").is_file() and (tmp_path / "sim" / "summary.json").is_file()
    assert capsys.readouterr().err == ""
