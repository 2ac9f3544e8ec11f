"""The flat ranking data set and its SVMlight/LETOR reader and writer.

A ranking data set is ragged (queries hold different numbers of items), so it is kept flat, CSR style:
``features`` [N, F], ``labels`` [N] and ``query_offsets`` [Q+1], where query ``q`` owns rows
``query_offsets[q]:query_offsets[q + 1]``. Row order inside a query is meaningful: it is the tie-break
of the toolkit's metrics (stable sort), so nothing here reorders rows within a query.

Reading uses scikit-learn's ``load_svmlight_file(query_id=True)`` for the parsing itself. The wrapper
adds what a ranking toolkit needs on top of it:

- errors that name the file, the line and what was wrong (bad token, label not a number, missing
  ``qid``, NaN or infinite values, rows of one query that are not contiguous);
- the ``#docid = ...`` comments of LETOR files (kept as ``doc_ids``) and ``user = ...`` comments
  (written by :func:`save_svmlight`, kept as ``user_ids``);
- LightGBM's ``.query`` sidecar (one group size per line) for files without ``qid``;
- a binary cache beside the file (or in a cache folder) that makes the second load many times faster
  and is invalidated when the source changes.

The file is fed to scikit-learn in blocks of a few thousand lines: scikit-learn grows its ``qid``
array one element at a time (quadratic in the number of rows), and blocks keep that cost linear; they
also let an error be located by re-reading one small block line by line.

Decision (see DESIGN_NOTES.md): rows of one query that are not contiguous are an error naming the
query, never silently regrouped, because regrouping would change the row order, which is the
tie-break.
"""

from __future__ import annotations

import io
import operator
import os
import re
from pathlib import Path

import numpy as np

from ltr.base.checks import input_file
from ltr.data.cache import _cache_key, _cache_location, _read_cache, _write_cache
from ltr.data.dataset import RankingDataset
from ltr.data.labels import LABEL_LIMIT, label_problem
from ltr.base.errors import DataFormatError, LtrError
from ltr.base.io_utils import atomic_path

__all__ = ["load_svmlight", "save_svmlight", "read_query_file", "format_float32", "SvmlightSource", "ints_if_possible"]

_BLOCK_LINES = 2048  # lines per scikit-learn call; keeps its per-line qid append cheap
_BLOCK_BYTES = 8 << 20
_BOM = b"\xef\xbb\xbf"
# The dense feature matrix may hold at most this many bytes per byte of the file (plus a floor):
# a LETOR file is larger as text than as float32, and even a file with one feature in 30 present
# stays far below; a matrix beyond it comes from an absurd feature index, never from real data.
_DENSE_PER_FILE_BYTE = 64
_DENSE_FLOOR = 64 << 20


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------

def load_svmlight(
    path: str | os.PathLike,
    *,
    query_file: str | os.PathLike | None = None,
    n_features: int | None = None,
    zero_based: bool = False,
    cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    progress: bool | None = None,
    negative_labels: str = "zero",
) -> RankingDataset:
    """Read an SVMlight/LETOR ranking file: ``<label> qid:<id> <index>:<value> ... [# comment]``.

    Parameters
    ----------
    path : the text file (LF or CRLF line endings).
    query_file : LightGBM-style group sizes, one per line. Default: ``path + ".query"`` when that file
        exists. It defines the query boundaries (needed when the file has no ``qid``); when the file
        also has ``qid``, every group must hold a single ``qid``.
    n_features : number of feature columns; default: the largest index in the file.
    zero_based : feature indices start at 0 (default: 1, the LETOR convention; an index 0 is an error).
    cache : keep a binary copy and use it while the source's whole content (a hash of it) is
        unchanged; its arrays are checked when read (:mod:`ltr.data.cache`).
    cache_dir : where the copy goes: None (default) the cache folder (``$LTR_CACHE_DIR``, else the
        platform's: :func:`default_cache_dir`), a folder, or ``"beside"`` for ``<file>.ltrcache.npz``
        beside the source (the cache folder when the source's folder is read-only).
    progress : show a tqdm bar (default: only for files over 64 MiB, and only on a terminal).
    negative_labels : ``"zero"`` (default): a negative label means judged non-relevant and is read
        as 0 (:mod:`ltr.data.labels`; the number changed is ``ds.meta["negative_labels"]``);
        ``"keep"``: labels as written.

    Raises
    ------
    DataFormatError
        naming the file and line: a token that is not ``index:value``, a label that is not a number, a
        line without ``qid`` (when there is no query file), NaN or infinite values, a label of 1024 or
        more, feature indices not increasing or so large that the dense matrix would dwarf the file,
        rows of one query that are not contiguous.
    LtrError
        the path is missing, a folder, a FIFO or unreadable.
    """
    path = input_file(path)
    if query_file is None:
        sidecar = Path(str(path) + ".query")
        query_file = input_file(sidecar, "query file") if sidecar.exists() else None
    else:
        query_file = input_file(query_file, "query file")
    if n_features is not None and (isinstance(n_features, bool) or int(n_features) != n_features or n_features < 0):
        raise ValueError(f"n_features must be a non-negative integer; got {n_features}")
    if negative_labels not in ("zero", "keep"):
        raise ValueError(f"negative_labels must be 'zero' or 'keep'; got {negative_labels!r}")

    key = None
    cache_file = None
    if cache:
        key = _cache_key(path, query_file, n_features, zero_based, negative_labels)
        cache_file = _cache_location(path, cache_dir)
        cached = _read_cache(cache_file, key, n_features)
        if cached is not None:
            return cached

    ds = _parse_file(path, query_file, n_features, zero_based, progress)
    if negative_labels == "zero":
        negative = ds.labels < 0
        ds.meta["negative_labels"] = int(negative.sum())
        if negative.any():
            ds.labels[negative] = 0.0
    if cache and cache_file is not None:
        _write_cache(cache_file, key, ds, source_size=path.stat().st_size)
    return ds


