"""The trainer: Adam over padded query batches, validation every epoch, early stopping, best weights.

::

    model = MLPScorer(train.n_features)
    result = Trainer(model, losses.get_loss("lambdarank"), TrainConfig(epochs=30)).fit(train, valid)
    result.best_epoch, result.valid_metrics      # the model now holds the best epoch's weights

One epoch visits every training query once, in batches of ``batch_size`` queries padded to their
longest list (:func:`ltr.data.batching.iterate_batches`, length-bucketed); the batch order of epoch ``e``
is a pure function of ``(seed, e)`` (the sampler's ``set_epoch``), so a resumed run sees the same batches as an uninterrupted one.
After each epoch the validation set is scored (eval mode, no gradients, flat rows) and judged by
``metrics.evaluate``; the ``monitor`` metric picks the best epoch, whose weights are kept in memory and
in the checkpoint and loaded back into the model when training ends. Ranking metrics and ``auc`` are
better when higher, ``logloss`` and ``brier`` when lower (:func:`higher_is_better`).

Classification metrics (for click / CTR models; :data:`CLASSIFICATION_METRICS`) may be monitored or
listed beside the ranking metrics. They are computed over all judged rows at once (not per query),
with :mod:`metrics.classification` on binary 0/1 labels (NaN labels, i.e. unjudged rows, are left
out): ``logloss`` and ``brier`` judge ``p = sigmoid(score)``, so they suit models whose scores are
**logits**, as the pointwise BCE loss (``losses.PointwiseBCE``) trains them to be; ``auc`` uses the
raw scores (AUC is unchanged by any increasing map). Their stamped names say so:
``logloss[p=sigmoid(score)]``, ``brier[p=sigmoid(score)]``, ``auc[ties=half]``.

Checkpoint (``checkpoint_dir/last.pt``, atomic, ``torch.load(weights_only=True)``): model and optimiser
state, number of finished epochs, best value / epoch / weights, the early-stopping counter, the history,
the RNG states (torch, numpy, python), the next sampler epoch, and fingerprints of what the run was
given (hashes of the training and validation data, the loss and its settings, the model's description
and shapes, the configuration): a resume whose inputs differ in any of them is refused with a message
naming what changed, so a best epoch judged on other data is never reported. A loss that is NaN or infinite raises
:class:`NonFiniteLossError` naming the epoch and the batch; no checkpoint is written for that epoch,
so ``last.pt`` still holds the last good one.

TensorBoard after a resume: if ``log_dir`` already holds the killed run's event files they are kept and
its unfinished later epochs hidden (``purge_step``); a fresh ``log_dir`` (``ltr train`` makes a new run
folder each time) first receives the restored epochs' scalars again, so every curve starts at epoch 1
(the score histograms of restored epochs are absent: scores are not checkpointed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ltr.base.errors import LtrError
from ltr.train.checkpoint import (
    CHECKPOINT_NAME,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from ltr.runs.scoring import CLASSIFICATION_METRICS, check_metric_names, evaluate_scores, higher_is_better
from ltr.train.config import AUTO_BATCH, DEFAULT_METRICS, TrainConfig, auto_batch_size
from ltr.train.early_stopping import EarlyStopping

__all__ = [
    "TrainConfig",
    "DEFAULT_METRICS",
    "FitResult",
    "Trainer",
    "NonFiniteLossError",
    "NonFiniteScoresError",
    "check_metric_names",
    "resolve_device",
    "seed_everything",
    "evaluate_scores",
    "CLASSIFICATION_METRICS",
    "higher_is_better",
]

# Keys of TrainConfig that may change between a run and its resumption without changing its result.
_RESUME_FREE_KEYS = {"epochs", "progress", "log_dir", "checkpoint_dir", "resume", "device", "eval_rows", "histograms", "patience"}


class NonFiniteLossError(LtrError):
    """The training loss became NaN or infinite."""

    def __init__(self, epoch: int, batch: int, value: float, checkpoint: str | None):
        self.epoch, self.batch, self.value, self.checkpoint = epoch, batch, value, checkpoint
        where = f"last good checkpoint kept: {checkpoint}" if checkpoint else "no checkpoint was configured"
        super().__init__(f"training loss is {value} at epoch {epoch}, batch {batch}; stopped ({where})")


class NonFiniteScoresError(LtrError):
    """The model's validation scores became NaN or infinite (it diverged during the last epoch)."""

    def __init__(self, epoch: int, count: int, checkpoint: str | None):
        self.epoch, self.count, self.checkpoint = epoch, count, checkpoint
        where = f"last good checkpoint kept: {checkpoint}" if checkpoint else "no checkpoint was configured"
        super().__init__(
            f"{count} validation scores are NaN or infinite after epoch {epoch}: the model diverged "
            f"(try a lower learning rate or grad_clip); stopped ({where})"
        )


