"""TensorBoard logging for training runs (``torch.utils.tensorboard.SummaryWriter``) and, without
torch, for the runs that log only scalars and HParams (``ltr gbdt``: :class:`ScalarLogger`).

What is written, one step per epoch (epochs count from 1):

- ``train/loss``: mean training loss of the epoch;
- ``valid/loss``: the same loss on the validation set (eval mode), to see over-fitting beside the metrics;
- ``valid/<stamped metric name>`` for every validation metric, e.g.
  ``valid/ndcg@10[gain=exp2,discount=log2,ideal=min(R,K),empty=skip,ties=stable]``;
- ``valid/scores``: a histogram of the validation scores;
- at the end, the hyper-parameters with the final metrics (the HParams dashboard), the metrics
  under ``hparams/<split>/<stamped name>``.

Tag names. PyTorch's writer stores a tag verbatim (it dropped TensorFlow's character clean-up,
pytorch/pytorch#33133) and TensorBoard's reader accepts any string, so the stamped names, with their
``@ [ ] = , ( )`` characters, are kept as they are. Only ``/`` has a meaning (TensorBoard groups tags
by the text before the first ``/``), so a ``/`` inside a metric name is written as ``%2F`` and a
literal ``%`` as ``%25`` (:func:`metric_tag`). In the TensorBoard web page the tag filter box is a
regular expression: type ``ndcg@10\\[`` to match a literal bracket.

>>> metric_tag("valid", "ndcg@10[gain=exp2]")
'valid/ndcg@10[gain=exp2]'
>>> metric_tag("valid", "p@5[rel=a/b,x=5%]")
'valid/p@5[rel=a%2Fb,x=5%25]'
"""

from __future__ import annotations

import os
import time
from typing import Any, Iterable, Mapping

import numpy as np

__all__ = ["metric_tag", "ScalarLogger", "TensorBoardLogger", "hparam_value", "hparams_summaries", "HISTOGRAM_LIMIT"]

HISTOGRAM_LIMIT = 1e19


def metric_tag(split: str, stamped_name: str) -> str:
    """TensorBoard tag of a metric: ``<split>/<name>`` with ``%`` and ``/`` in the name escaped."""
    return f"{split}/" + stamped_name.replace("%", "%25").replace("/", "%2F")


def hparam_value(value: Any) -> bool | int | float | str:
    """HParams take bool, int, float or str; anything else (None, lists, dicts) is shown as text."""
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def _quiet_writer_threads() -> None:
    """Keep an OSError in TensorBoard's writer thread (a disk full, a file-size limit) from printing
    a thread traceback: the thread keeps the error and the writer raises it in the main thread at
    its next call, where the command reports it in one line. Other threads' errors print as before."""
    import threading

    previous = threading.excepthook
    if getattr(previous, "ltr_tensorboard", False):
        return

    def hook(args) -> None:
        if isinstance(args.exc_value, OSError) and type(args.thread).__name__ == "_AsyncWriterThread":
            return
        previous(args)

    hook.ltr_tensorboard = True
    threading.excepthook = hook


def hparams_summaries(hparams: Mapping[str, bool | int | float | str], metric_tags: Iterable[str]) -> tuple:
    """The HParams dashboard's three summaries: the experiment (each hyper-parameter's name and type,
    the metric tags), the session start (the values) and the session end (success).

    Built from TensorBoard's own protocol buffers, so that writing them needs no torch. ``None``
    values are left out; booleans are booleans, other numbers float64.
    """
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

    start = plugin_data_pb2.SessionStartInfo()
    infos = []
    for name, value in hparams.items():
        if value is None:
            continue
        if isinstance(value, bool):
            start.hparams[name].bool_value, kind = value, "DATA_TYPE_BOOL"
        elif isinstance(value, (int, float)):
            start.hparams[name].number_value, kind = float(value), "DATA_TYPE_FLOAT64"
        else:
            start.hparams[name].string_value, kind = str(value), "DATA_TYPE_STRING"
        infos.append(api_pb2.HParamInfo(name=name, type=api_pb2.DataType.Value(kind)))
    experiment = api_pb2.Experiment(hparam_infos=infos,
                                    metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=t)) for t in metric_tags])
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.Status.Value("STATUS_SUCCESS"))

    def summary(tag: str, **content) -> Summary:
        data = plugin_data_pb2.HParamsPluginData(version=metadata.PLUGIN_DATA_VERSION, **content)
        plugin = SummaryMetadata.PluginData(plugin_name=metadata.PLUGIN_NAME, content=data.SerializeToString())
        return Summary(value=[Summary.Value(tag=tag, metadata=SummaryMetadata(plugin_data=plugin))])

    return (summary(metadata.EXPERIMENT_TAG, experiment=experiment),
            summary(metadata.SESSION_START_INFO_TAG, session_start_info=start),
            summary(metadata.SESSION_END_INFO_TAG, session_end_info=end))


