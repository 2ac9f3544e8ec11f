"""experiments/defaults_study.py's option plumbing: ``--train-options`` goes before each ``ltr train``
candidate's own options (argparse keeps the last value, so the candidate's win), never into ``ltr gbdt``'s."""

from __future__ import annotations

from pathlib import Path

from experiment_scripts import load_experiment


def test_train_options_precede_the_candidates_own(monkeypatch, tmp_path):
    study = load_experiment("defaults_study")
    files = (Path("train.txt"), Path("valid.txt"), Path("test.txt"))
    monkeypatch.setattr(study, "prepare", lambda data_dir, large, only: {"toy": [files]})
    calls = []

    def fake_run(command, options, run_files, seed, out):
        calls.append((command, list(options)))
        return {"test": 0.5, "valid": 0.5, "wall_s": 1.0}

    monkeypatch.setattr(study, "run_one", fake_run)
    assert study.main(["--out", str(tmp_path), "--seeds", "1", "--train-options", "--query-norm none --epochs 3",
                       "--only-candidates", "gbdt_default,default,query_zscore"]) == 0
    assert calls == [("gbdt", []), ("train", ["--query-norm", "none", "--epochs", "3"]),
                     ("train", ["--query-norm", "none", "--epochs", "3", "--query-norm", "zscore"])]
    # what ltr train makes of the last: the candidate's zscore
    from ltr.commands.train import register
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["train", "--train", "a", "--valid", "b", *calls[2][1]])
    assert args.query_norm == "zscore"