@dataclass
class FitResult:
    """What :meth:`Trainer.fit` returns; ``model`` holds the best epoch's weights."""

    best_epoch: int
    best_value: float
    monitor: str  # stamped name of the monitored metric
    history: list[dict[str, Any]]
    model: nn.Module
    valid_metrics: dict[str, float]  # at the best epoch
    test_metrics: dict[str, float] | None = None
    epochs_run: int = 0
    stopped_early: bool = False
    wall_time_s: float = 0.0
    tensorboard_tags: dict[str, str] = field(default_factory=dict)
    higher_is_better: bool = True  # direction of the monitored metric
    stop_reason: str | None = None  # why a callback stopped training (Trainer.request_stop), if one did


def resolve_device(device: str) -> torch.device:
    """``"cpu"``, ``"cuda[:N]"`` (an error when CUDA is absent) or ``"auto"``."""
    device = str(device)
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise LtrError(f"device {device!r} was asked for but CUDA is not available (torch {torch.__version__}); use device='cpu'")
        return torch.device(device)
    if device != "cpu":
        raise LtrError(f"unknown device {device!r}; use cpu, cuda, cuda:N or auto")
    return torch.device("cpu")


def seed_everything(seed: int) -> None:
    """Seed torch, numpy's global generator and python's ``random``."""
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


