"""TensorBoard logs read back with TensorBoard's own reader and checked against the run's result."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_training import F, make_ds

import losses
from ltr.train.config import TrainConfig
from ltr.data.batching import iterate_batches
from ltr.train.models import MLPScorer
from ltr.runs.tensorboard_log import metric_tag
from ltr.train.trainer import Trainer

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
plugin_data_pb2 = pytest.importorskip("tensorboard.plugins.hparams.plugin_data_pb2")


def test_event_files_hold_the_run(tmp_path):
    train, valid, test = make_ds(32, 11), make_ds(12, 12), make_ds(10, 13)
    torch.manual_seed(0)
    model = MLPScorer(F, hidden=(8,))
    config = TrainConfig(epochs=3, batch_size=8, lr=0.01, patience=None, progress=False,
                         metrics=("ndcg@5", "map", "mrr"), log_dir=str(tmp_path / "tb"))
    seen = []

    def loss_on_valid(trainer, epoch, record):
        # the validation loss by hand: the same loss, eval mode, mean over length-ordered batches of 8 queries
        trainer.model.eval()
        with torch.no_grad():
            values = [float(losses.get_loss("lambdarank")(trainer.model(b.features, mask=b.mask), b.labels, b.mask))
                      for b in iterate_batches(valid, 8)]
        trainer.model.train()
        seen.append((record["valid_loss"], float(np.mean(values))))

    result = Trainer(model, losses.get_loss("lambdarank"), config, hparams={"loss.name": "lambdarank"},
                     callbacks=[loss_on_valid]).fit(train, valid, test)
    # the trainer pads the epoch's validation scores (scored as flat rows) into those batches instead of
    # scoring them again: equal up to float32 round-off of one matrix product against another
    assert len(seen) == 3 and all(mine == pytest.approx(theirs, rel=1e-6) for mine, theirs in seen)

    ea = event_accumulator.EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    ea.Reload()
    tags = ea.Tags()
    loss_events = ea.Scalars("train/loss")
    assert [e.step for e in loss_events] == [1, 2, 3]
    # event files hold float32: compare at float32 precision
    np.testing.assert_allclose([e.value for e in loss_events], [h["train_loss"] for h in result.history], rtol=1e-6)
    valid_loss = ea.Scalars("valid/loss")
    assert [e.step for e in valid_loss] == [1, 2, 3]
    np.testing.assert_allclose([e.value for e in valid_loss], [h["valid_loss"] for h in result.history], rtol=1e-6)
    for name in result.history[0]["valid"]:
        assert "[" in name and "]" in name  # stamped names, kept verbatim in the tag
        tag = metric_tag("valid", name)
        assert tag == f"valid/{name}"
        assert tag in tags["scalars"]
        values = [e.value for e in ea.Scalars(tag)]
        np.testing.assert_allclose(values, [h["valid"][name] for h in result.history], rtol=1e-6)
    for name, value in result.test_metrics.items():
        assert ea.Scalars(metric_tag("test", name))[0].value == pytest.approx(value, rel=1e-6)
        assert ea.Scalars(metric_tag("hparams/test", name))[0].value == pytest.approx(value, rel=1e-6)
    for name, value in result.valid_metrics.items():
        assert ea.Scalars(metric_tag("hparams/valid", name))[0].value == pytest.approx(value, rel=1e-6)

    # histograms of the validation scores, one per epoch, counting every validation item
    hist = ea.Histograms("valid/scores")
    assert [h.step for h in hist] == [1, 2, 3]
    assert all(h.histogram_value.num == valid.n_items for h in hist)

    # hparams: the plugin's session start info holds the hyper-parameters
    content = ea.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    assert start.hparams["lr"].number_value == pytest.approx(0.01)
    assert start.hparams["loss.name"].string_value == "lambdarank"
    assert start.hparams["best_epoch"].number_value == result.best_epoch
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    metric_tags = {m.name.tag for m in experiment.metric_infos}
    assert metric_tag("hparams/valid", result.monitor) in metric_tags
    assert result.tensorboard_tags[f"valid:{result.monitor}"] == metric_tag("valid", result.monitor)


def test_resumed_run_logs_every_epoch(tmp_path):
    """Resuming into a fresh log folder (as ``ltr train --checkpoint-dir`` does) re-logs the restored
    epochs; resuming into the killed run's folder keeps its events without duplicates."""
    import shutil
    import time

    from test_training import KillAfter

    train, valid = make_ds(24, 21), make_ds(8, 22)

    def run(ckpt, log_dir, **kw):
        torch.manual_seed(0)
        config = TrainConfig(epochs=4, batch_size=8, lr=0.01, patience=None, progress=False, metrics=("ndcg@5",),
                             checkpoint_dir=str(ckpt), log_dir=str(log_dir), resume=True)
        return Trainer(MLPScorer(F, hidden=(8,)), losses.get_loss("lambdarank"), config, **kw).fit(train, valid)

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "ckpt", tmp_path / "killed_tb", callbacks=[KillAfter(2)])
    shutil.copytree(tmp_path / "ckpt", tmp_path / "ckpt_copy")
    # Event file names hold whole seconds, then a per-process counter compared as text (9 > 10): a resume
    # in the same second as the kill could sort before the killed run's file. A real restart never is.
    time.sleep(1.05)
    for ckpt, log_dir, histogram_steps in (("ckpt", "fresh_tb", [3, 4]), ("ckpt_copy", "killed_tb", [1, 2, 3, 4])):
        result = run(tmp_path / ckpt, tmp_path / log_dir)
        assert result.epochs_run == 4
        ea = event_accumulator.EventAccumulator(str(tmp_path / log_dir), size_guidance={"scalars": 0, "histograms": 0})
        ea.Reload()
        loss_events = ea.Scalars("train/loss")
        assert [e.step for e in loss_events] == [1, 2, 3, 4]
        np.testing.assert_allclose([e.value for e in loss_events], [h["train_loss"] for h in result.history], rtol=1e-6)
        valid_loss = ea.Scalars("valid/loss")  # the restored epochs' validation loss comes from the checkpoint
        assert [e.step for e in valid_loss] == [1, 2, 3, 4]
        np.testing.assert_allclose([e.value for e in valid_loss], [h["valid_loss"] for h in result.history], rtol=1e-6)
        ndcg = ea.Scalars(metric_tag("valid", result.monitor))
        np.testing.assert_allclose([e.value for e in ndcg], [h["valid"][result.monitor] for h in result.history], rtol=1e-6)
        assert [h.step for h in ea.Histograms("valid/scores")] == histogram_steps


