"""experiments/unbiased_ltr_grid.py's --restarts: the restarts' seeds, the mean of the models' scores and the
geometric mean of their propensity curves (no click simulation or training here)."""

import numpy as np
import pytest
from experiment_scripts import load_experiment


@pytest.fixture(scope="module")
def grid():
    return load_experiment("unbiased_ltr_grid")


def test_restart_configs_keep_the_seed_first_and_stride_the_others(grid):
    from ltr.train.trainer import TrainConfig

    cfg = TrainConfig(epochs=3, seed=4, progress=False)
    assert grid.restart_configs(cfg, 1) == [cfg]  # no restarts: the run as it was
    cfgs = grid.restart_configs(cfg, 3)
    assert [c.seed for c in cfgs] == [4, 4 + 10_007, 4 + 2 * 10_007]  # the stride --restarts' help names
    assert all(c.epochs == 3 and not c.progress for c in cfgs)


def test_mean_scores_and_geometric_mean_curve_by_hand(grid):
    import torch

    from ltr.data import RankingDataset
    from ltr.train.models import LinearScorer

    models = []
    for w in ([1.0, 0.0], [0.0, 3.0]):
        m = LinearScorer(2)
        with torch.no_grad():
            m.linear.weight.copy_(torch.tensor([w]))
            m.linear.bias.zero_()
        models.append(m)
    ds = RankingDataset(np.array([[2.0, 1.0], [0.0, -1.0], [1.0, 1.0]], dtype=np.float32), np.array([1.0, 0.0, 2.0]),
                        np.array([0, 2, 3]), np.arange(2))
    np.testing.assert_allclose(grid.mean_scores(models, ds), [2.5, -1.5, 2.0])  # (2 + 3) / 2, (0 - 3) / 2, (1 + 3) / 2
    np.testing.assert_array_equal(grid.mean_scores(models[:1], ds), [2.0, 0.0, 1.0])  # one model: its own scores
    curve = grid.geometric_mean_curve([[2.0, 1.0, 0.4], [0.5, 0.0625, 0.025]])  # relative to position 1
    np.testing.assert_allclose(curve, [1.0, 0.25, 0.1], rtol=1e-12)


def test_restarts_below_one_are_refused(grid, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        grid.main(["--out", str(tmp_path / "o"), "--restarts", "0"])
    assert info.value.code == 2 and "--restarts 0" in capsys.readouterr().err


def test_shown_items_keeps_the_marked_items_and_drops_emptied_queries(grid):
    from ltr.data import RankingDataset

    lists = RankingDataset(np.arange(7, dtype=np.float32)[:, None], np.array([1, 0, 2, 0, 0, 3, 1.0]),
                           np.array([0, 3, 5, 7]), np.array([10, 11, 12]), weights=np.array([4, 4, 4, 6, 6, 2, 2.0]))
    keep = np.array([True, False, True, False, False, True, True])
    sub = grid.shown_items(lists, keep)
    np.testing.assert_array_equal(sub.features[:, 0], [0, 2, 5, 6])
    np.testing.assert_array_equal(sub.labels, [1, 2, 3, 1])
    np.testing.assert_array_equal(sub.query_offsets, [0, 2, 4])  # query 11 lost both items
    np.testing.assert_array_equal(sub.query_ids, [10, 12])
    np.testing.assert_array_equal(sub.weights, [4, 4, 2, 2])
