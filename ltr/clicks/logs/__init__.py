"""The click log and its files: the floor every other part of :mod:`ltr.clicks` stands on.

:mod:`~ltr.clicks.logs.click_log` (the :class:`~ltr.clicks.logs.click_log.ClickLog` type, ``.npz``),
:mod:`~ltr.clicks.logs.table` (the log schema, Parquet tables), :mod:`~ltr.clicks.logs.reader` (the one
reader of Parquet and CSV logs, in record batches), :mod:`~ltr.clicks.logs.ids`
(indices or the data set's ids), :mod:`~ltr.clicks.logs.stream` (record batches and per-cell sums),
:mod:`~ltr.clicks.logs.counts` (per (item, position) counts), :mod:`~ltr.clicks.logs.lists` and
:mod:`~ltr.clicks.logs.list_stream` (the log grouped by shown list). Imports nothing of ``ltr.clicks``
outside this folder.
"""