def read_query_file(path: str | os.PathLike) -> np.ndarray:
    """Group sizes from a LightGBM ``.query`` file (one positive integer per line)."""
    path = Path(path)
    sizes = []
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            text = raw.strip()
            if not text:
                continue
            try:
                value = int(text)
            except ValueError:
                raise DataFormatError(path, number, f"group size {text.decode(errors='replace')!r} is not an integer") from None
            if value < 1:
                raise DataFormatError(path, number, f"group size must be at least 1; got {value}")
            sizes.append(value)
    return np.asarray(sizes, dtype=np.int64)


# "key = value" inside a line's comment; the pattern starts with '#', which re finds quickly
_DOCID_RE = re.compile(rb"#[^\n]*?\bdocid[ \t]*=[ \t]*([^\s]+)")
_USER_RE = re.compile(rb"#[^\n]*?\buser[ \t]*=[ \t]*([^\s]+)")


class _Block:
    """What is kept of one parsed block of lines (the features go straight into the dense array)."""

    __slots__ = ("rows", "y", "qid", "lines", "docids", "users", "width")


_WINDOW = 64 << 20  # bytes of the text looked at between two page releases


def _count_lines(buffer, size: int) -> int:
    """Number of lines (a last line without a newline counts), windowed: no file-sized temporary,
    and the mapped text leaves the resident set window by window."""
    count = 0
    for lo in range(0, size, _WINDOW):
        hi = min(size, lo + _WINDOW)
        count += int(np.count_nonzero(np.frombuffer(buffer, dtype=np.uint8, count=hi - lo, offset=lo) == 10))
        _release(buffer)
    if size and buffer[size - 1 : size] != b"\n":
        count += 1
    return count


def _contains(buffer, size: int, needle: bytes) -> bool:
    """``needle in buffer``, window by window with the pages released in between (a plain ``find``
    over a map leaves every page of a file without the needle in the resident set)."""
    for lo in range(0, size, _WINDOW):
        found = buffer.find(needle, lo, min(size, lo + _WINDOW + len(needle) - 1)) >= 0
        _release(buffer)
        if found:
            return True
    return False


def _block_spans(buffer, size: int):
    """``(first_line, lo, hi, local_starts)`` of consecutive blocks of whole lines: at most
    ``_BLOCK_LINES`` lines and about ``_BLOCK_BYTES`` bytes each (a longer line is a block of its own).
    ``first_line`` is 0-based; ``local_starts`` are the lines' byte offsets within the block."""
    first_line = 0
    lo = 3 if buffer[:3] == _BOM else 0  # a UTF-8 byte order mark is not part of the first label
    while lo < size:
        span = _BLOCK_BYTES
        while True:
            hi = min(size, lo + span)
            newlines = np.flatnonzero(np.frombuffer(buffer, dtype=np.uint8, count=hi - lo, offset=lo) == 10)
            if len(newlines) >= _BLOCK_LINES:
                hi = lo + int(newlines[_BLOCK_LINES - 1]) + 1
                newlines = newlines[:_BLOCK_LINES]
                break
            if hi == size:
                break
            if len(newlines):
                hi = lo + int(newlines[-1]) + 1
                break
            span *= 2  # one line longer than the block size
        local_starts = np.concatenate([[0], newlines + 1]).astype(np.int64)
        local_starts = local_starts[local_starts < hi - lo]
        yield first_line, lo, hi, local_starts
        first_line += len(local_starts)
        lo = hi