class Trainer:
    """Fit a scorer with a ranking loss; see the module docstring.

    ``loss(scores [B, L], labels [B, L], mask [B, L], weights=...)`` is any module of :mod:`losses`;
    ``weights`` is passed only when the training set carries per-item weights.
    ``hparams``: extra hyper-parameters for the TensorBoard HParams view (model and loss settings).
    ``callbacks``: functions ``f(trainer, epoch, record)`` called after each finished (and
    checkpointed) epoch. A callback ends training cleanly with :meth:`request_stop` (the best weights
    are restored, the test set scored and TensorBoard's HParams written, as after early stopping;
    a tuner's pruning uses it); raising from one stops training at once (tests simulate a kill so).
    """

    def __init__(
        self,
        model: nn.Module,
        loss: nn.Module,
        config: TrainConfig | None = None,
        *,
        hparams: dict[str, Any] | None = None,
        callbacks: list[Callable[["Trainer", int, dict], None]] | None = None,
    ):
        self.config = config or TrainConfig()
        self.device = resolve_device(self.config.device)
        self.model = model.to(self.device)
        self.loss = loss.to(self.device) if isinstance(loss, nn.Module) else loss
        self.hparams = dict(hparams or {})
        self.callbacks = list(callbacks or [])
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.config.lr, weight_decay=self.config.weight_decay)
        self.logger = None
        cfg = self.config
        self.stopping = EarlyStopping(cfg.monitor, higher_is_better(cfg.monitor), cfg.min_delta, cfg.patience)
        self.history: list[dict[str, Any]] = []
        self._fingerprints_now: dict[str, Any] | None = None
        self.stop_reason: str | None = None
        self.progress_label = "epochs"  # the epochs bar's description (an ensemble names the member)

    def request_stop(self, reason: str) -> None:
        """Ask the running :meth:`fit` to stop after the current epoch (from a callback)."""
        self.stop_reason = str(reason)

    # ------------------------------------------------------------------ prediction
    @torch.no_grad()
    def predict(self, ds) -> np.ndarray:
        """Scores [N] for every row of ``ds`` (eval mode, no gradients, ``eval_rows`` rows at a time)."""
        return predict_scores(self.model, ds.features, query_offsets=ds.query_offsets, device=self.device,
                              rows=self.config.eval_rows)

    def evaluate(self, ds) -> Any:
        """``metrics.evaluate`` of the current model on ``ds`` with the configured metrics."""
        return evaluate_scores(self.predict(ds), ds, self.config.metrics, self.config.preset, self.config.conventions)

    # ------------------------------------------------------------------ checkpoints
    @property
    def checkpoint_path(self) -> Path | None:
        d = self.config.checkpoint_dir
        return None if d is None else Path(d) / CHECKPOINT_NAME

    def _last_good_checkpoint(self) -> str | None:
        path = self.checkpoint_path
        return str(path) if path is not None and path.exists() else None

    def _config_fingerprint(self) -> dict[str, Any]:
        return {k: v for k, v in self.config.to_dict().items() if k not in _RESUME_FREE_KEYS}

    def _fingerprints(self, train_ds, valid_ds) -> dict[str, Any]:
        """What a checkpoint must have been written with to be resumed: the data, the loss, the model
        and the configuration (hashes of the data, descriptions of the rest)."""
        return {
            "train_data": data_fingerprint(train_ds),
            "valid_data": data_fingerprint(valid_ds),
            "loss": loss_fingerprint(self.loss),
            "model": model_fingerprint(self.model),
            "config": self._config_fingerprint(),
        }

    def _state(self, epochs_done: int) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "epochs_done": epochs_done,
            "next_sampler_epoch": epochs_done,
            "seed": int(self.config.seed),
            "model": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            **self.stopping.state_dict(),
            "history": self.history,
            "rng": rng_state(),
            "fingerprints": self._fingerprints_now,
        }

    def _restore(self, ckpt: dict[str, Any]) -> int:
        path = self.checkpoint_path
        if ckpt.get("format") == "ltr-checkpoint-1":
            raise LtrError(f"{path}: written by an older ltr, without the fingerprints of its data, loss and model "
                           "that a resume is checked against; delete it (or use another checkpoint folder) to start afresh")
        if ckpt.get("format") != CHECKPOINT_FORMAT:
            raise LtrError(f"{path}: not an ltr checkpoint")
        changed = _changed_fingerprints(ckpt.get("fingerprints"), self._fingerprints_now)
        if changed:
            raise LtrError(f"{path}: cannot resume: {'; '.join(changed)}, since the run that wrote it (its best "
                           "epoch was judged on that run's settings); use another checkpoint folder, or delete it "
                           "to start afresh")
        try:
            try:
                self.model.load_state_dict(ckpt["model"])
            except RuntimeError as exc:
                raise LtrError(f"{path}: checkpoint does not fit this model: {' '.join(str(exc).split())}") from None
            self.optimizer.load_state_dict(ckpt["optimizer"])
            self.stopping.load_state_dict(ckpt)
            self.history = list(ckpt["history"])
            set_rng_state(ckpt["rng"])
            done = int(ckpt["epochs_done"])
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as exc:
            raise LtrError(f"{path}: damaged checkpoint ({type(exc).__name__}: {' '.join(str(exc).split())[:160]}); "
                           "delete it to start afresh") from None
        if self._announces():  # a resumed run says so: its first epochs are not trained again
            print(f"resuming from {path} at epoch {done + 1} ({done} of {self.config.epochs} epochs done)", file=sys.stderr)
        return done

    def _announces(self) -> bool:
        """Whether this process prints notes (the distributed trainer: rank 0 only)."""
        return True

    # ------------------------------------------------------------------ training
    def fit(self, train_ds, valid_ds, test_ds=None) -> FitResult:
        """Train on ``train_ds``, validate on ``valid_ds`` each epoch; return the best epoch's result.

        ``test_ds`` (optional) is scored once, with the best weights, after training. The steps, in
        order: :meth:`_check_data`, :meth:`_resume_or_seed`, :meth:`_open_logger`, then per epoch
        :meth:`run_epoch` (:meth:`train_epoch`, :meth:`validate`, the early-stopping update) and
        :meth:`_end_epoch` (logging, checkpoint), and last :meth:`_finish` (best weights, test set).
        """
        t0 = time.perf_counter()
        if self.config.batch_size == "auto":  # fixed here, so checkpoints, logs and summaries hold the number
            self.config = dataclasses.replace(self.config, batch_size=auto_batch_size(train_ds.n_queries))
        cfg = self.config
        self._check_data(train_ds, valid_ds, test_ds)
        self.stopping = EarlyStopping(cfg.monitor, higher_is_better(cfg.monitor), cfg.min_delta, cfg.patience)
        self.history = []
        self.stop_reason = None
        start = self._resume_or_seed(train_ds, valid_ds)
        self._open_logger(start)
        try:
            stopped_early = self._run_epochs(train_ds, valid_ds, start)
            if self.stopping.best_model is not None:
                self.model.load_state_dict(self.stopping.best_model)
            return self._finish(test_ds, stopped_early, t0)
        finally:
            if self.logger is not None:
                self.logger.close()
                self.logger = None

    def _check_data(self, train_ds, valid_ds, test_ds) -> None:
        """Refuse empty sets, a feature count the model does not take, and unknown metric names."""
        n_features = getattr(self.model, "n_features", None)
        for name, ds in (("training", train_ds), ("validation", valid_ds), ("test", test_ds)):
            if ds is None:
                continue
            if n_features is not None and ds.n_features != n_features:
                raise LtrError(f"the {name} set has {ds.n_features} features, the model expects {n_features}")
            if ds.n_queries == 0:
                raise LtrError(f"the {name} set has no queries")
        check_metric_names(self.config.metrics, self.config.preset, self.config.conventions)

    def _resume_or_seed(self, train_ds, valid_ds) -> int:
        """Restore the checkpoint when resuming (returns the epochs it had finished), else seed."""
        path = self.checkpoint_path
        self._fingerprints_now = self._fingerprints(train_ds, valid_ds) if path is not None else None
        if self.config.resume and path is not None and path.exists():
            return self._restore(load_checkpoint(path))
        seed_everything(self.config.seed)
        return 0

    def _open_logger(self, start: int) -> None:
        """Open TensorBoard when ``log_dir`` is set.

        A resumed run whose log folder already holds the killed run's events keeps them and hides its
        later, unfinished epochs (purge_step). A fresh folder (e.g. ``ltr train``'s new run folder)
        gets the restored history's per-epoch scalars written again, so its curves start at epoch 1;
        only the earlier epochs' score histograms are missing (scores are not checkpointed).
        """
        log_dir = self.config.log_dir
        if log_dir is None:
            return
        from ltr.runs.tensorboard_log import TensorBoardLogger

        fresh = not any(Path(log_dir).glob("events.out.tfevents.*"))
        self.logger = TensorBoardLogger(log_dir, purge_step=start + 1 if start and not fresh else None)
        if start and fresh:
            for record in self.history:
                self._log_epoch(record, None)

    def _run_epochs(self, train_ds, valid_ds, start: int) -> bool:
        """Epochs ``start + 1 .. epochs`` until early stopping; returns whether it stopped early."""
        from tqdm.auto import tqdm

        cfg = self.config
        if self.stopping.should_stop:
            return True  # the checkpointed run had already stopped
        bar = tqdm(range(start, cfg.epochs), desc=self.progress_label, disable=not cfg.progress, initial=start, total=cfg.epochs)
        try:
            for e in bar:
                record, valid_scores = self.run_epoch(train_ds, valid_ds, e)
                self._end_epoch(record, valid_scores)
                bar.set_postfix(loss=f"{record['train_loss']:.4f}", **{cfg.monitor: f"{record['valid'][self.stopping.monitor]:.4f}"})
                for callback in self.callbacks:
                    callback(self, record["epoch"], record)
                if self.stopping.should_stop or self.stop_reason is not None:
                    return True
            return False
        finally:
            bar.close()

    def run_epoch(self, train_ds, valid_ds, e: int) -> tuple[dict[str, Any], np.ndarray]:
        """One epoch (0-based ``e``): train, validate, update the early-stopping state; returns the
        epoch's history record and the validation scores."""
        t_epoch = time.perf_counter()
        epoch = e + 1
        train_loss = self.train_epoch(train_ds, e)
        valid, valid_scores = self.validate(valid_ds, epoch)
        improved = self.stopping.update(epoch, valid[self.stopping.monitor], valid, self.model)
        record = {
            "epoch": epoch,
            "train_loss": train_loss,
            "valid_loss": self.validation_loss(valid_ds, valid_scores),
            "valid": valid,
            "improved": bool(improved),
            "seconds": time.perf_counter() - t_epoch,
        }
        self.history.append(record)
        return record, valid_scores

    def train_epoch(self, train_ds, e: int) -> float:
        """One pass over the training queries in the batches of sampler epoch ``e``; the mean batch loss."""
        from tqdm.auto import tqdm

        from ltr.data.batching import iterate_batches

        cfg = self.config
        self.model.train()
        use_weights = getattr(train_ds, "weights", None) is not None
        batches = iterate_batches(
            train_ds, cfg.batch_size, shuffle=True, seed=cfg.seed, epoch=e, device=self.device, bucket_size=cfg.bucket_size
        )
        n_batches = -(-train_ds.n_queries // cfg.batch_size)
        total, count = 0.0, 0
        for b, batch in enumerate(tqdm(batches, desc=f"epoch {e + 1}", total=n_batches, leave=False, disable=not cfg.progress), 1):
            total += self._train_step(batch, use_weights, b, e + 1)
            count += 1
        return total / max(count, 1)

    def _draws(self, batch, epoch: int):
        """The keyed random draws of a training forward pass over ``batch`` (:mod:`ltr.train.draws`)."""
        from ltr.train.draws import QueryDraws, keyed

        if not self.model.training:
            return keyed(None)
        return keyed(QueryDraws(self.config.seed, epoch, batch.query_index, batch.mask.sum(dim=1)))

    def _batch_loss(self, batch, use_weights: bool, b: int, epoch: int) -> torch.Tensor:
        with self._draws(batch, epoch):
            scores = self.model(batch.features, mask=batch.mask)
        return self._loss_of(scores, batch.labels, batch.mask, batch.weights if use_weights else None, b, epoch)

    def _loss_of(self, scores, labels, mask, weights, b: int, epoch: int) -> torch.Tensor:
        try:
            if weights is not None:
                return self.loss(scores, labels, mask, weights=weights)
            return self.loss(scores, labels, mask)
        except ValueError as exc:  # the loss refuses this data (e.g. BCE on graded labels)
            raise LtrError(f"the loss {type(self.loss).__name__} refused batch {b} of epoch {epoch}: {exc}") from None

    def _train_step(self, batch, use_weights: bool, b: int, epoch: int) -> float:
        """Loss of batch ``b``, one optimiser step; the loss value (NaN / inf stops training)."""
        value = self._batch_loss(batch, use_weights, b, epoch)
        v = float(value.detach())
        if not math.isfinite(v):
            raise NonFiniteLossError(epoch, b, v, self._last_good_checkpoint())
        if not value.requires_grad:  # e.g. a batch of empty queries: nothing to learn
            return v
        self.optimizer.zero_grad(set_to_none=True)
        value.backward()
        if self.config.grad_clip is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.optimizer.step()
        return v

    def validate(self, valid_ds, epoch: int) -> tuple[dict[str, float], np.ndarray]:
        """Score the validation set and judge it; returns ``{stamped name: mean}`` and the scores."""
        cfg = self.config
        valid_scores = self.predict(valid_ds)
        n_bad = int(np.count_nonzero(~np.isfinite(valid_scores)))
        if n_bad:
            raise NonFiniteScoresError(epoch, n_bad, self._last_good_checkpoint())
        ev = evaluate_scores(valid_scores, valid_ds, cfg.metrics, cfg.preset, cfg.conventions, where="validation")
        self.stopping.monitor = ev.names[cfg.monitor]
        return {k: float(v) for k, v in ev.mean.items()}, valid_scores

    @torch.no_grad()
    def validation_loss(self, valid_ds, valid_scores: np.ndarray | None = None) -> float | None:
        """The training loss on the validation set (eval mode, batches in length order): the mean batch
        loss, as ``train_loss``; None when the loss refuses the validation data (e.g. BCE on graded
        labels while training on clicks), which the validation metrics do not need.

        ``valid_scores`` (the epoch's validation scores, :meth:`validate`) are padded into those batches
        instead of scoring the set a second time; without them the model scores each batch.
        """
        from ltr.data.batching import BucketBatchSampler, batch_rows, iterate_batches

        was_training = self.model.training
        self.model.eval()
        use_weights = getattr(valid_ds, "weights", None) is not None
        total, count = 0.0, 0
        try:
            size = AUTO_BATCH["max"] if self.config.batch_size == "auto" else self.config.batch_size  # validate() before fit()
            if valid_scores is None:
                for b, batch in enumerate(iterate_batches(valid_ds, size, device=self.device), 1):
                    total += float(self._batch_loss(batch, use_weights, b, 0))
                    count += 1
            else:
                columns = (valid_scores, valid_ds.labels, valid_ds.weights if use_weights else None)
                for b, qi in enumerate(BucketBatchSampler(valid_ds.query_lengths, size, shuffle=False).batches(), 1):
                    rows, mask = batch_rows(valid_ds.query_offsets, qi)
                    scores, labels, weights = (
                        None if values is None else torch.from_numpy(np.where(mask, values[rows], 0.0).astype(np.float32)).to(self.device)
                        for values in columns)
                    total += float(self._loss_of(scores, labels, torch.from_numpy(mask).to(self.device), weights, b, 0))
                    count += 1
        except LtrError:
            return None
        finally:
            self.model.train(was_training)
        return total / max(count, 1)

    def _end_epoch(self, record: dict[str, Any], valid_scores: np.ndarray) -> None:
        """Log the finished epoch to TensorBoard and write the checkpoint."""
        if self.logger is not None:
            self._log_epoch(record, valid_scores if self.config.histograms else None)
        if self.checkpoint_path is not None:
            save_checkpoint(self.checkpoint_path, self._state(record["epoch"]))

    def _finish(self, test_ds, stopped_early: bool, t0: float) -> FitResult:
        """Score the test set with the best weights (already loaded); close the TensorBoard record."""
        cfg = self.config
        test_metrics = None
        if test_ds is not None:
            ev = evaluate_scores(self.predict(test_ds), test_ds, cfg.metrics, cfg.preset, cfg.conventions, where="test")
            test_metrics = {k: float(v) for k, v in ev.mean.items()}
        result = FitResult(
            best_epoch=int(self.stopping.best_epoch),
            best_value=float(self.stopping.best_value),
            monitor=self.stopping.monitor,
            history=list(self.history),
            model=self.model,
            valid_metrics=dict(self.stopping.best_metrics),
            test_metrics=test_metrics,
            epochs_run=len(self.history),
            stopped_early=stopped_early,
            wall_time_s=time.perf_counter() - t0,
            higher_is_better=self.stopping.higher_is_better,
            stop_reason=self.stop_reason,
        )
        if self.logger is not None:
            final = {"valid": result.valid_metrics}
            if test_metrics is not None:
                final["test"] = test_metrics
                self.logger.metrics("test", test_metrics, result.best_epoch)
            hp = {**self._hparam_config(), **self.hparams, "best_epoch": result.best_epoch}
            self.logger.hparams(hp, final, result.best_epoch)
            result.tensorboard_tags = dict(self.logger.tags)
            self.logger.flush()
        return result

    def _log_epoch(self, record: dict[str, Any], valid_scores: np.ndarray | None) -> None:
        self.logger.scalar("train/loss", record["train_loss"], record["epoch"])
        if record.get("valid_loss") is not None:  # absent from checkpoints written before it was logged
            self.logger.scalar("valid/loss", record["valid_loss"], record["epoch"])
        self.logger.metrics("valid", record["valid"], record["epoch"])
        if valid_scores is not None:
            self.logger.histogram("valid/scores", valid_scores, record["epoch"])
        self.logger.flush()

    def _hparam_config(self) -> dict[str, Any]:
        d = self.config.to_dict()
        keep = ("epochs", "batch_size", "lr", "weight_decay", "patience", "monitor", "seed", "grad_clip", "preset")
        return {k: d[k] for k in keep}

CHECKPOINT_FORMAT = "ltr-checkpoint-2"


def data_fingerprint(ds) -> str:
    """SHA-1 of what training sees of a data set: features, labels, query offsets and weights."""
    from ltr.data.store import row_blocks

    h = hashlib.sha1()
    for arr in (ds.features, ds.labels, ds.query_offsets, getattr(ds, "weights", None)):
        if arr is None:
            h.update(b"-")
            continue
        h.update(f"{arr.dtype.str}{arr.shape}".encode())
        for _, block in row_blocks(arr, 65536):  # the same bytes in order: a store is hashed without loading it
            h.update(block)
    return h.hexdigest()


def loss_fingerprint(loss) -> str:
    """The loss's class and settings, e.g. ``losses.lambdarank.LambdaRank(sigma=1.0, k=None, ...)``."""
    extra = loss.extra_repr() if isinstance(loss, nn.Module) else ""
    return f"{type(loss).__module__}.{type(loss).__qualname__}({extra})"


def model_fingerprint(model) -> dict[str, Any]:
    """The model's class, description (``config()`` when it has one) and parameter shapes."""
    describe = getattr(model, "config", None)
    return {
        "class": f"{type(model).__module__}.{type(model).__qualname__}",
        "config": describe() if callable(describe) else None,
        "shapes": {k: list(v.shape) for k, v in model.state_dict().items()},
    }


def _changed_fingerprints(theirs: Any, mine: dict[str, Any]) -> list[str]:
    """What differs between a checkpoint's fingerprints and this run's, in words."""
    if not isinstance(theirs, dict):
        return ["the checkpoint holds no fingerprints to check"]
    out = []
    for key, what in (("train_data", "the training data"), ("valid_data", "the validation data")):
        if theirs.get(key) != mine[key]:
            out.append(f"{what} changed")
    if theirs.get("loss") != mine["loss"]:
        out.append(f"the loss changed (checkpoint: {theirs.get('loss')}, now: {mine['loss']})")
    if _norm(theirs.get("model")) != _norm(mine["model"]):
        t, m = theirs.get("model") or {}, mine["model"]
        out.append(f"the model changed (checkpoint: {t.get('config') or t.get('class')}, now: {m['config'] or m['class']})")
    cfg_t, cfg_m = theirs.get("config") or {}, mine["config"]
    diff = sorted(k for k in set(cfg_t) | set(cfg_m) if _norm(cfg_t.get(k)) != _norm(cfg_m.get(k)))
    if diff:
        out.append(f"the configuration differs in {', '.join(diff)} (checkpoint: {[cfg_t.get(k) for k in diff]}, "
                   f"now: {[cfg_m.get(k) for k in diff]})")
    return out


def _norm(v: Any) -> Any:
    # lists and tuples compare equal after a checkpoint round trip
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    return v


@torch.no_grad()
def predict_scores(model: nn.Module, features: np.ndarray, *, query_offsets=None, device: torch.device | str = "cpu",
                   rows: int = 65536) -> np.ndarray:
    """Score flat rows [N, F] in blocks of ``rows`` (eval mode; the model's train/eval mode is restored).

    A listwise model (``model.listwise``, e.g. the context-aware scorer) scores whole queries:
    ``query_offsets`` ([Q + 1], as ``RankingDataset.query_offsets``) is then required, and
    consecutive queries are padded into batches of at most ``rows`` cells (at least one query).
    Only one block is in memory at a time: memory-mapped features (a store) are read block by block
    and their pages released as the pass goes (:mod:`ltr.data.store`).
    """
    from ltr.data.store import row_blocks

    was_training = model.training
    model.eval()
    try:
        features = features if hasattr(features, "shape") else np.asarray(features)
        if getattr(model, "listwise", False):
            if query_offsets is None:
                raise LtrError(f"{type(model).__name__} scores whole queries: pass query_offsets to predict_scores")
            return _predict_lists(model, features, np.asarray(query_offsets, dtype=np.int64), device, rows)
        out = np.empty(features.shape[0], dtype=np.float64)
        for start, x in row_blocks(features, rows):
            block = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device)
            out[start : start + len(block)] = model(block).double().cpu().numpy()
        return out
    finally:
        model.train(was_training)


