"""Data-parallel training on several processes and machines with ``torch.distributed`` (DDP).

N processes with a global batch of B queries train as one process with batch B does::

    from ltr.train.distributed import DistributedTrainer, launch

    def job(seed):                       # runs in every process (a module-level function)
        train, valid, _ = make_synthetic_splits(n_queries=2000, seed=seed)   # each rank reads the same data
        seed_everything(seed)
        model = MLPScorer(train.n_features)
        return DistributedTrainer(model, losses.LambdaRank(), TrainConfig(epochs=5)).fit(train, valid).valid_metrics

    launch(job, 2, 0)                    # 2 processes on this machine; rank 0's return value

Under an external launcher (``torchrun --nnodes M --nproc-per-node N ...``, env:// rendezvous) wrap
the job in ``with process_group():`` instead of calling :func:`launch`.

How one global step is shared (rank r of W):

- every rank draws the same batches (the length-bucketed sampler is a pure function of
  ``(seed, epoch)``) and takes the r-th of W contiguous slices of each batch's queries;
- the loss module is run with ``reduction="none"``; each rank sums its per-query (pointwise: per-item)
  terms S_r and counts C_r, the queries holding a real item (pointwise: the real items);
- one all-reduce gives S = sum S_r and C = sum C_r: the step's loss is S / C, exactly the
  ``reduction="mean"`` value of the whole batch (``"sum"``: S);
- rank r back-propagates ``S_r * W / C``; DDP averages gradients over the W ranks, so the gradient is
  ``sum_r grad S_r / C = grad (S / C)``, the one-process gradient (only the order of floating-point
  sums differs). Clipping and Adam then see the same gradient as one process.

Validation and test scores are computed on W disjoint shares of the queries (balanced by rows) and
gathered, so every rank computes the same metrics as one process and takes the same early-stopping
decision. Rank 0 alone writes checkpoints and TensorBoard; a checkpoint holds the plain (unwrapped)
model and the optimiser state, so a run checkpointed with N processes resumes with M (or with the
plain :class:`~ltr.train.trainer.Trainer`).

Input noise and dropout masks are drawn per query (:mod:`ltr.train.draws`), so each item gets the
values one process gives it whichever rank scores it. Not identical to one process: batch
normalisation, whose per-rank statistics would differ; a batch-norm model is refused with several
processes.

Backends: gloo on CPU, NCCL on CUDA (rank r uses ``cuda:LOCAL_RANK``). A worker that dies (killed,
or an exception) stops the whole job: the launcher stops the others and :func:`launch` raises
:class:`WorkerFailedError` naming the rank; checkpoints are written atomically after each epoch, so
the last one is intact.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from ltr.base.errors import LtrError
from ltr.base.processes import worker_start_method
from ltr.runs.shares import query_shares
from ltr.train.checkpoint import load_checkpoint
from ltr.train.trainer import NonFiniteLossError, Trainer, predict_scores, seed_everything

__all__ = [
    "DistributedTrainer",
    "Context",
    "context",
    "launch",
    "process_group",
    "launched_by_torchrun",
    "backend_for",
    "query_shares",
    "WorkerFailedError",
]


class WorkerFailedError(LtrError):
    """A worker process of a distributed job failed; the job was stopped."""

    def __init__(self, rank: int, pid: int, what: str):
        self.rank, self.pid, self.what = rank, pid, what
        super().__init__(f"worker rank {rank} (pid {pid}) {what}; the other workers were stopped")


@dataclass(frozen=True)
class Context:
    """Where this process stands in the job (``world_size`` 1 and rank 0 without a process group)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    backend: str | None = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1


def context() -> Context:
    """The current process's :class:`Context` (from the process group and the launcher's variables)."""
    if not (dist.is_available() and dist.is_initialized()):
        return Context()
    return Context(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", 1)),
        backend=str(dist.get_backend()),
    )