def _parsed_blocks(path: Path, data, size: int, zero_based: bool, bar=None):
    """Parse the buffer block by block with scikit-learn: yields ``(_Block, X)`` (X a CSR matrix of
    the block's rows, at the block's own width), every value checked; errors name the line."""
    from sklearn.datasets import load_svmlight_file  # imported here: keeps `import ltr.data` light

    has_comments = _contains(data, size, b"#")
    for first, lo, hi, local_starts in _block_spans(data, size):
        chunk = data[lo:hi]
        _release(data)  # the text's mapped pages leave the resident set: memory stays one block
        n_lines = len(local_starts)
        try:
            X, y, qid = load_svmlight_file(io.BytesIO(chunk), dtype=np.float32, zero_based=zero_based, query_id=True)
        except (ValueError, OverflowError) as exc:
            line, what = _locate_problem(chunk, first, zero_based)
            if line is None:
                raise DataFormatError(path, None, f"scikit-learn could not parse lines {first + 1}-{first + n_lines}: {exc}") from None
            raise DataFormatError(path, line, what) from None
        block = _Block()
        block.rows = rows = X.shape[0]
        block.y, block.qid = np.asarray(y, dtype=np.float64), np.asarray(qid, dtype=np.int64)
        if rows == n_lines:
            block.lines = np.arange(first + 1, first + n_lines + 1, dtype=np.int64)
        else:  # blank or comment-only lines in this block: find which lines hold the rows
            block.lines = first + 1 + _data_line_positions(chunk)
        block.docids = block.users = None
        if has_comments and chunk.find(b"#") >= 0:
            # a key absent from the block costs one substring search, not a regex pass per line
            if chunk.find(b"docid") >= 0:
                block.docids = _comment_values(_DOCID_RE, chunk, rows, local_starts)
            if chunk.find(b"user") >= 0:
                block.users = _comment_values(_USER_RE, chunk, rows, local_starts)
        _check_finite(path, block, X, zero_based)
        # the block's width from the indices it holds (scikit-learn says 1 for a block without any)
        block.width = int(X.indices.max()) + 1 if X.indices.size else 0
        if bar is not None:
            bar.update(hi - lo)
        yield block, X


def _release(buffer) -> None:
    """Drop the pages of a read-only memory-mapped file from the resident set (they stay in the page
    cache; the next access maps them again), so that reading a file larger than RAM stays bounded."""
    import mmap

    if hasattr(buffer, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        buffer.madvise(mmap.MADV_DONTNEED)


def _scatter(target: np.ndarray, row: int, X) -> None:
    """Write the CSR rows of ``X`` into the dense ``target`` from ``row`` on."""
    counts = np.diff(X.indptr)
    rows = np.repeat(np.arange(row, row + X.shape[0], dtype=np.int64), counts)
    target[rows, X.indices] = X.data


def _parse_file(path: Path, query_file, n_features, zero_based, progress) -> RankingDataset:
    import mmap

    size = path.stat().st_size
    if size == 0:
        raise DataFormatError(path, None, "the file is empty")
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return _parse_buffer(path, data, size, query_file, n_features, zero_based, progress)


def _parse_buffer(path: Path, data, size: int, query_file, n_features, zero_based, progress) -> RankingDataset:
    n_lines = _count_lines(data, size)
    # The dense array is filled block by block; its width grows if a later block has a larger index.
    width = int(n_features) if n_features is not None else 0
    _check_dense_size(path, size, n_lines, width, None)
    features = np.zeros((n_lines, width), dtype=np.float32)
    blocks: list[_Block] = []
    row = 0
    bar = _progress_bar(size, progress, big=size > (64 << 20), desc=f"reading {path.name}", unit="B", unit_scale=True)
    try:
        for block, X in _parsed_blocks(path, data, size, zero_based, bar):
            if block.width > width:
                if n_features is not None:
                    _raise_too_wide(path, block, X, n_features, zero_based)
                _check_dense_size(path, size, n_lines, block.width, (block, X, zero_based))
                grown = np.zeros((n_lines, block.width), dtype=np.float32)
                grown[:row, :width] = features[:row]
                features, width = grown, block.width
            if block.rows:
                _scatter(features, row, X)  # the CSR block straight into the dense array
            row += block.rows
            blocks.append(block)
    finally:
        if bar is not None:
            bar.close()

    n_rows = row
    if n_rows == 0:
        raise DataFormatError(path, None, "no data lines")
    features = features[:n_rows] if n_rows == n_lines else features[:n_rows].copy()
    labels = np.concatenate([b.y for b in blocks])
    lines = np.concatenate([b.lines for b in blocks])

    qids = _collect_qids(path, blocks, n_rows, lines, query_file is not None)
    doc_ids = _collect_optional(blocks, "docids", n_rows)
    users_per_row = _collect_optional(blocks, "users", n_rows)
    blocks.clear()

    if query_file is not None:
        sizes = read_query_file(query_file)
        if int(sizes.sum()) != n_rows:
            raise DataFormatError(
                query_file, None, f"group sizes add up to {int(sizes.sum())} rows but {path} holds {n_rows} rows"
            )
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        if qids is not None:
            starts = offsets[:-1]
            group = np.repeat(np.arange(len(sizes)), sizes)
            mismatch = np.flatnonzero(qids != qids[starts][group])
            if mismatch.size:
                r = int(mismatch[0])
                raise DataFormatError(
                    path, int(lines[r]),
                    f"qid {qids[r]} differs from qid {qids[starts[group[r]]]} of the group that "
                    f"{query_file} (group {group[r] + 1}) puts this row in",
                )
            query_ids = qids[starts]
        else:
            query_ids = np.arange(len(sizes), dtype=np.int64)
    else:
        offsets, query_ids = _contiguous_queries(path, qids, lines)

    user_ids = None
    if users_per_row is not None:
        user_ids = _per_query_value(path, users_per_row, offsets, lines, "user")

    return RankingDataset(
        features=features,
        labels=labels,
        query_offsets=offsets,
        query_ids=query_ids,
        user_ids=user_ids,
        doc_ids=doc_ids,
        meta={"source": str(path), "query_file": None if query_file is None else str(query_file)},
    )


def _progress_bar(total: int, progress, *, big: bool, desc: str, unit: str, unit_scale: bool = False):
    """A tqdm bar over ``total`` units, or None. ``progress`` True / False: shown / not; None: shown
    only for ``big`` work, and then only on a terminal (tqdm's ``disable=None``)."""
    if not (progress if progress is not None else big):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit=unit, unit_scale=unit_scale, desc=desc, disable=None if progress is None else False)


