"""experiments/dla_variants_study.py: its loop is fit_dla's when no knob is set, its likelihood update has
the known answer on noiseless PBM clicks, runs repeat under a seed, and --variant refuses bad specs."""

import numpy as np
import pytest
from experiment_scripts import load_experiment

from ltr.clicks.simulate.click_models import pbm_examination, simulate_clicks
from ltr.clicks.logs.lists import group_sessions


@pytest.fixture(scope="module")
def study():
    return load_experiment("dla_variants_study")


@pytest.fixture(scope="module")
def noiseless():
    """Expected PBM counts 100 theta_r a_i with a_i = exp(w.x_i) (up to a constant): a linear ranker holds
    the truth. A labelled validation set from the same relevance for the loop's early stopping."""
    from ltr.data import RankingDataset

    rng = np.random.default_rng(0)
    q, k, f = 300, 8, 3
    x = rng.normal(size=(q * k, f))
    u = x @ np.array([1.0, -0.7, 0.4])
    offsets = np.arange(0, q * k + 1, k)
    log = simulate_clicks(np.zeros(q * k), offsets, u + rng.normal(0, 1.0, q * k), top_k=k, sessions_per_query=1, seed=0)
    lists = group_sessions(log)
    theta = pbm_examination(k, 1.0)
    clicks = np.where(lists.mask, 100 * theta[None, :] * np.exp(u - u.max())[np.maximum(lists.docs, 0)], 0.0)
    labels = np.digitize(u[:800], np.quantile(u, [0.5, 0.8, 0.95])).astype(float)
    valid = RankingDataset(x[:800].astype(np.float32), labels, np.arange(0, 801, 8), np.arange(100))
    return x, lists, clicks, theta, valid


def _true_ranker():
    import torch

    from ltr.train.models import LinearScorer

    model = LinearScorer(3)
    with torch.no_grad():
        model.linear.weight.copy_(torch.tensor([[1.0, -0.7, 0.4]]))
        model.linear.bias.zero_()
    return model


def test_likelihood_update_recovers_theta_from_the_true_ranker(study, noiseless):
    """The additive model's click likelihood with the true relevance fixed is maximised at the true theta
    (lists cut to 3..8 shown items too); started flat, the MM steps reach it to 1e-6."""
    import torch

    from ltr.clicks.estimators.dla import list_tensors

    x, lists, clicks, theta, _ = noiseless
    xt, c, pos, mask = list_tensors(lists, x, clicks)
    lengths = np.random.default_rng(1).integers(3, 9, size=len(mask))
    mask = mask & torch.from_numpy(np.arange(mask.shape[1])[None, :] < lengths[:, None])
    c = c * mask
    phi = torch.nn.Parameter(torch.zeros(mask.shape[1]))
    model = _true_ranker()
    before = float(study._likelihood_loss(model, phi, xt, c, pos, mask).detach())
    study._likelihood_full(model, phi, xt, c, mask, iterations=2000)
    np.testing.assert_allclose(torch.exp(phi.detach() - phi.detach()[0]).double().numpy(), theta, rtol=1e-6)
    assert float(study._likelihood_loss(model, phi, xt, c, pos, mask).detach()) < before - 1e-3


def test_the_loop_without_knobs_is_fit_dla_and_repeats(study, noiseless):
    """No knob: the same theta and the same kept epoch as ltr.clicks.estimators.dla.fit_dla (same seed, optimiser,
    batches and early stopping); a second run gives the same digits."""
    from ltr.clicks.estimators.dla import fit_dla
    from ltr.train.models import LinearScorer
    from ltr.train.trainer import seed_everything

    x, lists, clicks, theta, valid = noiseless
    seed_everything(3)
    ref = fit_dla(lists, x, LinearScorer(3), epochs=6, batch_size=64, lr=0.05, propensity_lr=0.05, max_weight=100.0,
                  seed=3, clicks=clicks, valid=valid, patience=5)
    runs = []
    for _ in range(2):
        seed_everything(3)
        runs.append(study.fit_variant(lists, x, LinearScorer(3), valid, 3, {}, epochs=6, lr=0.05, clicks=clicks))
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    np.testing.assert_allclose(runs[0][1], ref.theta, rtol=1e-6)
    assert runs[0][2] == ref.best_epoch