def test_a_callback_stops_training_cleanly(tmp_path):
    # request_stop (a tuner's pruning) ends the run as early stopping does: best weights restored, test
    # set scored, HParams written; raising would have left no HParams record of the run
    train, valid, test = make_ds(32, 11), make_ds(12, 12), make_ds(10, 13)
    torch.manual_seed(0)
    config = TrainConfig(epochs=6, batch_size=8, lr=0.01, patience=None, progress=False, log_dir=str(tmp_path / "tb"))

    def stop_at_two(trainer, epoch, record):
        if epoch == 2:
            trainer.hparams["state"] = "pruned"
            trainer.request_stop("pruned at epoch 2")

    result = Trainer(MLPScorer(F, hidden=(8,)), losses.get_loss("ranknet"), config, callbacks=[stop_at_two]).fit(train, valid, test)
    assert result.epochs_run == 2 and result.stopped_early and result.stop_reason == "pruned at epoch 2"
    assert result.test_metrics is not None
    ea = event_accumulator.EventAccumulator(str(tmp_path / "tb"))
    ea.Reload()
    content = ea.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    assert start.hparams["state"].string_value == "pruned"


def test_gbdt_run_logs_its_curves_and_hparams_as_a_training_run_does(tmp_path):
    """``ltr gbdt`` writes through :class:`ScalarLogger` (TensorBoard's own event writer, no torch):
    the reader sees every round of LightGBM's validation curves as summary.json holds them, the
    HParams experiment, start (LightGBM's parameters with their types) and end, and the final metrics."""
    import json

    from ltr.cli import main
    from ltr.data import make_synthetic_splits, save_svmlight

    for name, ds in zip(("train", "valid"), make_synthetic_splits(40, 6, mean_list_length=10, seed=3)):
        save_svmlight(ds, tmp_path / f"{name}.txt")
    out = tmp_path / "run"
    assert main(["gbdt", "--train", str(tmp_path / "train.txt"), "--valid", str(tmp_path / "valid.txt"),
                 "--num-boost-round", "8", "--quiet", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    ea = event_accumulator.EventAccumulator(str(out / "tensorboard"), size_guidance={"scalars": 0})
    ea.Reload()
    curves = summary["lightgbm_own_metrics"]["per_round"]["valid"]
    assert len(curves) >= 4
    for name, values in curves.items():
        logged = ea.Scalars(metric_tag("valid", name))
        assert [e.step for e in logged] == list(range(1, len(values) + 1))
        np.testing.assert_allclose([e.value for e in logged], values, rtol=1e-6)  # float32 in the event file
    for name, value in summary["metrics"]["valid"].items():
        [final] = ea.Scalars(metric_tag("hparams/valid", name))
        assert final.step == summary["best_iteration"] and final.value == pytest.approx(value, rel=1e-6)
    content = ea.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"]).session_start_info
    assert start.hparams["lightgbm.learning_rate"].number_value == summary["config"]["lightgbm"]["learning_rate"]
    assert start.hparams["lightgbm.objective"].string_value == "lambdarank"
    assert start.hparams["gbdt.num_boost_round"].number_value == 8
    assert start.hparams["lightgbm.force_row_wise"].bool_value is True  # a boolean stays one
    assert start.hparams["gbdt.eval_at"].string_value == "[1, 3, 5, 10]"  # a list is shown as text
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"]).experiment
    assert {m.name.tag for m in experiment.metric_infos} == {metric_tag("hparams/valid", n) for n in summary["metrics"]["valid"]}
    kinds = {h.name: h.type for h in experiment.hparam_infos}
    # DATA_TYPE_FLOAT64, _STRING, _BOOL
    assert (kinds["lightgbm.learning_rate"], kinds["lightgbm.objective"], kinds["lightgbm.force_row_wise"]) == (3, 1, 2)
    end = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_end_info"]).session_end_info
    assert end.status == 1  # STATUS_SUCCESS


def test_scalar_logger_names_its_folder_when_the_disk_refuses(tmp_path, monkeypatch):
    """An OSError of the event writer (a full disk) comes out of ScalarLogger with the log folder as its
    file name, as from TensorBoardLogger, so that the command's one-line error says where."""
    import errno

    from ltr.runs.tensorboard_log import ScalarLogger

    logger = ScalarLogger(tmp_path / "tb")

    def full(event):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(logger._events, "add_event", full)
    for write in (lambda: logger.scalar("valid/x", 1.0, 1), lambda: logger.metrics("valid", {"ndcg@10": 0.5}, 1),
                  lambda: logger.hparams({"lr": 0.1}, {"valid": {"ndcg@10": 0.5}}, 3)):
        with pytest.raises(OSError) as refused:
            write()
        assert refused.value.errno == errno.ENOSPC and refused.value.filename == str(tmp_path / "tb")
    monkeypatch.undo()
    logger.close()
