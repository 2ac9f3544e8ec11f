"""``ltr clicks``: simulate -> estimate -> evaluate on a small file, Open Bandit summary, user errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import shared_path

from ltr.cli import main
from ltr.clicks.logs.click_log import ClickLog
from ltr.data import RankingDataset, save_svmlight


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    lengths = rng.integers(10, 16, 80)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    x = rng.normal(size=(offsets[-1], 3)).astype(np.float32)
    labels = rng.integers(0, 3, offsets[-1]).astype(np.float64)
    path = tmp_path_factory.mktemp("clicks") / "data.txt"
    save_svmlight(RankingDataset(x, labels, offsets, np.arange(80)), path)
    return path, labels, offsets


def test_simulate_estimate_evaluate(data_file, tmp_path, capsys):
    path, labels, offsets = data_file
    out = tmp_path / "run"
    rc = main(["clicks", "simulate", "--data", str(path), "--out", str(out), "--eta", "1.0", "--top-k", "10",
               "--sessions-per-query", "40", "--randomize-fraction", "0.5", "--seed", "3", "--quiet"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "propensity from randomized traffic" in text
    log = ClickLog.load(out / "clicks.npz")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_clicks"] == log.n_clicks and log.n_sessions == 80 * 40
    assert log.meta["eta"] == 1.0 and log.meta["top_k"] == 10
    ctr = summary["ctr_by_position"]
    clicks, shown = log.ctr_by_position(10)
    assert [row["clicks"] for row in ctr] == clicks.astype(int).tolist()

    est_json = tmp_path / "est.json"
    assert main(["clicks", "estimate", "--log", str(out / "clicks.npz"), "--positions", "5", "--json", str(est_json)]) == 0
    est = json.loads(est_json.read_text())
    truths = [row["truth"] for row in est["rows"]]
    np.testing.assert_allclose(truths, 1.0 / np.arange(1, 6))
    z = [(row["theta"] - row["truth"]) / row["se"] for row in est["rows"][1:]]
    assert max(abs(v) for v in z) < 4

    # A perfect ranker (scores = labels): IPS agrees with the truth far better than the naive estimate.
    scores = tmp_path / "scores.txt"
    scores.write_text("\n".join(str(v) for v in labels) + "\n")
    ev_json = tmp_path / "ev.json"
    assert main(["clicks", "evaluate", "--log", str(out / "clicks.npz"), "--data", str(path), "--scores", str(scores),
                 "--k", "5", "--json", str(ev_json)]) == 0
    ev = json.loads(ev_json.read_text())
    assert abs(ev["ips"] - ev["true_click_dcg"]) < 0.25 * abs(ev["naive"] - ev["true_click_dcg"])


def test_user_errors_exit_2(data_file, tmp_path, capsys):
    path, _, _ = data_file
    bad = tmp_path / "bad.txt"
    bad.write_text("1.0\nabc\n")
    rc = main(["clicks", "simulate", "--data", str(path), "--out", str(tmp_path / "o"), "--logger-scores", str(bad)])
    assert rc == 2
    assert "bad.txt:2: score 'abc' is not a number" in capsys.readouterr().err
    rc = main(["clicks", "estimate", "--log", str(tmp_path / "missing.npz")])
    assert rc == 2 and "missing.npz: file not found" in capsys.readouterr().err
    rc = main(["clicks", "simulate", "--data", str(path), "--out", str(tmp_path / "o2"), "--swap-fraction", "0.8",
               "--randomize-fraction", "0.5", "--quiet"])
    assert rc == 2 and "must not exceed 1" in capsys.readouterr().err


def test_every_option_is_documented():
    import argparse

    from ltr.cli import build_parser

    def subparsers(parser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action.choices
        return {}

    clicks = subparsers(build_parser())["clicks"]
    actions = subparsers(clicks)
    assert set(actions) == {"simulate", "estimate", "evaluate", "open-bandit", "train", "interleave"}
    for name, parser in actions.items():
        assert parser.description, name
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                assert action.help and len(action.help) > 10, (name, action.option_strings)


def test_open_bandit_command(tmp_path, capsys):
    root = shared_path("open-bandit-dataset-small")
    out = tmp_path / "obd.json"
    assert main(["clicks", "open-bandit", "--data", str(root), "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["random"]["clicks"] == 38 and res["bts"]["clicks"] == 42  # SOURCE.md
    assert [r["impressions"] for r in res["random"]["ctr_by_position"]] == [3322, 3412, 3266]
    assert res["random_policy_on_policy"]["ips"] == pytest.approx(0.0038)
    assert "off-policy CTR" in capsys.readouterr().out


def test_simulate_parquet_then_train_records_estimator_and_propensities(data_file, tmp_path, capsys):
    from ltr.clicks.logs.table import read_log_parquet
    from ltr.train.models import load_model

    path, labels, offsets = data_file
    sim = tmp_path / "sim"
    assert main(["clicks", "simulate", "--data", str(path), "--out", str(sim), "--model", "trust", "--top-k", "8",
                 "--sessions-per-query", "20", "--format", "parquet", "--seed", "1", "--quiet"]) == 0
    log = read_log_parquet(sim / "clicks.parquet")
    assert log.meta["model"] == "trust" and log.n_sessions == 80 * 20
    np.testing.assert_allclose(log.meta["eps_minus"], 0.65 / np.arange(1, 9))
    capsys.readouterr()
    for est in ("ips", "affine", "dla"):
        out = tmp_path / f"m_{est}"
        rc = main(["clicks", "train", "--data", str(path), "--log", str(sim / "clicks.parquet"), "--valid", str(path),
                   "--out", str(out), "--estimator", est, "--epochs", "2", "--model", "linear", "--clip", "0.05"])
        assert rc == 0, capsys.readouterr().err
        info = json.loads((out / "clicks_training.json").read_text())
        assert info["estimator"] == est and info["clip"] == 0.05 and info["click_model"] == "trust"
        assert load_model(out).n_features == 3
        # under trust bias the click propensity is not the examination: no truth is printed beside it
        assert "true_propensity" not in info and "the simulator's examination" not in capsys.readouterr().out
    info = json.loads((tmp_path / "m_ips" / "clicks_training.json").read_text())
    np.testing.assert_allclose(info["propensity"], 1.0 / np.arange(1, 9))
    assert "at most 20" in info["clip_rule"]
    aff = json.loads((tmp_path / "m_affine" / "clicks_training.json").read_text())
    # alpha_r = theta_r (1 - 0.65 / r), beta_r = theta_r 0.65 / r with theta_r = 1 / r
    np.testing.assert_allclose(aff["alpha"][:2], [0.35, 0.5 * (1 - 0.325)])
    np.testing.assert_allclose(aff["beta"][:2], [0.65, 0.5 * 0.325])
    dla = json.loads((tmp_path / "m_dla" / "clicks_training.json").read_text())
    assert len(dla["propensity"]) == 8 and dla["propensity"][0] == 1.0
    # The model folder scores a file like any other ranker.
    assert main(["clicks", "evaluate", "--log", str(sim / "clicks.parquet"), "--data", str(path),
                 "--ranker", str(tmp_path / "m_ips")]) == 0


def test_dla_propensity_update_reaches_fit_dla_and_is_recorded(data_file, tmp_path, capsys):
    """--dla-propensity-update reaches fit_dla from a streamed Parquet log, and the model
    folder records it; the updates learn different propensities from the same log and seed (refit: the ranker
    of sgd, the propensities of one full-log step at it)."""
    path, _, _ = data_file
    sim = tmp_path / "sim"
    assert main(["clicks", "simulate", "--data", str(path), "--out", str(sim), "--top-k", "8", "--sessions-per-query", "20",
                 "--format", "parquet", "--seed", "1", "--quiet"]) == 0
    capsys.readouterr()
    infos = {}
    for update in ("sgd", "full", "refit"):
        out = tmp_path / f"m_{update}"
        assert main(["clicks", "train", "--data", str(path), "--log", str(sim / "clicks.parquet"), "--valid", str(path),
                     "--out", str(out), "--estimator", "dla", "--epochs", "2", "--model", "linear",
                     "--dla-propensity-update", update]) == 0, capsys.readouterr().err
        infos[update] = json.loads((out / "clicks_training.json").read_text())
        assert infos[update]["propensity_update"] == update and infos[update]["log_read"] == "streamed per shown list"
        assert infos[update]["relevance_reference"] == "first"
        assert infos[update].get("refit_reference") == ("geomean" if update == "refit" else None)
        # a PBM log: the truth θ_r = 1/r is recorded and printed beside the learned curve, with the worst error
        truth = 1.0 / np.arange(1, 9)
        np.testing.assert_allclose(infos[update]["true_propensity"], truth)
        err = np.abs(np.array(infos[update]["propensity"]) - truth) / truth
        printed = capsys.readouterr().out
        assert f"largest relative error {err.max():.1%}, at position {int(err.argmax()) + 1}" in printed
    assert infos["full"]["propensity"][0] == 1.0
    assert not np.allclose(infos["full"]["propensity"], infos["sgd"]["propensity"], rtol=1e-3)
    assert not np.allclose(infos["refit"]["propensity"], infos["sgd"]["propensity"], rtol=1e-3)
    import torch

    from ltr.train.models import load_model

    sgd, refit = (load_model(tmp_path / f"m_{u}") for u in ("sgd", "refit"))
    assert all(torch.equal(a, b) for a, b in zip(sgd.parameters(), refit.parameters()))


def test_dla_relevance_reference_reaches_fit_dla_from_either_log_and_is_recorded(data_file, tmp_path, capsys):
    """--dla-relevance-reference reaches fit_dla from an in-memory .npz log and from a streamed Parquet log of the
    same sessions (the same propensities from both), is recorded, and changes the propensities that the
    training loss learns (sgd)."""
    path, _, _ = data_file
    logs = {}
    for fmt in ("npz", "parquet"):
        sim = tmp_path / f"sim_{fmt}"
        assert main(["clicks", "simulate", "--data", str(path), "--out", str(sim), "--top-k", "8",
                     "--sessions-per-query", "20", "--format", fmt, "--seed", "1", "--quiet"]) == 0
        logs[fmt] = sim / f"clicks.{fmt}"
    infos = {}
    for fmt, reference in (("npz", "first"), ("npz", "geomean"), ("parquet", "geomean")):
        out = tmp_path / f"m_{fmt}_{reference}"
        assert main(["clicks", "train", "--data", str(path), "--log", str(logs[fmt]), "--valid", str(path),
                     "--out", str(out), "--estimator", "dla", "--epochs", "2", "--model", "linear", "--quiet",
                     "--dla-relevance-reference", reference]) == 0, capsys.readouterr().err
        infos[fmt, reference] = json.loads((out / "clicks_training.json").read_text())
        assert infos[fmt, reference]["relevance_reference"] == reference
    assert not np.allclose(infos["npz", "first"]["propensity"], infos["npz", "geomean"]["propensity"], rtol=1e-3)
    np.testing.assert_allclose(infos["parquet", "geomean"]["propensity"], infos["npz", "geomean"]["propensity"], rtol=1e-5)


def test_train_user_errors(data_file, tmp_path, capsys):
    path, _, _ = data_file
    sim = tmp_path / "sim"
    assert main(["clicks", "simulate", "--data", str(path), "--out", str(sim), "--sessions-per-query", "3", "--quiet"]) == 0
    base = ["clicks", "train", "--data", str(path), "--log", str(sim / "clicks.npz"), "--valid", str(path), "--epochs", "1"]
    capsys.readouterr()
    assert main(base + ["--out", str(tmp_path / "a"), "--estimator", "affine"]) == 2
    assert "trust-bias log" in capsys.readouterr().err
    assert main(base + ["--out", str(tmp_path / "b"), "--estimator", "dla", "--propensity", "swap"]) == 2
    assert "applies to --estimator ips, policy-aware and doubly-robust only" in capsys.readouterr().err
    assert main(base + ["--out", str(tmp_path / "c"), "--hidden", "6,x"]) == 2
    assert "--hidden" in capsys.readouterr().err


def test_estimate_em_without_interventions(data_file, tmp_path, capsys):
    path, _, _ = data_file
    sim = tmp_path / "sim"
    assert main(["clicks", "simulate", "--data", str(path), "--out", str(sim), "--sessions-per-query", "20",
                 "--top-k", "5", "--quiet"]) == 0
    out = tmp_path / "em.json"
    assert main(["clicks", "estimate", "--log", str(sim / "clicks.npz"), "--method", "em", "--data", str(path),
                 "--resamples", "5", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["method"] == "em" and [r["position"] for r in res["rows"]] == [1, 2, 3, 4, 5]
    np.testing.assert_allclose([r["truth"] for r in res["rows"]], 1.0 / np.arange(1, 6))
    assert res["rows"][0]["theta"] == 1.0
    assert all(0.0 <= r["low"] <= r["high"] <= 1.0 for r in res["rows"])
    capsys.readouterr()
    assert main(["clicks", "estimate", "--log", str(sim / "clicks.npz"), "--method", "em"]) == 2
    assert "needs --data" in capsys.readouterr().err


def test_interleave_prefers_the_labels_over_noise(data_file, tmp_path):
    path, labels, _ = data_file
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("\n".join(str(v) for v in labels) + "\n")
    noise = np.random.default_rng(0).normal(size=len(labels))
    bad.write_text("\n".join(str(v) for v in noise) + "\n")
    out = tmp_path / "il.json"
    assert main(["clicks", "interleave", "--data", str(path), "--a", str(good), "--b", str(bad), "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["sessions"] == 80 * 20 and res["wins_a"] + res["wins_b"] + res["ties"] == res["sessions"]
    assert res["ndcg@10_a"] == 1.0 and res["ndcg@10_b"] < 0.8
    assert res["wins_a"] > 2 * res["wins_b"] and res["p_value"] < 1e-6 and res["sessions_to_detect"] < 1600


def test_interleave_probabilistic(data_file, tmp_path):
    path, labels, _ = data_file
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("\n".join(str(v) for v in labels) + "\n")
    bad.write_text("\n".join(str(v) for v in np.random.default_rng(0).normal(size=len(labels))) + "\n")
    out = tmp_path / "pi.json"
    assert main(["clicks", "interleave", "--method", "probabilistic", "--data", str(path), "--a", str(good), "--b", str(bad),
                 "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["method"] == "probabilistic" and res["tau"] == 3.0 and res["sessions"] == 80 * 20
    assert res["mean_outcome"] > 0.1 and res["preference_a"] == 0.5 * (1 + res["mean_outcome"])
    assert res["p_value"] < 1e-6 and res["sessions_to_detect"] < 1600
    # swapping A and B mirrors the outcome's sign
    assert main(["clicks", "interleave", "--method", "probabilistic", "--data", str(path), "--a", str(bad), "--b", str(good),
                 "--json", str(tmp_path / "pi-swapped.json")]) == 0  # an existing file is replaced only with --force
    assert json.loads((tmp_path / "pi-swapped.json").read_text())["mean_outcome"] < -0.1


@pytest.mark.parametrize("estimator", ["ips", "dla", "pairwise-debias"])
def test_clicks_train_initial_weights_follow_the_seed(data_file, tmp_path, capsys, estimator):
    """Two ``ltr clicks train`` runs in one process with one seed write the same model; another seed differs.
    Before the scorer was built under the seed, the second run started from wherever torch's global
    generator had been left by the first run, so even the same seed gave other weights."""
    import torch

    from ltr.train.models import load_model

    path = data_file[0]
    sim = tmp_path / "sim"
    assert main(["clicks", "simulate", "--data", str(path), "--out", str(sim), "--top-k", "8",
                 "--sessions-per-query", "10", "--format", "parquet", "--seed", "2", "--quiet"]) == 0
    params = []
    for run, seed in enumerate((5, 5, 6)):
        out = tmp_path / f"m{run}"
        assert main(["clicks", "train", "--data", str(path), "--log", str(sim / "clicks.parquet"), "--valid", str(path),
                     "--out", str(out), "--estimator", estimator, "--epochs", "2", "--hidden", "8",
                     "--seed", str(seed)]) == 0, capsys.readouterr().err
        params.append([p.detach().clone() for p in load_model(out).parameters()])
    assert len(params[0]) > 0
    assert all(torch.equal(a, b) for a, b in zip(params[0], params[1]))  # same seed: the same weights, bit for bit
    assert not all(torch.equal(a, c) for a, c in zip(params[0], params[2]))  # another seed: other weights


def test_train_rem_with_gbdt_relevance(data_file, tmp_path, capsys):
    # --em-relevance and --em-iterations reach regression EM: the recorded propensities are those of EM run
    # directly with that relevance model (seed 0, 20 iterations), from the in-memory log and from the streamed
    # Parquet one. (20, not the default 200: a GBDT fit per iteration is most of this test's time.)
    from ltr.clicks.estimators.training import estimate_rem_curve
    from ltr.data import load_svmlight

    path, _, _ = data_file
    sim = tmp_path / "sim"
    assert main(["clicks", "simulate", "--data", str(path), "--out", str(sim), "--top-k", "6",
                 "--sessions-per-query", "30", "--seed", "2", "--quiet"]) == 0
    assert main(["clicks", "simulate", "--data", str(path), "--out", str(tmp_path / "simp"), "--top-k", "6",
                 "--sessions-per-query", "30", "--seed", "2", "--format", "parquet", "--quiet"]) == 0
    train = load_svmlight(path)
    expected = {rel: estimate_rem_curve(train, ClickLog.load(sim / "clicks.npz"), relevance=rel, seed=0, iterations=20)
                for rel in ("logistic", "gbdt")}
    assert np.abs(expected["gbdt"] - expected["logistic"]).max() > 1e-3  # the two models give different curves
    base = ["clicks", "train", "--data", str(path), "--valid", str(path), "--epochs", "1", "--model", "linear",
            "--em-iterations", "20", "--estimator", "rem"]
    for rel, log_path in (("gbdt", sim / "clicks.npz"), ("gbdt", tmp_path / "simp" / "clicks.parquet"),
                          ("logistic", sim / "clicks.npz")):
        out = tmp_path / f"m_{rel}_{log_path.suffix[1:]}"
        extra = [] if rel == "logistic" else ["--em-relevance", rel]
        assert main(base + ["--log", str(log_path), "--out", str(out)] + extra) == 0, capsys.readouterr().err
        info = json.loads((out / "clicks_training.json").read_text())
        assert info["propensity_source"] == f"regression EM ({rel})"
        np.testing.assert_allclose(info["propensity"], expected[rel], rtol=1e-6)
    capsys.readouterr()
    assert main(base[:-1] + ["ips", "--log", str(sim / "clicks.npz"), "--out", str(tmp_path / "x"),
                             "--em-relevance", "gbdt"]) == 2
    assert "applies to --estimator rem and --propensity estimated only" in capsys.readouterr().err
    assert main(base[:-1] + ["ips", "--log", str(sim / "clicks.npz"), "--out", str(tmp_path / "x")]) == 2
    assert "--em-iterations 20 applies to --estimator rem and --propensity estimated only" in capsys.readouterr().err


def test_progress_bars_say_what_runs_and_quiet_silences_them(data_file, tmp_path, capsys):
    """Reading the log, the training epochs (with the validation value) and EM's fits show on stderr;
    --quiet leaves stderr empty, and the bars change nothing in the results."""
    path, _, _ = data_file
    sim = tmp_path / "sim"
    assert main(["clicks", "simulate", "--data", str(path), "--out", str(sim), "--sessions-per-query", "10",
                 "--format", "parquet", "--quiet"]) == 0
    log = str(sim / "clicks.parquet")
    capsys.readouterr()
    propensities = []
    for quiet in ([], ["--quiet"]):
        out = tmp_path / f"dla{len(quiet)}"
        assert main(["clicks", "train", "--data", str(path), "--log", log, "--valid", str(path), "--out", str(out),
                     "--estimator", "dla", "--epochs", "3", "--model", "linear", *quiet]) == 0
        err = capsys.readouterr().err
        if quiet:
            assert err == ""
        else:
            assert "reading the click log" in err and "DLA epochs" in err and "valid NDCG@10" in err
        propensities.append(json.loads((out / "clicks_training.json").read_text())["propensity"])
    assert propensities[0] == propensities[1]
    assert main(["clicks", "estimate", "--log", log, "--method", "em", "--data", str(path), "--resamples", "2"]) == 0
    err = capsys.readouterr().err
    assert "regression EM (logistic)" in err and "bootstrap resamples (EM fits)" in err
    assert main(["clicks", "estimate", "--log", log, "--method", "em", "--data", str(path), "--resamples", "2",
                 "--quiet"]) == 0
    assert capsys.readouterr().err == ""
