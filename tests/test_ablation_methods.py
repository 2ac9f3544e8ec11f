"""ltr ablate with every loss and scorer by name, variants (settings, seed ensembles, tuning grids),
the cells that stopped while still improving, and time to quality."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ltr.base.errors import LtrError
from ltr.study import ablation
from ltr.study.ablation import AblationConfig, Cell, DatasetSpec
from ltr.study.methods import resolve_method, split_method, tuning_candidates
from ltr.study.report import cells_at_cap, render_markdown, summarize, time_to_quality

_EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"

TINY = dict(n_queries=60, n_features=12, mean_list_length=12, seed=3)


def tiny_config(**kw) -> AblationConfig:
    base = dict(datasets=[DatasetSpec("tiny", "synthetic", dict(TINY))], methods=["ranknet"], seeds=[0],
                n_resamples=200, train={"epochs": 2, "batch_size": 16, "patience": 2},
                model={"type": "mlp", "hidden": [8], "normalize": "standard"},
                models={"attention": {"width": 8, "heads": 2, "layers": 1, "dropout": 0.0}},
                lightgbm={"num_leaves": 7, "min_data_in_leaf": 5}, gbdt={"num_boost_round": 8, "early_stopping_rounds": 4})
    base.update(kw)
    return AblationConfig(**base)


def test_every_loss_and_scorer_is_a_method_name():
    import losses

    for name in losses.loss_names():
        assert ablation.parse_method(name) == (name, None)
        assert ablation.parse_method(f"attention/{name}@5") == (f"attention/{name}", 5)
    assert split_method("linear/hinge") == ("linear", "hinge", None)
    for bad, message in (("transformer/softmax", "unknown method"), ("attention/lightgbm", "lightgbm takes no"),
                         ("softmax@0", "unknown method|@K"), ("lightgbm@10", "lightgbm takes no")):
        with pytest.raises(LtrError, match=message):
            split_method(bad)


def test_methods_resolve_to_their_scorer_loss_and_settings():
    cfg = tiny_config(methods=["ranknet", "attention/softmax", "tuned"], loss_options={"attention/softmax": {}},
                      variants={"tuned": {"method": "mlp/lambdarank@5", "model": {"input_noise": 0.1},
                                          "train": {"lr": 0.01}, "loss": {"sigma": 2.0}, "ensemble": 3,
                                          "tune": {"train.lr": [0.1, 0.01], "model.hidden": [[4], [8], [16]]}}})
    attn = resolve_method("attention/softmax", cfg)
    assert attn.model == {"type": "attention", "normalize": "standard", "width": 8, "heads": 2, "layers": 1,
                          "dropout": 0.0} and attn.loss == "softmax"
    tuned = resolve_method("tuned", cfg)
    assert tuned.loss == "lambdarank" and tuned.loss_options == {"sigma": 2.0, "k": 5} and tuned.ensemble == 3
    assert tuned.model == {"type": "mlp", "hidden": [8], "normalize": "standard", "input_noise": 0.1}
    assert tuned.train == {"epochs": 2, "batch_size": 16, "patience": 2, "lr": 0.01}
    # the budget takes the first N of one fixed shuffle of the grid: the same in every cell
    four = tuning_candidates(tuned, 4)
    assert len(four) == 4 and four == tuning_candidates(tuned, 4) and len(tuning_candidates(tuned, 99)) == 6
    assert len({json.dumps(c, sort_keys=True) for c in four}) == 4 and four == tuning_candidates(tuned, 6)[:4]
    # a variant's fingerprint follows its settings; plain methods keep theirs
    other = tiny_config(methods=cfg.methods, variants={"tuned": {**cfg.variants["tuned"], "ensemble": 2}})
    assert (ablation.cell_fingerprint(Cell("tiny", "tuned", 0), cfg)
            != ablation.cell_fingerprint(Cell("tiny", "tuned", 0), other))
    assert (ablation.cell_fingerprint(Cell("tiny", "ranknet", 0), cfg)
            == ablation.cell_fingerprint(Cell("tiny", "ranknet", 0), other))


@pytest.mark.parametrize("variant, message", [
    ({"model": {}}, "at least method"),
    ({"method": "softmax", "ensembles": 2}, "unknown key 'ensembles'"),
    ({"method": "softmax", "ensemble": 0}, "ensemble must be"),
    ({"method": "softmax", "tune": {"lr": [1.0]}}, "SECTION.KEY"),
    ({"method": "softmax", "tune": {"train.lr": []}}, "non-empty list"),
    ({"method": "rank_net"}, "unknown method"),
])
def test_bad_variants_are_refused_with_their_name(variant, message):
    with pytest.raises(LtrError, match=message):
        tiny_config(methods=["ranknet", "v"], variants={"v": variant})


def test_config_file_with_models_variants_and_tuning(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text('[ablation]\nmethods = ["lgb", "attention/softmax", "dasalc"]\nreference = "lgb"\n'
                    'tuning_budget = 2\nquality_reference = "lgb"\n'
                    '[models.attention]\nwidth = 16\nheads = 4\n'
                    '[variants.lgb]\nmethod = "lightgbm"\ntune = {"lightgbm.num_leaves" = [7, 15]}\n'
                    '[variants.dasalc]\nmethod = "attention/softmax"\nensemble = 5\nmodel = {input_noise = 0.1}\n'
                    '[[datasets]]\nname = "s"\nkind = "synthetic"\n')
    cfg = ablation.load_config(path)
    assert cfg.tuning_budget == 2 and cfg.quality_reference == "lgb" and cfg.models["attention"]["heads"] == 4
    assert resolve_method("dasalc", cfg).model["input_noise"] == 0.1 and resolve_method("lgb", cfg).kind == "lightgbm"
    path.write_text(path.read_text().replace('quality_reference = "lgb"', 'quality_reference = "xgb"'))
    with pytest.raises(LtrError, match="quality_reference"):
        ablation.load_config(path)


@pytest.mark.slow
def test_real_cells_tune_on_validation_and_average_an_ensemble():
    cfg = tiny_config(methods=["ranknet", "attention/listmle", "grid", "lgb"], tuning_budget=3,
                      variants={"grid": {"method": "softmax", "ensemble": 2,
                                         "tune": {"train.lr": [0.05, 0.002, 0.0001], "model.input_noise": [0.0, 0.2]}},
                                "lgb": {"method": "lightgbm", "tune": {"lightgbm.num_leaves": [3, 7]}}})
    attn = ablation.run_cell(Cell("tiny", "attention/listmle", 0), cfg)
    assert attn["train_info"]["epochs_run"] == 2 and len(attn["train_info"]["curve"]) == 2
    rec = ablation.run_cell(Cell("tiny", "grid", 0), cfg)
    info = rec["train_info"]
    assert len(info["tuning"]) == 3 and len(info["timing"]["tuning_seconds"]) == 3
    best = max(info["tuning"], key=lambda t: t["valid_best"])
    assert info["chosen"] == best["params"] and info["valid_best"] == best["valid_best"]
    assert info["ensemble"]["seeds"] == [0, 1000] and len(info["ensemble"]["members"]) == 2
    lgb = ablation.run_cell(Cell("tiny", "lgb", 0), cfg)
    assert [t["params"] for t in lgb["train_info"]["tuning"]] in ([{"lightgbm.num_leaves": 3}, {"lightgbm.num_leaves": 7}],
                                                                   [{"lightgbm.num_leaves": 7}, {"lightgbm.num_leaves": 3}])
    # the report: wall time per cell, the capped cells (2 epochs: likely still improving), time to quality
    cfg.quality_reference = "lgb"
    ranknet = ablation.run_cell(Cell("tiny", "ranknet", 0), cfg)
    summary = summarize([ranknet, attn, rec, lgb], cfg)
    text = render_markdown(summary)
    assert "s/cell" in text and "bootstrap interval over queries: one seed" in text and "Time to quality" in text
    ds = summary["datasets"][0]
    assert all(m["wall_time_s"] > 0 for m in ds["methods"])
    assert {c["method"] for c in ds["at_cap"]} == {r["method"] for r in (ranknet, attn, rec, lgb)
                                                   if r["train_info"]["hit_cap"]}


def _rec(method, seed=0, fold=None, **info):
    return {"method": method, "seed": seed, "fold": fold, "train_info": info}


def test_cells_at_cap_and_time_to_quality_from_records():
    records = [
        _rec("mlp", 0, 1, best_epoch=30, epochs_run=30, hit_cap=True, curve=[0.5, 0.6, 0.7], valid_best=0.7,
             timing={"train_seconds": 9.0, "curve_seconds": [3.0, 6.0, 9.0]}),
        _rec("mlp", 0, 2, best_epoch=10, epochs_run=16, hit_cap=False, curve=[0.5, 0.55], valid_best=0.55,
             timing={"train_seconds": 4.0, "curve_seconds": [2.0, 4.0]}),
        _rec("old", 0, 1, best_epoch=15, epochs_run=15),  # a record from before hit_cap existed
        _rec("lgb", 0, 1, best_iteration=100, num_boost_round=100, hit_cap=True, curve=[0.65], valid_best=0.65,
             timing={"train_seconds": 2.0, "curve_seconds": [2.0]}),
        _rec("lgb", 0, 2, best_iteration=40, num_boost_round=100, hit_cap=False, curve=[0.6], valid_best=0.6,
             timing={"train_seconds": 1.0, "curve_seconds": [1.0]}),
    ]
    assert cells_at_cap(records) == [{"method": "lgb", "seed": 0, "fold": 1, "best": 100, "last": 100},
                                     {"method": "mlp", "seed": 0, "fold": 1, "best": 30, "last": 30},
                                     {"method": "old", "seed": 0, "fold": 1, "best": 15, "last": 15}]
    ttq = {r["method"]: r for r in time_to_quality(records, "lgb", ["mlp", "lgb"])}
    # fold 1: 0.7 >= 0.65 first at 9 s (0.6 at 6 s is short); fold 2: 0.55 never reaches 0.6
    assert ttq["mlp"] == {"method": "mlp", "n_splits": 2, "n_reached": 1, "median_seconds_to_reach": 9.0,
                          "median_train_seconds": 6.5, "reference_median_train_seconds": 1.5}


def _check_neural_vs_gbdt_config(cfg):
    specs = {m: resolve_method(m, cfg) for m in cfg.methods}
    assert cfg.reference == "lgbm" == cfg.quality_reference and specs["lgbm"].kind == "lightgbm"
    assert specs["lgbm"].gbdt["num_boost_round"] == 2000 and {"lightgbm.num_leaves", "lightgbm.learning_rate",
                                                               "lightgbm.min_data_in_leaf"} <= set(specs["lgbm"].tune)
    dasalc = specs["attn_dasalc"]
    assert (dasalc.model["type"], dasalc.loss, dasalc.ensemble) == ("attention", "softmax", 5)
    assert dasalc.model["input_noise"] > 0 and dasalc.model["normalize"] == "log1p_standard"
    # the same budget for every method: each grid holds at least tuning_budget candidates
    assert all(len(tuning_candidates(s, cfg.tuning_budget)) == cfg.tuning_budget for s in specs.values())
    return specs


def test_the_neural_vs_gbdt_study_config_resolves():
    from conftest import shared_path

    shared_path("letor4-mq2008")  # the study names the shared MQ2008 folds, which loading checks
    cfg = ablation.load_config(_EXPERIMENTS / "neural_vs_gbdt.toml")
    specs = _check_neural_vs_gbdt_config(cfg)
    assert [d.name for d in cfg.datasets] == ["mq2008"] and cfg.datasets[0].folds() == [1, 2, 3, 4, 5]
    assert specs["mlp_softmax"].model["normalize"] == "none"  # MQ2008 ships min-max normalised features


def test_the_synthetic_half_of_the_study_resolves_to_the_documented_candidates():
    cfg = ablation.load_config(_EXPERIMENTS / "neural_vs_gbdt_synthetic.toml")
    specs = _check_neural_vs_gbdt_config(cfg)
    (data,) = cfg.datasets
    assert (data.name, data.kind, data.options["n_queries"], data.options["mean_list_length"]) == (
        "synthetic10k", "synthetic", 10_000, 40)
    assert specs["mlp_softmax"].model["normalize"] == "standard"  # the generator's features are raw
    # docs/experiments.md names these: the first two of the fixed shuffle of each grid
    assert tuning_candidates(specs["lgbm"], 2) == [
        {"lightgbm.learning_rate": 0.02, "lightgbm.min_data_in_leaf": 20, "lightgbm.num_leaves": 15},
        {"lightgbm.learning_rate": 0.05, "lightgbm.min_data_in_leaf": 50, "lightgbm.num_leaves": 127}]
    assert tuning_candidates(specs["attn_dasalc"], 2) == tuning_candidates(specs["attn_softmax"], 2) == [
        {"model.dropout": 0.0, "model.width": 32, "train.lr": 0.003},
        {"model.dropout": 0.3, "model.width": 32, "train.lr": 0.003}]
    # the ingredient variants add one of DASALC's parts at a time (log1p, noise, ensemble), for both scorers
    parts = {name: (spec.model["type"], spec.model.get("normalize"), spec.model.get("input_noise", 0.0), spec.ensemble)
             for name in ("mlp_log1p", "mlp_dasalc", "attn_log1p", "attn_log1p_noise")
             for spec in [resolve_method(name, cfg)]}
    assert parts == {"mlp_log1p": ("mlp", "log1p_standard", 0.0, 1), "mlp_dasalc": ("mlp", "log1p_standard", 0.1, 5),
                     "attn_log1p": ("attention", "log1p_standard", 0.0, 1),
                     "attn_log1p_noise": ("attention", "log1p_standard", 0.1, 1)}


def test_workers_take_the_longest_cells_first(tmp_path):
    from ltr.study.scheduling import cell_cost, longest_first

    small = tmp_path / "small.txt"
    big = tmp_path / "big.txt"
    small.write_text("0 qid:1 1:1\n" * 10)
    big.write_text("0 qid:1 1:1\n" * 1000)
    cfg = AblationConfig(
        datasets=[DatasetSpec("small", "svmlight", {"train": str(small), "test": str(small)}),
                  DatasetSpec("big", "svmlight", {"train": str(big), "test": str(big)}),
                  DatasetSpec("syn", "synthetic", {"n_queries": 10, "mean_list_length": 4})],
        methods=["ranknet", "lightgbm", "attention/softmax", "ens"],
        variants={"ens": {"method": "ranknet", "ensemble": 5}},
        seeds=[0],
    )
    cells = [Cell(d.name, m, 0) for d in cfg.datasets for m in cfg.methods]
    order = longest_first(cells, cfg, resolve_method)
    # big file: the 5-member ensemble (x5), then attention (x4), then the single models (grid order kept)
    assert [(c.dataset, c.method) for c in order[:4]] == [("big", "ens"), ("big", "attention/softmax"), ("big", "ranknet"), ("big", "lightgbm")]
    assert cell_cost(Cell("syn", "ens", 0), cfg, resolve_method) == 10 * 4 * 5
    assert cell_cost(Cell("small", "ranknet", 0), cfg, resolve_method) == small.stat().st_size