def test_likelihood_variant_recovers_theta_on_noiseless_clicks(study, noiseless):
    from ltr.train.models import LinearScorer
    from ltr.train.trainer import seed_everything

    x, lists, clicks, theta, valid = noiseless
    seed_everything(0)
    for knobs in ({"ploss": "likelihood", "update": "full"}, {"ploss": "likelihood", "plr": 0.1}):
        model, est, epoch = study.fit_variant(lists, x, LinearScorer(3), None, 0, knobs, epochs=60, lr=0.05, clicks=clicks)
        np.testing.assert_allclose(est, theta, rtol=0.01)
        np.testing.assert_allclose(model.linear.weight.detach().double().numpy().ravel(), [1.0, -0.7, 0.4], rtol=0.05)
        assert epoch == 59


def test_crossfit_recovers_theta_on_noiseless_clicks(study, noiseless):
    """Two linear rankers on the even and odd lists each reach the true direction, and the propensities
    weighted by the other one's relevance reach the true theta; the returned ranker is their mean."""
    import torch

    from ltr.train.models import LinearScorer
    from ltr.train.trainer import seed_everything

    x, lists, clicks, theta, valid = noiseless
    seed_everything(0)
    both, est, epoch = study.fit_crossfit(lists, x, LinearScorer(3), None, 0, {"plr": 0.05}, epochs=150, lr=0.05, max_weight=1e6,
                                          batch_size=128, clicks=clicks)
    np.testing.assert_allclose(est, theta, rtol=0.01)
    a, b = both.members
    for m in (a, b):
        np.testing.assert_allclose(m.linear.weight.detach().double().numpy().ravel(), [1.0, -0.7, 0.4], rtol=0.05)
    xt = torch.from_numpy(x[:5].astype(np.float32))
    np.testing.assert_allclose(both(xt).detach().numpy(), (0.5 * (a(xt) + b(xt))).detach().numpy())
    assert epoch == 149


def test_restarts_average_the_curves_geometrically_and_the_rankers_scores(study):
    import torch

    from ltr.train.models import LinearScorer

    models = [LinearScorer(2), LinearScorer(2)]
    with torch.no_grad():
        for m, w in zip(models, ([1.0, 0.0], [0.0, 3.0])):
            m.linear.weight.copy_(torch.tensor([w]))
            m.linear.bias.zero_()
    fits = [(models[0], np.array([1.0, 0.5, 0.2]), 7), (models[1], np.array([1.0, 0.125, 0.05]), 9)]
    ranker, theta, epoch = study._average_fits(fits)
    np.testing.assert_allclose(theta, [1.0, 0.25, 0.1], rtol=1e-12)  # sqrt(0.5 * 0.125), sqrt(0.2 * 0.05)
    x = torch.tensor([[2.0, 1.0], [0.0, -1.0]])
    np.testing.assert_allclose(ranker(x).detach().numpy().ravel(), [2.5, -1.5])  # (2 + 3) / 2, (0 - 3) / 2
    assert epoch == 7
    assert study.parse_variant("r:update=full,restarts=5") == ("r", {"update": "full", "restarts": 5})


@pytest.mark.parametrize("spec, words", [
    ("x:bogus=1", ("bogus",)), ("x:init=warm", ("init", "flat")), ("x:plr=-0.1", ("plr", ">= 0")),
    ("x:ema=nan", ("ema",)), ("x:warm", ("warm", "key=value")), (":plr=0.1", ("no name",)),
    ("x:restarts=0", ("restarts", ">= 1")),
])
def test_bad_variant_specs_are_refused_naming_the_knob(study, spec, words, capsys, tmp_path):
    with pytest.raises(ValueError) as info:
        study.parse_variant(spec)
    assert all(w in str(info.value) for w in words)
    with pytest.raises(SystemExit) as exit_info:
        study.main(["--out", str(tmp_path / "o"), "--variant", spec])
    assert exit_info.value.code == 2 and "--variant" in capsys.readouterr().err
    assert study.parse_variant("a:plr=0.1,update=full,init=rem") == ("a", {"plr": 0.1, "update": "full", "init": "rem"})