def _split_lines(chunk: bytes) -> list[bytes]:
    lines = chunk.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def _tokens(line: bytes) -> list[bytes]:
    hash_at = line.find(b"#")
    if hash_at >= 0:
        line = line[:hash_at]
    return line.split()


def _data_line_positions(chunk: bytes) -> np.ndarray:
    """0-based positions (within the block) of lines that hold data, as scikit-learn counts them."""
    return np.asarray([i for i, line in enumerate(_split_lines(chunk)) if _tokens(line)], dtype=np.int64)


def _comment_values(pattern, chunk: bytes, rows: int, local_starts: np.ndarray) -> list[str]:
    """Per data row, the value of ``key = value`` in the row's comment ('' when absent)."""
    if rows == len(local_starts):
        found = list(pattern.finditer(chunk))
        if len(found) == rows:
            # the common case: one match per line, and every line holds data
            where = np.searchsorted(local_starts, [m.start() for m in found], side="right") - 1
            if np.array_equal(where, np.arange(rows)):
                return [m.group(1).decode("utf-8", "replace") for m in found]
    values = []
    for line in _split_lines(chunk):
        if not _tokens(line):
            continue
        match = pattern.search(line)
        values.append(match.group(1).decode("utf-8", "replace") if match else "")
    return values


def _locate_problem(chunk: bytes, first_line: int, zero_based: bool):
    """Line number (1-based, in the file) and description of the first malformed line of a block."""
    for i, line in enumerate(_split_lines(chunk)):
        tokens = _tokens(line)
        if not tokens:
            continue
        problem = _line_problem(tokens, zero_based)
        if problem:
            return first_line + i + 1, problem
    return None, None


def _show(token: bytes) -> str:
    text = token.decode("utf-8", "replace")
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _line_problem(tokens: list[bytes], zero_based: bool) -> str | None:
    label = tokens[0]
    try:
        float(label)
    except ValueError:
        hint = " (is the label missing?)" if b":" in label else ""
        return f"label {_show(label)} is not a number{hint}"
    rest = tokens[1:]
    if rest and rest[0].startswith(b"qid"):
        parts = rest[0].split(b":", 1)
        if len(parts) != 2 or parts[0] != b"qid":
            return f"bad qid token {_show(rest[0])}: expected 'qid:<integer>'"
        try:
            int(parts[1])
        except ValueError:
            return f"qid {_show(parts[1])} is not an integer"
        if not -(2**63) <= int(parts[1]) < 2**63:
            return f"qid {_show(parts[1])} does not fit in 64 bits"
        rest = rest[1:]
    previous = -1
    for position, token in enumerate(rest, start=1):
        if b":" not in token:
            return f"token {_show(token)} (feature {position} on the line) is not 'index:value'"
        index_text, value_text = token.split(b":", 1)
        if index_text == b"qid":
            return f"token {_show(token)}: qid must come right after the label"
        try:
            index = int(index_text)
        except ValueError:
            return f"feature index {_show(index_text)} in token {_show(token)} is not an integer"
        if index < 0 or (index == 0 and not zero_based):
            extra = " (indices are 1-based; for a 0-based file pass --zero-based, or zero_based=True in Python)" if index == 0 else ""
            return f"invalid feature index {index} in token {_show(token)}{extra}"
        if index >= 2**31 - 1:
            return f"feature index {index} is too large (a feature index must be below 2147483647)"
        if index <= previous:
            return f"feature indices must increase along a line: {index} comes after {previous}"
        try:
            float(value_text)
        except ValueError:
            return f"value {_show(value_text)} of feature {index} is not a number"
        previous = index
    return None


def _check_dense_size(path: Path, size: int, n_lines: int, width: int, where) -> None:
    """Refuse, before allocating it, a dense matrix far larger than the file could ever describe."""
    need = n_lines * width * 4
    limit = _DENSE_FLOOR + _DENSE_PER_FILE_BYTE * size
    if need <= limit:
        return
    gib = need / 2**30
    if where is None:
        raise DataFormatError(path, None, f"n_features={width} would make a dense matrix of {n_lines} x {width} "
                              f"float32 ({gib:.1f} GiB) for a file of {size} bytes; that is not this file's width")
    block, X, zero_based = where
    k = int(np.argmax(X.indices))
    r = int(np.searchsorted(X.indptr, k, side="right") - 1)
    index = int(X.indices[k]) + (0 if zero_based else 1)
    raise DataFormatError(path, int(block.lines[r]),
                          f"feature index {index} would make a dense matrix of {n_lines} x {width} float32 "
                          f"({gib:.1f} GiB) from a file of {size} bytes; such an index is a mistake in the file")


