"""The trainer: learning, best weights, early stopping, determinism, weights, NaN stop, resume, config."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import losses
import metrics
from ltr.data import RankingDataset
from ltr.data.batching import BucketBatchSampler
from ltr.base.errors import LtrError
from ltr.train.checkpoint import load_checkpoint
from ltr.train.config import TrainConfig, load_toml
from ltr.train.models import LinearScorer, MLPScorer
from ltr.train.trainer import NonFiniteLossError, Trainer, resolve_device

F = 6
METRICS = ("ndcg@3", "ndcg@10", "map")


def make_ds(n_queries: int, seed: int, weights: bool = False) -> RankingDataset:
    """Queries of 3..14 items whose graded labels follow a fixed linear function of the features."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 15, n_queries)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    x = rng.normal(size=(offsets[-1], F)).astype(np.float32)
    w = np.array([1.0, -0.7, 0.5, 0.0, 0.3, 0.0])
    y = np.clip(np.round(x @ w + 1.0 + 0.3 * rng.normal(size=len(x))), 0, 4)
    wt = rng.uniform(0.5, 2.0, size=len(x)) if weights else None
    return RankingDataset(x, y, offsets, np.arange(n_queries) + 100 * seed, weights=wt)


@pytest.fixture(scope="module")
def data():
    return make_ds(48, 1), make_ds(16, 2)


def cfg(**kw) -> TrainConfig:
    base = dict(epochs=4, batch_size=8, lr=0.01, patience=None, metrics=METRICS, progress=False, seed=0)
    base.update(kw)
    return TrainConfig(**base)


def mlp(seed=0, dropout=0.0):
    torch.manual_seed(seed)
    return MLPScorer(F, hidden=(16,), dropout=dropout)


def test_training_learns_and_keeps_best_weights(data):
    train, valid = data
    model = mlp()
    trainer = Trainer(model, losses.get_loss("lambdarank"), cfg(epochs=6))
    before = metrics.evaluate(trainer.predict(valid), valid.labels, valid.query_offsets, ["ndcg@10"]).mean
    result = trainer.fit(train, valid)
    name = result.monitor
    assert name.startswith("ndcg@10[")
    assert result.epochs_run == 6 and len(result.history) == 6
    values = [h["valid"][name] for h in result.history]
    assert result.best_value == max(values)
    assert result.best_epoch == 1 + int(np.argmax(values))
    # the model holds the best epoch's weights: re-evaluating it gives that epoch's metrics
    again = trainer.evaluate(valid).mean
    assert again == pytest.approx(result.history[result.best_epoch - 1]["valid"], abs=1e-12)
    assert result.valid_metrics == result.history[result.best_epoch - 1]["valid"]
    assert result.best_value > list(before.values())[0] + 0.05  # it learned something real
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]


class ReversedLoss(nn.Module):
    """RankNet on negated labels: training makes the ranking worse every epoch."""

    def __init__(self):
        super().__init__()
        self.inner = losses.RankNet()

    def forward(self, scores, labels, mask, weights=None):
        return self.inner(scores, -labels, mask)


def test_best_not_last_weights_are_restored(data):
    train, valid = data
    torch.manual_seed(0)
    model = LinearScorer(F)
    with torch.no_grad():  # start from the true direction so that the first epoch is the best
        model.linear.weight.copy_(torch.tensor([[1.0, -0.7, 0.5, 0.0, 0.3, 0.0]]))
    result = Trainer(model, ReversedLoss(), cfg(epochs=4, lr=0.05)).fit(train, valid)
    name = result.monitor
    assert result.best_epoch == 1
    assert result.history[-1]["valid"][name] < result.best_value - 0.1
    now = metrics.evaluate(Trainer(model, ReversedLoss(), cfg()).predict(valid), valid.labels, valid.query_offsets, list(METRICS)).mean
    assert now[name] == pytest.approx(result.best_value, abs=1e-12)


class FrozenLoss(nn.Module):
    """Zero gradient: the weights never move, so the monitored metric never improves after epoch 1."""

    def forward(self, scores, labels, mask, weights=None):
        return (scores * 0.0).sum()


def test_early_stopping_patience(data):
    train, valid = data
    result = Trainer(mlp(), FrozenLoss(), cfg(epochs=20, patience=3)).fit(train, valid)
    assert result.stopped_early
    assert result.epochs_run == 4  # epoch 1 is the best; 2, 3, 4 do not improve
    assert result.best_epoch == 1


def test_same_seed_same_result(data):
    train, valid = data
    runs = []
    for _ in range(2):
        r = Trainer(mlp(seed=5, dropout=0.2), losses.get_loss("ranknet"), cfg(epochs=3, seed=7)).fit(train, valid)
        runs.append(([h["train_loss"] for h in r.history], [h["valid"] for h in r.history], r.model.state_dict()))
    assert runs[0][0] == runs[1][0] and runs[0][1] == runs[1][1]
    for k in runs[0][2]:
        assert torch.equal(runs[0][2][k], runs[1][2][k])
    r3 = Trainer(mlp(seed=5, dropout=0.2), losses.get_loss("ranknet"), cfg(epochs=3, seed=8)).fit(train, valid)
    assert [h["train_loss"] for h in r3.history] != runs[0][0]  # another seed: another batch order


class RecordingLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = losses.RankNet()
        self.weight_sums: list[float] = []
        self.calls = 0

    def forward(self, scores, labels, mask, weights=None):
        if torch.is_grad_enabled():  # training steps only, not the validation loss
            self.calls += 1
            if weights is not None:
                self.weight_sums.append(float(weights[mask].sum()))
        return self.inner(scores, labels, mask, weights=weights)


def batches_per_epoch(ds, batch_size, epochs, seed=0):
    """How many training batches each epoch has (the sampler's random phase makes it vary)."""
    sampler = BucketBatchSampler(ds.query_lengths, batch_size, seed=seed)
    counts = []
    for e in range(epochs):
        sampler.set_epoch(e)
        counts.append(len(sampler))
    return counts


def test_item_weights_reach_the_loss(data):
    train = make_ds(20, 3, weights=True)
    loss = RecordingLoss()
    Trainer(mlp(), loss, cfg(epochs=1, batch_size=6)).fit(train, data[1])
    assert len(loss.weight_sums) == loss.calls == batches_per_epoch(train, 6, 1)[0]
    assert sum(loss.weight_sums) == pytest.approx(train.weights.sum(), rel=1e-5)  # every item once, its own weight
    loss2 = RecordingLoss()
    Trainer(mlp(), loss2, cfg(epochs=1, batch_size=6)).fit(data[0], data[1])
    assert loss2.weight_sums == [] and loss2.calls > 0  # no weights in the data: none passed


class NaNAt(nn.Module):
    """RankNet, but NaN at the given training (epoch, batch), both 1-based."""

    def __init__(self, epoch, batch, batch_counts):
        super().__init__()
        self.inner, self.at, self.step = losses.RankNet(), sum(batch_counts[: epoch - 1]) + batch, 0

    def forward(self, scores, labels, mask, weights=None):
        self.step += torch.is_grad_enabled()  # count training steps, not validation-loss batches
        value = self.inner(scores, labels, mask)
        return value * float("nan") if self.step == self.at else value


def test_nan_loss_stops_with_epoch_and_batch_and_keeps_checkpoint(data, tmp_path):
    train, valid = data
    trainer = Trainer(mlp(), NaNAt(3, 2, batches_per_epoch(train, 8, 3)), cfg(epochs=5, checkpoint_dir=str(tmp_path)))
    with pytest.raises(NonFiniteLossError, match=r"loss is nan at epoch 3, batch 2") as info:
        trainer.fit(train, valid)
    assert str(tmp_path / "last.pt") in str(info.value)
    ckpt = load_checkpoint(tmp_path / "last.pt")
    assert ckpt["epochs_done"] == 2 and len(ckpt["history"]) == 2
    assert all(math.isfinite(h["train_loss"]) for h in ckpt["history"])


class KillAfter:
    def __init__(self, epoch):
        self.epoch = epoch

    def __call__(self, trainer, epoch, record):
        if epoch == self.epoch:
            raise KeyboardInterrupt(f"simulated kill after epoch {epoch}")


@pytest.mark.parametrize("kill_after", [2])
def test_resume_after_kill_matches_uninterrupted_run(data, tmp_path, kill_after):
    train, valid = data
    settings = dict(epochs=5, seed=3, patience=10)
    full = Trainer(mlp(seed=1, dropout=0.3), losses.get_loss("lambdarank"), cfg(**settings, checkpoint_dir=str(tmp_path / "a"))).fit(train, valid)

    killed = Trainer(mlp(seed=1, dropout=0.3), losses.get_loss("lambdarank"), cfg(**settings, checkpoint_dir=str(tmp_path / "b")), callbacks=[KillAfter(kill_after)])
    with pytest.raises(KeyboardInterrupt):
        killed.fit(train, valid)
    assert load_checkpoint(tmp_path / "b" / "last.pt")["epochs_done"] == kill_after

    # a fresh process: other initial weights and other global RNG states, all replaced by the checkpoint
    torch.manual_seed(999)
    np.random.seed(999)
    resumed = Trainer(mlp(seed=42, dropout=0.3), losses.get_loss("lambdarank"), cfg(**settings, checkpoint_dir=str(tmp_path / "b"), resume=True)).fit(train, valid)
    assert [h["valid"] for h in resumed.history] == [h["valid"] for h in full.history]
    assert [h["train_loss"] for h in resumed.history] == [h["train_loss"] for h in full.history]
    assert resumed.best_epoch == full.best_epoch and resumed.valid_metrics == full.valid_metrics
    for k, v in full.model.state_dict().items():
        assert torch.equal(v, resumed.model.state_dict()[k])


def test_resume_refuses_other_configuration(data, tmp_path):
    train, valid = data
    Trainer(mlp(), losses.RankNet(), cfg(epochs=1, checkpoint_dir=str(tmp_path))).fit(train, valid)
    with pytest.raises(LtrError, match="differs in lr"):
        Trainer(mlp(), losses.RankNet(), cfg(epochs=2, lr=0.5, checkpoint_dir=str(tmp_path), resume=True)).fit(train, valid)