def _predict_lists(model: nn.Module, x: np.ndarray, offsets: np.ndarray, device, rows: int) -> np.ndarray:
    """Scores of a listwise model, query by query, padded batches of consecutive queries."""
    from ltr.data.store import is_mapped, release_pages

    mapped = is_mapped(x)
    if len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(x) or np.any(np.diff(offsets) < 0):
        raise LtrError(f"query_offsets must rise from 0 to the number of rows ({len(x)})")
    out = np.empty(len(x), dtype=np.float64)
    lengths = np.diff(offsets)
    q, n_queries = 0, len(lengths)
    while q < n_queries:
        end, longest = q + 1, int(lengths[q])
        while end < n_queries and (end + 1 - q) * max(longest, int(lengths[end])) <= rows:
            longest = max(longest, int(lengths[end]))
            end += 1
        batch = np.zeros((end - q, max(longest, 1), x.shape[1]), dtype=np.float32)
        mask = np.zeros(batch.shape[:2], dtype=bool)
        for b, j in enumerate(range(q, end)):
            batch[b, : lengths[j]] = x[offsets[j] : offsets[j + 1]]
            mask[b, : lengths[j]] = True
        scores = model(torch.from_numpy(batch).to(device), torch.from_numpy(mask).to(device)).double().cpu().numpy()
        out[offsets[q] : offsets[end]] = scores[mask]
        if mapped:
            release_pages(x)
        q = end
    return out