def _check_finite(path: Path, block: _Block, X, zero_based: bool) -> None:
    y = block.y
    if not np.all(np.isfinite(y) & (y < LABEL_LIMIT)):
        r = int(np.flatnonzero(~(np.isfinite(y) & (y < LABEL_LIMIT)))[0])
        raise DataFormatError(path, int(block.lines[r]), label_problem(float(y[r])))
    data = X.data
    if data.size and not np.all(np.isfinite(data)):
        k = int(np.flatnonzero(~np.isfinite(data))[0])
        r = int(np.searchsorted(X.indptr, k, side="right") - 1)
        index = int(X.indices[k]) + (0 if zero_based else 1)
        kind = "NaN" if np.isnan(data[k]) else "infinite"
        raise DataFormatError(path, int(block.lines[r]), f"feature {index} is {kind} ({data[k]}); values must be finite")


def _raise_too_wide(path: Path, block: _Block, X, n_features: int, zero_based: bool):
    k = int(np.flatnonzero(X.indices >= n_features)[0])
    r = int(np.searchsorted(X.indptr, k, side="right") - 1)
    index = int(X.indices[k]) + (0 if zero_based else 1)
    raise DataFormatError(path, int(block.lines[r]), f"feature index {index} exceeds n_features={n_features}")


def _collect_qids(path: Path, blocks, n_rows: int, lines: np.ndarray, have_query_file: bool):
    """[N] int64 qids, or None when no line has one (then a query file must give the groups)."""
    counts = [(len(b.qid), b.rows) for b in blocks]
    if all(q == 0 for q, _ in counts):
        if not have_query_file:
            raise DataFormatError(
                path, int(lines[0]) if n_rows else 1,
                "missing qid: the line has no 'qid:<id>' after the label and there is no .query file "
                "(give group sizes with --query-file FILE, or query_file= in Python, or add qid to every line)",
            )
        return None
    if all(q == r for q, r in counts):
        return np.concatenate([np.asarray(b.qid, dtype=np.int64) for b in blocks])
    # Some lines lack a qid: find the first one.
    raise _missing_qid(path, blocks)


def _missing_qid(path: Path, blocks) -> DataFormatError:
    for block in blocks:
        if len(block.qid) == block.rows:
            continue
        # the block's rows are in file order; re-read the file lines of this block
        with open(path, "rb") as fh:
            for number, raw in enumerate(fh, start=1):
                if number < block.lines[0]:
                    continue
                tokens = _tokens(raw)
                if tokens and not (len(tokens) > 1 and tokens[1].startswith(b"qid")):
                    return DataFormatError(path, number, "missing qid: other lines have 'qid:<id>' after the label, this one does not")
    return DataFormatError(path, None, "missing qid on some lines")  # pragma: no cover


def _collect_optional(blocks, name: str, n_rows: int):
    if all(getattr(b, name) is None for b in blocks):
        return None
    out = []
    for b in blocks:
        values = getattr(b, name)
        out.extend(values if values is not None else [""] * b.rows)
    if not any(out):
        return None
    return np.asarray(out, dtype=str)


def _contiguous_queries(path: Path, qids: np.ndarray, lines: np.ndarray):
    n = len(qids)
    change = np.ones(n, dtype=bool)
    change[1:] = qids[1:] != qids[:-1]
    starts = np.flatnonzero(change)
    run_q = qids[starts]
    unique = np.unique(run_q)
    if len(unique) != len(run_q):
        order = np.argsort(run_q, kind="stable")
        sorted_q = run_q[order]
        repeated = order[1:][sorted_q[1:] == sorted_q[:-1]]
        run = int(repeated.min())  # the first run that repeats an earlier query
        q = run_q[run]
        first_run = int(np.flatnonzero(run_q == q)[0])
        raise DataFormatError(
            path, int(lines[starts[run]]),
            f"rows of query {q} are not contiguous: it starts on line {int(lines[starts[first_run]])} and "
            f"comes back here after other queries (group each query's rows together, e.g. sort the file "
            f"by qid keeping the row order)",
        )
    offsets = np.append(starts, n).astype(np.int64)
    return offsets, run_q.astype(np.int64)


def _per_query_value(path: Path, per_row: np.ndarray, offsets: np.ndarray, lines, what: str) -> np.ndarray:
    starts = offsets[:-1]
    lengths = np.diff(offsets)
    first = np.repeat(per_row[starts], lengths)
    bad = np.flatnonzero(per_row != first)
    if bad.size:
        r = int(bad[0])
        raise DataFormatError(path, int(lines[r]), f"{what} {str(per_row[r])!r} differs from {what} {str(first[r])!r} of the query's first row")
    return ints_if_possible(per_row[starts])


