"""Distributed training (torch.distributed, gloo, 2 processes on localhost) equals one process.

The launches start real worker processes (each imports torch), so the end-to-end tests take 3-40 s
each on a 2-core machine (more when it is busy) and are marked slow.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist

import losses
from ltr.cli import main
from ltr.data import save_svmlight
from ltr.data.synthetic import make_synthetic_splits
from ltr.base.errors import LtrError
from ltr.train.checkpoint import load_checkpoint
from ltr.train.config import TrainConfig
from ltr.train.distributed import DistributedTrainer, WorkerFailedError, launch, query_shares
from ltr.train.models import MLPScorer, load_model
from ltr.train.trainer import Trainer, seed_everything

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-4


def tiny_splits():
    # 120 training queries: batches of 17 leave a last batch of one query, so one rank gets none.
    return make_synthetic_splits(n_queries=150, n_features=10, mean_list_length=12, seed=5)


def config(**kw) -> TrainConfig:
    # weight decay and clipping make the gradient's scale matter (Adam alone is blind to it)
    base = dict(epochs=3, batch_size=17, lr=0.01, weight_decay=0.05, grad_clip=0.5, patience=None, progress=False, seed=0,
                metrics=("ndcg@10",))
    return TrainConfig(**{**base, **kw})


def weights_of(model) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}


def assert_same_run(hist_a, hist_b, weights_a, weights_b, skip=()):
    assert len(hist_a) == len(hist_b)
    for a, b in zip(hist_a, hist_b):
        (name,) = a["valid"]
        assert b["valid"][name] == pytest.approx(a["valid"][name], abs=TOL)
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=TOL)
    for k in weights_a:
        if k not in skip:
            np.testing.assert_allclose(weights_b[k], weights_a[k], atol=TOL, err_msg=k)


def test_query_shares_cover_every_query_once():
    offsets = np.concatenate([[0], np.cumsum(np.random.default_rng(0).integers(1, 50, 101))])
    for world in (1, 2, 3, 7):
        cuts = query_shares(offsets, world)
        assert cuts[0] == 0 and cuts[-1] == 101 and np.all(np.diff(cuts) >= 0) and len(cuts) == world + 1
        rows = np.diff(offsets[cuts])
        assert rows.max() - rows.min() <= 2 * 49  # balanced by rows up to a query's length on each side


def test_without_a_process_group_it_is_the_plain_trainer():
    train, valid, _ = tiny_splits()
    runs = []
    for cls in (Trainer, DistributedTrainer):
        seed_everything(0)
        result = cls(MLPScorer(train.n_features, hidden=(8,)), losses.LambdaRank(), config(epochs=2)).fit(train, valid)
        runs.append((result.history, weights_of(result.model)))
    assert [h["valid"] for h in runs[0][0]] == [h["valid"] for h in runs[1][0]]
    for k, v in runs[0][1].items():
        assert np.array_equal(v, runs[1][1][k])


def test_a_worker_killed_by_a_signal_is_named_before_the_peer_that_lost_it():
    from types import SimpleNamespace

    from ltr.train.distributed import _failure_error

    def failure(exitcode, timestamp, pid, message=""):
        return SimpleNamespace(exitcode=exitcode, timestamp=timestamp, pid=pid, message=message,
                               signal_name=lambda: "SIGKILL")

    # rank 0 wrote its connection error a second before the launcher noticed rank 1's death
    lost = failure(1, 100, 11, {"message": "RuntimeError: Connection closed by peer"})
    error = _failure_error(SimpleNamespace(failures={0: lost, 1: failure(-9, 101, 12)}))
    assert "rank 1 (pid 12) was killed by signal SIGKILL" in str(error)
    # without a signal, the first failure is the cause
    error = _failure_error(SimpleNamespace(failures={0: failure(1, 101, 11, "RuntimeError: b"),
                                                     1: failure(1, 100, 12, "ValueError: a")}))
    assert "rank 1 (pid 12) failed: ValueError: a" in str(error)


# ----------------------------------------------------------------------------- kill and resume
class KillingMSE(losses.PointwiseMSE):
    """MSE whose rank-1 copy kills its own process at the ``kill_at``-th call (mid-epoch)."""

    def __init__(self, kill_at: int):
        super().__init__()
        self.kill_at, self.calls = kill_at, 0

    def forward(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.kill_at and dist.is_initialized() and dist.get_rank() == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().forward(*args, **kwargs)


def kill_job(checkpoint_dir: str, kill_at: int) -> None:
    train, valid, _ = tiny_splits()
    seed_everything(0)
    model = MLPScorer(train.n_features, hidden=(8,))
    DistributedTrainer(model, KillingMSE(kill_at), config(checkpoint_dir=checkpoint_dir)).fit(train, valid)


@pytest.mark.slow
def test_killed_worker_stops_the_job_and_its_checkpoint_resumes_with_one_process(tmp_path):
    train, valid, _ = tiny_splits()
    n_batches = -(-train.n_queries // 17)
    with pytest.raises(WorkerFailedError, match=r"rank 1 \(pid \d+\) was killed by signal SIGKILL; the other workers were stopped"):
        launch(kill_job, 2, str(tmp_path), n_batches + 2)  # epoch 2, batch 2
    ckpt = load_checkpoint(tmp_path / "last.pt")  # intact: written atomically after epoch 1
    assert ckpt["epochs_done"] == 1 and len(ckpt["history"]) == 1

    seed_everything(0)
    # the same loss class (the checkpoint's fingerprint says which); kill_at=0 never fires
    resumed = Trainer(MLPScorer(train.n_features, hidden=(8,)), KillingMSE(0),
                      config(checkpoint_dir=str(tmp_path), resume=True)).fit(train, valid)
    seed_everything(0)
    plain = Trainer(MLPScorer(train.n_features, hidden=(8,)), losses.PointwiseMSE(), config()).fit(train, valid)
    # Epoch 1 was trained by 2 processes, epochs 2-3 by one: the same run as one process all along.
    assert_same_run(plain.history, resumed.history, weights_of(plain.model), weights_of(resumed.model))


def test_a_loss_without_mean_or_sum_reduction_is_refused():
    from ltr.train.distributed import _per_item_loss

    with pytest.raises(LtrError, match="reduction 'mean' or 'sum'"):
        _per_item_loss(losses.RankNet(reduction="none"))
    local, reduction = _per_item_loss(losses.RankNet())
    assert reduction == "mean" and local.reduction == "none"


# ----------------------------------------------------------------------------- command line
@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("dist_data")
    paths = {}
    for name, ds in zip(("train", "valid", "test"), tiny_splits()):
        paths[name] = str(d / f"{name}.txt")
        save_svmlight(ds, paths[name])
    return paths


def train_args(files, out) -> list[str]:
    # the default input noise (0.1) is on: it is drawn per query (ltr.train.draws), so every rank gives
    # each item the noise one process gives it; one MLP (not the default three) unless a test asks for an ensemble
    return ["train", "--train", files["train"], "--valid", files["valid"], "--test", files["test"], "--loss", "lambdarank",
            "--ensemble", "1",
            "--hidden", "8", "--epochs", "3", "--batch-size", "17", "--lr", "0.01", "--weight-decay", "0.05", "--metrics", "ndcg@10",
            "--quiet", "--out", str(out)]


@pytest.fixture(scope="module")
def one_process(files, tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "run"
    assert main(train_args(files, out)) == 0
    return json.loads((out / "summary.json").read_text()), weights_of(load_model(out))


# LambdaRank (as every ranking loss) does not change when all scores move together, so the output
# bias gets only the round-off of gradients that sum to zero, which Adam scales up to full steps:
# its value is noise in either run and does not change a ranking. Every other weight is compared.
RANKING_FREE = ("out.bias",)


@pytest.mark.slow
def test_cli_nproc_2_trains_like_one_process(files, one_process, tmp_path):
    out = tmp_path / "two"
    assert main(train_args(files, out) + ["--nproc", "2"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["distributed"] == {"world_size": 2, "backend": "gloo"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["two"]  # no folder from rank 1
    one, one_weights = one_process
    assert_same_run(one["history"], summary["history"], one_weights, weights_of(load_model(out)), skip=RANKING_FREE)
    for split in ("valid", "test"):
        for name, value in one["metrics"][split].items():
            assert summary["metrics"][split][name] == pytest.approx(value, abs=TOL)



@pytest.mark.slow
def test_cli_nproc_user_error_in_the_workers_is_one_line(files, tmp_path, capsys):
    # every rank refuses the existing --out: the user sees that line, not a report of a worker crash
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    assert main(train_args(files, tmp_path / "taken") + ["--nproc", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("ltr train: error: --out") and "already exists" in err[-1] and "worker" not in err[-1]
    assert (tmp_path / "taken" / "notes.txt").read_text() == "mine"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_nodes_launched_by_torchrun_train_like_one_process(files, one_process, tmp_path):
    out, port = tmp_path / "nodes", free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(node),
             "--master-addr", "127.0.0.1", "--master-port", str(port), "-m", "ltr", *train_args(files, out)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for node in (0, 1)
    ]
    try:
        logs = [p.communicate(timeout=240)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], logs
    assert "run folder:" in logs[0] and "run folder:" not in logs[1]  # rank 0 alone writes and reports
    summary = json.loads((out / "summary.json").read_text())
    assert summary["distributed"]["world_size"] == 2
    one, one_weights = one_process
    assert_same_run(one["history"], summary["history"], one_weights, weights_of(load_model(out)), skip=RANKING_FREE)


@pytest.mark.slow
def test_cli_ensemble_with_two_processes_trains_the_same_members(files, tmp_path):
    # each member is trained data-parallel in turn, so two processes give one process's ensemble
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(train_args(files, one) + ["--ensemble", "2", "--seed", "5"]) == 0
    assert main(train_args(files, two) + ["--ensemble", "2", "--seed", "5", "--nproc", "2"]) == 0
    s1, s2 = (json.loads((d / "summary.json").read_text()) for d in (one, two))
    assert [m["seed"] for m in s2["ensemble"]] == [5, 6] and s2["distributed"]["world_size"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one", "two"]  # no folder from rank 1
    for m1, m2 in zip(s1["ensemble"], s2["ensemble"]):
        assert m2["best_epoch"] == m1["best_epoch"]
        for name, value in m1["valid"].items():
            assert m2["valid"][name] == pytest.approx(value, abs=TOL)
    w1, w2 = weights_of(load_model(one)), weights_of(load_model(two))
    assert w1.keys() == w2.keys()
    for name in w1:
        if not name.endswith(RANKING_FREE):
            np.testing.assert_allclose(w2[name], w1[name], atol=TOL, err_msg=name)
    for name, value in s1["metrics"]["test"].items():
        assert s2["metrics"]["test"][name] == pytest.approx(value, abs=TOL)