def test_predict_is_flat_eval_mode_and_silent(data, capsys):
    train, valid = data
    trainer = Trainer(mlp(dropout=0.5), losses.RankNet(), cfg(epochs=1, eval_rows=7))
    trainer.fit(train, valid)
    s1, s2 = trainer.predict(valid), trainer.predict(valid)
    assert s1.shape == (valid.n_items,) and s1.dtype == np.float64
    np.testing.assert_array_equal(s1, s2)
    with torch.no_grad():
        direct = trainer.model.eval()(torch.from_numpy(valid.features)).double().numpy()
    np.testing.assert_allclose(s1, direct, rtol=1e-6, atol=1e-6)  # float32: another row blocking rounds differently
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_feature_count_mismatch_is_clear(data):
    train, valid = data
    with pytest.raises(LtrError, match="training set has 6 features, the model expects 5"):
        Trainer(MLPScorer(5), losses.RankNet(), cfg()).fit(train, valid)


def test_device_selection(data):
    assert resolve_device("cpu").type == "cpu"
    if torch.cuda.is_available():
        assert resolve_device("cuda").type == "cuda"
        train, valid = data
        on_cpu = Trainer(mlp(seed=3), losses.RankNet(), cfg(epochs=2)).fit(train, valid)
        on_gpu = Trainer(mlp(seed=3), losses.RankNet(), cfg(epochs=2, device="cuda")).fit(train, valid)
        assert next(on_gpu.model.parameters()).is_cuda
        for a, b in zip(on_cpu.history, on_gpu.history):
            assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-3)
    else:
        with pytest.raises(LtrError, match="CUDA is not available"):
            resolve_device("cuda")
    with pytest.raises(LtrError, match="unknown device"):
        resolve_device("tpu")


def test_config_from_toml_and_unknown_keys(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[train]\nepochs = 7\nlr = 0.005\nmetrics = ["map", "ndcg@5"]\nmonitor = "ndcg@5"\n[loss]\nname = "ranknet"\n')
    tables = load_toml(path, ("train", "model", "loss"))
    c = TrainConfig.from_dict(tables["train"])
    assert (c.epochs, c.lr, c.metrics, c.monitor) == (7, 0.005, ("map", "ndcg@5"), "ndcg@5")
    assert tables["model"] == {} and tables["loss"] == {"name": "ranknet"}
    assert TrainConfig(metrics=("map",)).metrics == ("ndcg@10", "map")  # the monitor is always computed
    with pytest.raises(LtrError, match="unknown key 'epoch'"):
        TrainConfig.from_dict({"epoch": 3})
    path.write_text("[trian]\nepochs = 3\n")
    with pytest.raises(LtrError, match="unknown key 'trian'"):
        load_toml(path, ("train", "model", "loss"))
    path.write_text("[train\n")
    with pytest.raises(LtrError, match="invalid TOML"):
        load_toml(path, ("train",))
    with pytest.raises(LtrError, match="patience"):
        TrainConfig(patience=0)


def test_unknown_metric_or_preset_fails_before_training(data):
    train, valid = data
    calls = []
    for bad in ({"metrics": ("ndcg@10", "bogus@3")}, {"preset": "nosuch"}):
        trainer = Trainer(mlp(seed=1), losses.RankNet(), cfg(epochs=2, **bad), callbacks=[lambda t, e, r: calls.append(e)])
        with pytest.raises(LtrError, match="invalid metrics"):
            trainer.fit(train, valid)
    assert calls == []  # no epoch ran


def test_loss_refusing_labels_is_a_clear_error(data):
    train, valid = data
    assert train.labels.max() > 1  # graded labels: BCE cannot take them
    with pytest.raises(LtrError, match=r"PointwiseBCE refused batch 1 of epoch 1: .*labels in \[0, 1\]"):
        Trainer(mlp(seed=1), losses.PointwiseBCE(), cfg(epochs=1)).fit(train, valid)


def test_diverged_validation_scores_stop_with_a_clear_error(data, tmp_path):
    # The training loss of an epoch can be finite while the update it made sends the validation
    # scores to inf; that must stop training with a clear error, not crash inside the metrics.
    train, valid = data

    class DivergesAfterEpoch1(MLPScorer):
        broken = False

        def forward(self, x, mask=None):
            s = super().forward(x, mask=mask)
            return s if self.training or not self.broken else s + float("inf")

    torch.manual_seed(1)
    model = DivergesAfterEpoch1(F, hidden=(16,))

    def break_after_epoch_1(trainer, epoch, record):
        trainer.model.broken = True

    trainer = Trainer(model, losses.RankNet(), cfg(epochs=3, checkpoint_dir=str(tmp_path)), callbacks=[break_after_epoch_1])
    from ltr.train.trainer import NonFiniteScoresError

    with pytest.raises(NonFiniteScoresError, match="after epoch 2: the model diverged") as info:
        trainer.fit(train, valid)
    assert info.value.epoch == 2 and info.value.count == valid.n_items
    assert (tmp_path / "last.pt").exists()