def ints_if_possible(values: np.ndarray) -> np.ndarray:
    """String ids read from comments as int64 when every one is an integer written plainly, else as they are.

    >>> ints_if_possible(np.array(["3", "12"])).tolist(), ints_if_possible(np.array(["3", "x"])).tolist()
    ([3, 12], ['3', 'x'])
    """
    try:
        as_int = values.astype(np.int64)
        if np.array_equal(as_int.astype(str), values):
            return as_int
    except ValueError:
        pass
    return values


# --------------------------------------------------------------------------------------------------
# Reading block by block (ltr convert)
# --------------------------------------------------------------------------------------------------
class SvmlightSource:
    """An SVMlight/LETOR file read in blocks of lines with bounded memory (``ltr convert``): the checks
    and the values of :func:`load_svmlight`, one :class:`~ltr.data.blocks.Block` at a time.

    Without ``n_features`` each block has the width of its own largest index (the store writer widens
    as wider blocks come); errors name the file and line (``error_at``).
    """

    user_ids_from_text = True  # user ids come from comments: integers when they all read as integers

    def __init__(self, path, *, query_file=None, n_features: int | None = None, zero_based: bool = False, progress: bool | None = None,
                 negative_labels: str = "zero"):  # fmt: skip
        self.path = input_file(path)
        self.name = str(self.path)
        if query_file is None:
            sidecar = Path(str(self.path) + ".query")
            query_file = input_file(sidecar, "query file") if sidecar.exists() else None
        else:
            query_file = input_file(query_file, "query file")
        self.query_file = query_file
        self.n_features = None if n_features is None else int(n_features)
        self.feature_names = None
        self.zero_based, self.progress = zero_based, progress
        self.negative_labels, self.n_negative_labels = negative_labels, 0

    def describe(self, line: int) -> str:
        return f"line {line}"

    def error_at(self, line: int, message: str) -> DataFormatError:
        return DataFormatError(self.path, line, message)

    def blocks(self):
        import mmap

        from ltr.data.blocks import Block

        size = self.path.stat().st_size
        if size == 0:
            raise DataFormatError(self.path, None, "the file is empty")
        group_offsets = None
        if self.query_file is not None:
            group_offsets = np.concatenate([[0], np.cumsum(read_query_file(self.query_file))]).astype(np.int64)
        with open(self.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            comments = _contains(data, size, b"#")
            has_docids = comments and _contains(data, size, b"docid")
            has_users = comments and _contains(data, size, b"user")
            bar = _progress_bar(size, self.progress, big=size > (64 << 20), desc=f"reading {self.path.name}", unit="B", unit_scale=True)
            row, with_qid, first_line, widest = 0, None, None, 0
            n_lines = _count_lines(data, size)
            if self.n_features is not None:
                _check_dense_size(self.path, size, n_lines, self.n_features, None)
            try:
                for block, X in _parsed_blocks(self.path, data, size, self.zero_based, bar):
                    if not block.rows:
                        continue
                    width = block.width
                    if self.n_features is not None:
                        if width > self.n_features:
                            _raise_too_wide(self.path, block, X, self.n_features, self.zero_based)
                        width = self.n_features
                    elif width > widest:  # the store widens to it: refuse an absurd index first
                        _check_dense_size(self.path, size, n_lines, width, (block, X, self.zero_based))
                        widest = width
                    features = np.zeros((block.rows, width), dtype=np.float32)
                    _scatter(features, 0, X)
                    first_line = first_line or int(block.lines[0])
                    with_qid = self._check_qids(block, with_qid, first_line)
                    keys, query_ids = self._query_keys(block, row, group_offsets, with_qid)
                    labels = block.y
                    if self.negative_labels == "zero":  # judged non-relevant: read as 0, as load_svmlight does
                        negative = labels < 0
                        self.n_negative_labels += int(negative.sum())
                        labels = np.where(negative, 0.0, labels)
                    yield Block(
                        features=features, labels=labels, query_keys=keys, positions=block.lines, query_ids=query_ids,
                        doc_ids=_optional_column(block.docids, block.rows) if has_docids else None,
                        user_ids=_optional_column(block.users, block.rows) if has_users else None,
                    )  # fmt: skip
                    row += block.rows
            finally:
                if bar is not None:
                    bar.close()
        if row == 0:
            raise DataFormatError(self.path, None, "no data lines")
        if group_offsets is not None and row != group_offsets[-1]:
            raise DataFormatError(self.query_file, None, f"group sizes add up to {int(group_offsets[-1])} rows but {self.path} holds {row} rows")

    def _check_qids(self, block, with_qid, first_line: int) -> bool:
        """Every line has a qid, or (with a .query file) none has: the rule of load_svmlight."""
        has = len(block.qid) == block.rows
        if len(block.qid) not in (0, block.rows) or (with_qid is True and not has):
            raise _missing_qid(self.path, [block])
        if with_qid is False and has:
            raise DataFormatError(self.path, first_line, "missing qid: other lines have 'qid:<id>' after the label, this one does not")
        if not has and self.query_file is None:
            raise DataFormatError(
                self.path, int(block.lines[0]),
                "missing qid: the line has no 'qid:<id>' after the label and there is no .query file "
                "(pass query_file= or add qid to every line)",
            )
        return has

    def _query_keys(self, block, row: int, group_offsets, with_qid: bool):
        if group_offsets is None:
            return block.qid, None
        rows = row + np.arange(block.rows, dtype=np.int64)
        if rows[-1] >= group_offsets[-1]:
            raise DataFormatError(self.query_file, None, f"group sizes add up to {int(group_offsets[-1])} rows but {self.path} holds more")
        groups = np.searchsorted(group_offsets, rows, side="right") - 1
        return groups, (block.qid if with_qid else groups)


def _optional_column(values, rows: int) -> np.ndarray:
    return np.asarray(values if values is not None else [""] * rows, dtype=str)


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------
def format_float32(values) -> list[str]:
    """Strings that read back (parsed as float64, then cast to float32) to exactly ``values``.

    A value that is a short decimal (at most 6 decimals and |x| < 1e12, as in LETOR files) is written
    as that decimal (Python's shortest ``repr`` of the double nearest to it); any other value gets
    numpy's shortest float32 representation, checked by parsing it back, with 17 significant digits
    of its exact double value as the last resort. Either way the round trip is bit-exact.

    >>> format_float32(np.float32([0.25, -3.0, 1e-8, 0.1, 7.0e20, 0.007477]))
    ['0.25', '-3.0', '1e-08', '0.1', '7e+20', '0.007477']
    """
    x = np.asarray(values, dtype=np.float32).reshape(-1)
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        short = np.round(x64, 6)
        ok = np.isfinite(x64) & (np.abs(x64) < 1e12) & (short.astype(np.float32) == x)
    if ok.all():
        return list(map(repr, short.tolist()))
    text = np.where(ok, short, 0.0).tolist()
    out = list(map(repr, text))
    bad = np.flatnonzero(~ok)
    fallback = x[bad].astype(str)
    with np.errstate(invalid="ignore", over="ignore"):
        exact = fallback.astype(np.float64).astype(np.float32).view(np.uint32) == x[bad].view(np.uint32)
    for i, s, good in zip(bad.tolist(), fallback.tolist(), exact.tolist()):
        out[i] = s if good else "%.17g" % x64[i]
    return out


def _format_labels(labels: np.ndarray) -> list[str]:
    if np.all(labels == np.round(labels)) and np.all(np.abs(labels) < 1e15):
        return labels.astype(np.int64).astype(str).tolist()
    return [repr(float(v)) for v in labels]


def save_svmlight(ds: RankingDataset, path: str | os.PathLike, *, progress: bool | None = None) -> None:
    """Write ``ds`` as SVMlight with ``qid`` (atomically); :func:`load_svmlight` reads it back exactly.

    Features are written 1-based and only when non-zero, except the last column, which is written on
    every line so that the width survives a round trip. float32 values are written so that they read
    back bit-identical: blocks whose values are all short decimals (LETOR-like data) by a vectorised
    formatter, others through :func:`format_float32`; labels as integers when they are whole numbers,
    else with ``repr``. ``doc_ids`` and ``user_ids`` go into the line comment: ``# docid = D user = U``.
    Weights are not written (SVMlight has no place for them).
    """
    if ds.query_ids.dtype.kind not in "iu":
        try:
            qids = ds.query_ids.astype(np.int64)
        except ValueError:
            raise LtrError("SVMlight needs integer query ids; these are not integers") from None
    else:
        qids = ds.query_ids.astype(np.int64)
    n, width = ds.features.shape
    qid_text = np.char.add("qid:", np.repeat(qids, ds.query_lengths).astype(str))
    labels = _format_labels(ds.labels)
    comments = None
    if ds.doc_ids is not None or ds.user_ids is not None:
        parts = []
        if ds.doc_ids is not None:
            ids = ds.doc_ids.astype(str)
            # np.char, not numpy 2's np.strings: the same functions, also on numpy 1.x (the declared floor)
            bad = (np.char.str_len(ids) == 0) | (np.char.str_len(np.char.strip(ids)) != np.char.str_len(ids))
            for ch in (" ", "\t", "#"):
                bad |= np.char.find(ids, ch) >= 0
            if bad.any():
                r = int(np.flatnonzero(bad)[0])
                raise LtrError(
                    f"doc id {str(ids[r])!r} (row {r}) cannot be written in an SVMlight comment: "
                    "doc ids must be non-empty, without whitespace or '#'"
                )
            parts.append(np.char.add("docid = ", ds.doc_ids.astype(str)))
        if ds.user_ids is not None:
            users = np.repeat(ds.user_ids.astype(str), ds.query_lengths)
            parts.append(np.char.add("user = ", users))
        comments = parts[0] if len(parts) == 1 else np.char.add(np.char.add(parts[0], " "), parts[1])
        comments = comments.tolist()
    heads = [f"{labels[r]} {qid_text[r]}" for r in range(n)]
    tails = ["\n"] * n if comments is None else [f" # {c}\n" for c in comments]
    bar = _progress_bar(n, progress, big=n * max(width, 1) > 20_000_000, desc=f"writing {Path(path).name}", unit="rows")
    step = max(1, 2_000_000 // max(width, 1))
    try:
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            for lo in range(0, n, step):
                hi = min(n, lo + step)
                block = ds.features[lo:hi]
                # -0.0 is written too (as "-0"), so that the round trip is bit for bit
                keep = (block != 0) | np.signbit(block)
                if width:
                    keep[:, -1] = True
                text = _block_bytes_fast(block, keep, heads[lo:hi], tails[lo:hi])
                if text is None:
                    text = _block_bytes_general(block, keep, heads[lo:hi], tails[lo:hi])
                fh.write(text)
                if bar is not None:
                    bar.update(hi - lo)
    finally:
        if bar is not None:
            bar.close()


def _block_bytes_general(block: np.ndarray, keep: np.ndarray, heads: list[str], tails: list[str]) -> bytes:
    """Lines of a block, each value through :func:`format_float32` (any float32 value)."""
    prefix = [f" {j + 1}:" for j in range(block.shape[1])]
    rows_nz, cols_nz = np.nonzero(keep)
    flat = list(map(operator.add, map(prefix.__getitem__, cols_nz.tolist()), format_float32(block[rows_nz, cols_nz])))
    ends = np.cumsum(keep.sum(axis=1)).tolist()
    out = []
    start = 0
    for i, end in enumerate(ends):
        out.append(heads[i] + "".join(flat[start:end]) + tails[i])
        start = end
    return "".join(out).encode("utf-8")


def _ascii_matrix(strings: list[str]) -> np.ndarray:
    """uint8 [len, width] with the strings' bytes, NUL-padded on the right."""
    arr = np.array([t.encode("utf-8") for t in strings], dtype=bytes)
    width = max(arr.dtype.itemsize, 1)
    return arr.astype(f"S{width}").view(np.uint8).reshape(len(strings), width)


def _block_bytes_fast(block: np.ndarray, keep: np.ndarray, heads: list[str], tails: list[str]) -> bytes | None:
    """Lines of a block whose values are all short decimals (<= 9 decimals, |x| < 1e9), or None.

    Vectorised: every value gets a fixed-width ASCII field (sign, integer digits, '.', decimals) in a
    uint8 matrix where the characters not to print (leading zeros, trailing zeros, skipped entries)
    are NUL; one boolean compaction drops the NULs. The value written is round(x, d) with the fewest
    decimals d <= 9 for which it reads back (as float64, then float32) to exactly x.
    """
    rows, width = block.shape
    if rows == 0:
        return b""
    x64 = block.astype(np.float64)
    magnitude = np.abs(x64)
    if not (np.all(np.isfinite(x64)) and np.all(magnitude < 1e9)):
        return None
    # the fewest decimals d (0..9) whose decimal reads back to x, e.g. float32(53.3) -> "53.3", not
    # "53.299999"; n = that decimal times 10^9, an exact integer (< 10^18)
    n = np.zeros(block.shape, dtype=np.int64)
    done = np.zeros(block.shape, dtype=bool)
    decimals = 0
    for d in range(10):
        scaled = np.round(magnitude * 10.0**d)
        good = ~done & ((np.copysign(scaled, x64) / 10.0**d).astype(np.float32) == block)
        if good.any():
            n[good] = scaled[good].astype(np.int64) * 10 ** (9 - d)
            done |= good
            decimals = d
        if done.all():
            break
    else:
        return None
    whole, frac = np.divmod(n // 10 ** (9 - decimals), 10**decimals)
    n_whole = len(str(int(whole.max())))
    whole = whole.astype(np.int32)  # < 10^9: narrower integers, faster digit arithmetic
    frac = frac.astype(np.int32)
    prefix = _ascii_matrix([f" {j + 1}:" for j in range(width)])  # [F, P]
    # one uint8 [rows, F] array per output character position, stacked once at the end
    chars = [np.broadcast_to(prefix[:, k], (rows, width)) for k in range(prefix.shape[1])]
    chars.append(np.signbit(block).view(np.uint8) * np.uint8(ord("-")))
    for i in range(n_whole):
        power = 10 ** (n_whole - 1 - i)
        digit = ((whole // power) % 10).astype(np.uint8) + np.uint8(ord("0"))
        if power > 1:
            digit *= whole >= power  # no leading zeros
        chars.append(digit)
    chars.append((frac != 0).view(np.uint8) * np.uint8(ord(".")))
    for k in range(decimals):
        power = 10 ** (decimals - 1 - k)
        digit = ((frac // power) % 10).astype(np.uint8) + np.uint8(ord("0"))
        digit *= frac % (power * 10) != 0  # no trailing zeros
        chars.append(digit)
    cells = np.stack(chars, axis=-1)
    cells *= keep[:, :, None]  # skipped entries vanish entirely
    lines = np.concatenate([_ascii_matrix(heads), cells.reshape(rows, -1), _ascii_matrix(tails)], axis=1).reshape(-1)
    return lines[lines != 0].tobytes()