class ScalarLogger:
    """Scalars and HParams in the tag scheme above, written with TensorBoard's own event-file writer.

    No torch: ``ltr gbdt``, which logs nothing else, starts about 2.7 s sooner than through
    ``SummaryWriter`` (importing ``torch.utils.tensorboard`` on the 2-core test machine). An
    ``OSError`` of the writer (a full disk, a file-size limit) names the log folder.
    """

    def __init__(self, log_dir: str | os.PathLike):
        _quiet_writer_threads()
        self.log_dir = str(log_dir)
        self.tags: dict[str, str] = {}
        self._events = self._event_writer()

    def _event_writer(self):
        """The object whose ``add_event(Event)`` appends to this run's event file."""
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        return EventFileWriter(self.log_dir)

    def __getattribute__(self, name: str) -> Any:
        # every method: an OSError of the writer (raised from its thread's error) names the log folder
        value = object.__getattribute__(self, name)
        if name.startswith("_") or not callable(value):
            return value

        def call(*args, **kwargs):
            try:
                return value(*args, **kwargs)
            except OSError as exc:
                if exc.filename is None and exc.errno is not None:
                    raise OSError(exc.errno, exc.strerror, object.__getattribute__(self, "log_dir")) from exc
                raise

        return call

    def _write(self, summary, step: int) -> None:
        from tensorboard.compat.proto.event_pb2 import Event

        self._events.add_event(Event(summary=summary, step=int(step), wall_time=time.time()))

    def scalar(self, tag: str, value: float, step: int) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._write(Summary(value=[Summary.Value(tag=tag, simple_value=float(value))]), step)

    def metrics(self, split: str, values: Mapping[str, float], step: int) -> None:
        for name, value in values.items():
            tag = metric_tag(split, name)
            self.tags[f"{split}:{name}"] = tag
            self.scalar(tag, value, step)

    def hparams(self, hparams: Mapping[str, Any], final: Mapping[str, Mapping[str, float]], step: int) -> None:
        """Write the HParams summaries into this run's own event file (not a timestamped sub-folder).

        ``final``: {split: {stamped name: value}}; written as scalars ``hparams/<split>/<name>`` too,
        because the HParams dashboard reads metric values from scalars with those tags.
        """
        metric_dict = {
            metric_tag(f"hparams/{split}", name): float(v)
            for split, values in final.items()
            for name, v in values.items()
            if v is not None and np.isfinite(v)
        }
        for summary in hparams_summaries({k: hparam_value(v) for k, v in hparams.items()}, metric_dict):
            self._write(summary, step)
        for tag, value in metric_dict.items():
            self.scalar(tag, value, step)

    def flush(self) -> None:
        self._events.flush()

    def close(self) -> None:
        self._events.close()


class TensorBoardLogger(ScalarLogger):
    """:class:`ScalarLogger` through ``SummaryWriter``, with histograms and figures.

    ``purge_step``: when a run resumes after epoch k, events of later epochs left by the killed run
    are hidden by TensorBoard (``SummaryWriter(purge_step=k + 1)``).
    """

    def __init__(self, log_dir: str | os.PathLike, purge_step: int | None = None):
        self._purge_step = purge_step
        super().__init__(log_dir)

    def _event_writer(self):
        """The ``SummaryWriter``'s own file writer (its histograms and figures go to the same file)."""
        from torch.utils.tensorboard import (
            SummaryWriter,  # imported lazily: it is slow to import
        )

        self.writer = SummaryWriter(log_dir=self.log_dir, purge_step=self._purge_step)
        return self.writer._get_file_writer()

    def histogram(self, tag: str, values: np.ndarray, step: int) -> None:
        """A histogram of the finite values; those beyond +-1e19 are drawn at that edge.

        TensorBoard's default buckets end near 1e20: a model whose scores grew past that (a huge
        learning rate) would otherwise make ``add_histogram`` fail with "The histogram is empty".
        """
        values = np.asarray(values, dtype=np.float64)
        values = values[np.isfinite(values)]
        if values.size:
            self.writer.add_histogram(tag, np.clip(values, -HISTOGRAM_LIMIT, HISTOGRAM_LIMIT), step)

    def figure(self, tag: str, fig, step: int) -> None:
        """A matplotlib figure as an image (``SummaryWriter.add_figure``; the figure is closed)."""
        self.writer.add_figure(tag, fig, global_step=step, close=True)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