def launched_by_torchrun() -> bool:
    """Whether this process is a worker started by torchrun / :func:`launch` (env:// variables set)."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def backend_for(device: str) -> str:
    """``"nccl"`` for a CUDA device (``"auto"`` with CUDA present), else ``"gloo"``.

    >>> backend_for("cpu"), backend_for("cuda:1")
    ('gloo', 'nccl')
    """
    device = str(device)
    if device.startswith("cuda") or (device == "auto" and torch.cuda.is_available()):
        return "nccl"
    return "gloo"


@contextlib.contextmanager
def process_group(backend: str | None = None, device: str = "cpu") -> Iterator[Context]:
    """Join the job described by the launcher's environment (env:// rendezvous); leave it at exit.

    Outside a launcher (no ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT``) nothing is
    initialised and the context is one process. ``backend`` defaults to :func:`backend_for` ``(device)``.
    """
    if not launched_by_torchrun() or (dist.is_available() and dist.is_initialized()):
        yield context()
        return
    backend = backend or backend_for(device)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group(backend=backend, init_method="env://")
    try:
        yield context()
    finally:
        dist.destroy_process_group()


class _WorkerUserError(Exception):
    """An :class:`LtrError` raised in a worker, carried to the launcher by name (see :func:`launch`)."""


def _worker_entry(fn: Callable[..., Any], backend: str | None, device: str, args: tuple) -> Any:
    # cores / W threads per process unless the user chose: W processes share the machine's cores.
    if "OMP_NUM_THREADS" not in os.environ:
        local = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // local))
    try:
        with process_group(backend, device):
            return fn(*args)
    except LtrError as exc:  # a user error (bad input, NaN loss...): the launcher re-raises it as one
        _wait_for_the_launcher()
        raise _WorkerUserError(str(exc)) from None
    except BaseException:
        _wait_for_the_launcher()
        raise


#: seconds a failing worker waits before it exits (:func:`_wait_for_the_launcher`)
FAILURE_GRACE_S = 1.0


def _wait_for_the_launcher() -> None:
    """Every failing worker waits the same short time before it exits, so the launcher, which reports the first
    worker it finds dead, finds the one that failed first: a worker killed by a signal (it cannot wait) rather
    than the peer that lost its connection to it a few milliseconds later (a forkserver relays each exit)."""
    if int(os.environ.get("WORLD_SIZE", 1)) > 1:
        time.sleep(FAILURE_GRACE_S)


def launch(fn: Callable[..., Any], nproc: int, *args: Any, backend: str | None = None, device: str = "cpu",
           start_method: str | None = None) -> Any:
    """Run ``fn(*args)`` in ``nproc`` new processes on this machine, joined in one process group.

    Built on ``torch.distributed.launcher`` (the engine of torchrun): a c10d rendezvous on a free
    local port, no restarts. ``fn`` must be importable by the children (a module-level function) and
    its arguments picklable. Returns rank 0's return value. If any worker fails (an exception, a
    signal) the others are stopped and :class:`WorkerFailedError` names the first failure; a
    worker's :class:`~ltr.base.errors.LtrError` is raised again here as an ``LtrError`` with its message.

    ``start_method`` None: ``forkserver`` where the platform has it (else ``spawn``), its server
    importing torch and ``fn``'s module once (:func:`ltr.base.processes.worker_start_method`).
    """
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if int(nproc) < 1:
        raise LtrError(f"nproc must be >= 1, got {nproc}")
    if start_method is None:
        # torch._dynamo too: every worker's first optimizer imports it (torch.optim's own guard), 1.3 CPU s each
        start_method = worker_start_method(["torch", "torch._dynamo", __name__, fn.__module__])
    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=int(nproc), run_id=uuid.uuid4().hex, rdzv_backend="c10d",
        rdzv_endpoint="localhost:0", max_restarts=0, monitor_interval=0.1, start_method=start_method,
    )
    # failures are reported once, below, not as the agent's tracebacks and notices
    quiet = [logging.getLogger(name) for name in ("torch.distributed.elastic", "torch.multiprocessing")]
    levels = [q.level for q in quiet]
    for q in quiet:
        q.setLevel(logging.CRITICAL)
    try:
        results = elastic_launch(config, _worker_entry)(fn, backend, device, args)
    except ChildFailedError as exc:
        error = _failure_error(exc)
        prefix = f"failed: {_WorkerUserError.__name__}: "
        if error.what.startswith(prefix):  # a worker's LtrError: the user sees its own message
            raise LtrError(error.what[len(prefix):]) from None
        raise error from None
    finally:
        for q, level in zip(quiet, levels):
            q.setLevel(level)
    return results[0]


def _failure_error(exc) -> WorkerFailedError:
    # A worker killed by a signal is the cause: its peers then fail on the closed connection, and one of them
    # may write its error before the launcher notices the death. Otherwise the first failure is.
    rank, failure = min(exc.failures.items(), key=lambda kv: (kv[1].exitcode >= 0, kv[1].timestamp, kv[0]))
    if failure.exitcode < 0:
        return WorkerFailedError(rank, failure.pid, f"was killed by signal {failure.signal_name()}")
    message = failure.message
    if isinstance(message, dict):
        message = message.get("message", message)
    first = str(message).strip().splitlines()[0] if str(message).strip() else f"exit code {failure.exitcode}"
    return WorkerFailedError(rank, failure.pid, f"failed: {first}")


def _per_item_loss(loss: nn.Module) -> tuple[nn.Module, str]:
    """A shallow copy of ``loss`` that returns unreduced terms, and the reduction it had."""
    reduction = getattr(loss, "reduction", None)
    if reduction not in ("mean", "sum"):
        raise LtrError(
            f"distributed training needs a loss with reduction 'mean' or 'sum' (found {reduction!r} on "
            f"{type(loss).__name__}) so that the ranks' shares can be normalised globally"
        )
    local = copy.copy(loss)
    local.reduction = "none"
    return local, reduction


class DistributedTrainer(Trainer):
    """:class:`~ltr.train.trainer.Trainer` over the current process group (see the module docstring).

    Without a process group (or with one process) it is the plain trainer. Every rank must call
    :meth:`fit` (and :meth:`predict`) with the same data: scoring is shared and gathered.
    """

    def __init__(self, model: nn.Module, loss: nn.Module, config=None, **kwargs):
        from ltr.train.config import TrainConfig

        self.ctx = context()
        config = config or TrainConfig()
        if self.ctx.active:
            changes: dict[str, Any] = {}
            if self.ctx.backend == "nccl" or str(config.device).startswith("cuda"):
                if torch.cuda.is_available() and self.ctx.local_rank >= torch.cuda.device_count():
                    raise LtrError(f"local rank {self.ctx.local_rank} has no GPU ({torch.cuda.device_count()} visible)")
                changes["device"] = f"cuda:{self.ctx.local_rank}"
            if not self.ctx.is_main:
                changes.update(progress=False, log_dir=None)  # rank 0 alone writes TensorBoard
            config = dataclasses.replace(config, **changes)
        super().__init__(model, loss, config, **kwargs)
        self.ddp: nn.Module | None = None
        if self.ctx.active:
            self._local_loss, self._reduction = _per_item_loss(self.loss)
            self._comm_device = self.device if self.ctx.backend == "nccl" else torch.device("cpu")

    # ------------------------------------------------------------------ set-up
    def _check_data(self, train_ds, valid_ds, test_ds) -> None:
        super()._check_data(train_ds, valid_ds, test_ds)
        if self.ctx.active:
            from ltr.train.models import MaskedBatchNorm1d

            if any(isinstance(m, MaskedBatchNorm1d) for m in self.model.modules()):
                raise LtrError(
                    "batch normalisation cannot be trained on several processes here: each rank's batch "
                    "statistics would differ from one process's; train it with one process"
                )

    def _announces(self) -> bool:
        return not self.ctx.active or self.ctx.is_main

    def _resume_or_seed(self, train_ds, valid_ds) -> int:
        """Rank 0 reads the checkpoint and sends it to every rank; then the model is wrapped in DDP."""
        if not self.ctx.active:
            return super()._resume_or_seed(train_ds, valid_ds)
        path = self.checkpoint_path
        self._fingerprints_now = self._fingerprints(train_ds, valid_ds) if path is not None else None
        box: list[Any] = [None]
        if self.ctx.is_main and self.config.resume and path is not None and path.exists():
            box[0] = load_checkpoint(path)
        dist.broadcast_object_list(box, src=0, device=self._comm_device)
        if box[0] is None:
            seed_everything(self.config.seed)
            start = 0
        else:
            start = self._restore(box[0])
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.device.index] if self.device.type == "cuda" else None
        # Buffers (the fitted input transform) are synced once, at wrapping; they never change after.
        self.ddp = DistributedDataParallel(self.model, device_ids=ids, forward_sync_buffers=False)
        return start

    # ------------------------------------------------------------------ training
    def train_epoch(self, train_ds, e: int) -> float:
        """The batches of sampler epoch ``e`` (as one process draws them), this rank's slice of each."""
        if not self.ctx.active:
            return super().train_epoch(train_ds, e)
        from tqdm.auto import tqdm

        from ltr.data.batching import BucketBatchSampler, make_batch

        cfg = self.config
        self.model.train()
        use_weights = getattr(train_ds, "weights", None) is not None
        sampler = BucketBatchSampler(train_ds.query_lengths, cfg.batch_size, shuffle=True, seed=cfg.seed, bucket_size=cfg.bucket_size)
        sampler.set_epoch(e)
        batches = sampler.batches()
        total = 0.0
        for b, queries in enumerate(tqdm(batches, desc=f"epoch {e + 1}", leave=False, disable=not cfg.progress), 1):
            share = np.array_split(queries, self.ctx.world_size)[self.ctx.rank]
            total += self._train_step(make_batch(train_ds, share, device=self.device), use_weights, b, e + 1)
        return total / max(len(batches), 1)

    def _local_terms(self, batch, use_weights: bool, b: int, epoch: int) -> tuple[torch.Tensor, float, bool]:
        """This rank's summed loss terms (connected to every parameter), their count, and whether
        the terms themselves carry a gradient."""
        with self._draws(batch, epoch):  # keyed by query: this rank's items get one process's noise
            scores = self.ddp(batch.features, mask=batch.mask)
        anchor = 0.0 * scores.sum()  # every rank's graph reaches every parameter, as DDP requires
        if batch.batch_size == 0:
            return anchor, 0.0, False
        try:
            if use_weights and batch.weights is not None:
                terms = self._local_loss(scores, batch.labels, batch.mask, weights=batch.weights)
            else:
                terms = self._local_loss(scores, batch.labels, batch.mask)
        except ValueError as exc:
            raise LtrError(f"the loss {type(self.loss).__name__} refused batch {b} of epoch {epoch}: {exc}") from None
        # [B] per query (pairwise, listwise) or [B, L] per item (pointwise, 0 on padding)
        count = batch.mask.any(dim=1).sum() if terms.dim() == 1 else batch.mask.sum()
        return terms.sum() + anchor, float(count), bool(terms.requires_grad)

    def _train_step(self, batch, use_weights: bool, b: int, epoch: int) -> float:
        """One global step: all-reduce the terms' sum and count, back-propagate this rank's share."""
        if not self.ctx.active:
            return super()._train_step(batch, use_weights, b, epoch)
        local_sum, local_count, has_grad = self._local_terms(batch, use_weights, b, epoch)
        stats = torch.tensor([float(local_sum.detach()), local_count, float(has_grad)], dtype=torch.float64, device=self._comm_device)
        dist.all_reduce(stats)
        total, count, any_grad = (float(v) for v in stats.cpu())
        scale = 1.0 / max(count, 1.0) if self._reduction == "mean" else 1.0
        value = total * scale
        if not np.isfinite(value):
            raise NonFiniteLossError(epoch, b, value, self._last_good_checkpoint())
        self.optimizer.zero_grad(set_to_none=True)
        # DDP divides the summed gradients by the world size: multiply it back.
        (local_sum * (scale * self.ctx.world_size)).backward()
        if any_grad == 0:
            return value  # no rank had a term with a gradient: one process would not step either
        if self.config.grad_clip is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.optimizer.step()
        return value

    # ------------------------------------------------------------------ scoring, logging
    @torch.no_grad()
    def predict(self, ds) -> np.ndarray:
        """Scores [N]: each rank scores its share of the queries, then all shares are gathered."""
        if not self.ctx.active:
            return super().predict(ds)
        offsets = np.asarray(ds.query_offsets, dtype=np.int64)
        shares = query_shares(offsets, self.ctx.world_size)
        rows = offsets[shares]
        lo, hi = int(rows[self.ctx.rank]), int(rows[self.ctx.rank + 1])
        mine_offsets = offsets[shares[self.ctx.rank] : shares[self.ctx.rank + 1] + 1] - lo  # listwise models need them
        mine = predict_scores(self.model, ds.features[lo:hi], query_offsets=mine_offsets, device=self.device, rows=self.config.eval_rows)
        width = int(np.diff(rows).max())
        buf = torch.zeros(width, dtype=torch.float64, device=self._comm_device)
        buf[: hi - lo] = torch.from_numpy(mine).to(self._comm_device)
        parts = [torch.empty_like(buf) for _ in range(self.ctx.world_size)]
        dist.all_gather(parts, buf)
        return np.concatenate([p.cpu().numpy()[: int(rows[r + 1] - rows[r])] for r, p in enumerate(parts)])

    def _end_epoch(self, record: dict[str, Any], valid_scores: np.ndarray) -> None:
        if self.ctx.is_main:  # rank 0 alone writes TensorBoard and the checkpoint
            super()._end_epoch(record, valid_scores)
