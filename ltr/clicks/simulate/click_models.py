"""Click simulation on a labelled ranking data set: the position-based model and the cascade model.

A logging ("production") ranker orders each query's items by its scores; the top ``top_k`` are
shown; a simulated user clicks. Relevance becomes an *attraction* probability through a documented
map built on the toolkit's gain function (:func:`metrics.gains.gain_values`)::

    a(rel) = eps + (1 - eps) * g(rel) / g(max_label),      g(rel) = 2^rel - 1   (gain="exp2")

so an irrelevant item is still clicked with probability ``eps`` once examined (noise clicks) and the
most relevant one with probability 1.

Click models
------------
* Position-based model (PBM): the item at position r is examined with probability
  ``theta_r = 1 / r^eta`` (or a user-given curve) independently of the other items, and clicked
  when examined and attracted: ``P(click at r) = theta_r * a(item at r)``.
* Cascade model (Craswell et al., 2008): the user scans from the top and stops at the first click;
  ``P(examine r) = prod_{j<r} (1 - a_j)`` and ``P(click at r) = a_r * prod_{j<r} (1 - a_j)``.

Interventions (for propensity estimation, see :mod:`ltr.clicks.propensities.interventions`): a share
``randomize_fraction`` of sessions shows the top-k set in a uniformly random order; a share
``swap_fraction`` swaps the item at position 1 with the item at a position k drawn uniformly from
``1..n_shown`` (k = 1 leaves the list unchanged and is the control group).

The log is flat, one entry per shown item, grouped by session and in shown order. Its
``propensity`` is the *logging* examination probability of the entry, known to the simulator:
``theta_r`` for PBM, ``prod_{j<r}(1 - a_j)`` for the cascade model. Everything is vectorised over
sessions (processed in chunks to bound memory) and deterministic given ``seed``.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from ltr.clicks.logs.click_log import MODE_RANDOMIZED, MODE_SWAP, ClickLog, concat_logs, query_index
from ltr.clicks.simulate import browsing
from ltr.base.errors import LtrError
from metrics.gains import gain_values

__all__ = [
    "MODELS",
    "pbm_examination",
    "attraction",
    "top_k_matrix",
    "simulate_clicks",
    "simulate_click_chunks",
]

MODELS = ("pbm", "cascade", "dbn", "ubm", "trust")

# Sessions x positions cells handled per chunk: bounds the simulator's memory at a few hundred MB.
_CHUNK_CELLS = 2_000_000


def pbm_examination(n_positions: int, eta: float = 1.0) -> np.ndarray:
    """Examination probability of positions ``1..n_positions``: ``theta_r = 1 / r^eta``.

    ``eta = 0`` means no position bias; larger ``eta`` means a steeper fall.

    >>> pbm_examination(4, eta=1.0)
    array([1.        , 0.5       , 0.33333333, 0.25      ])
    >>> pbm_examination(3, eta=0.0)
    array([1., 1., 1.])
    """
    if n_positions < 0:
        raise ValueError(f"n_positions must be >= 0, got {n_positions}")
    if eta < 0:
        raise ValueError(f"eta must be >= 0, got {eta}")
    return np.arange(1, n_positions + 1, dtype=np.float64) ** (-float(eta))


def attraction(labels: Any, *, max_label: float, eps: float = 0.1, gain: Any = "exp2") -> np.ndarray:
    """Click probability of an examined item: ``eps + (1 - eps) * g(rel) / g(max_label)``.

    ``g`` is the toolkit's gain function (``"exp2"``: 2^rel - 1, ``"linear"``: rel, or a callable).
    Labels above ``max_label`` are an error (they would give probabilities above 1).

    >>> attraction(np.array([0, 1, 2]), max_label=2, eps=0.1)
    array([0.1, 0.4, 1. ])
    >>> attraction(np.array([0, 1, 2]), max_label=2, eps=0.0, gain="linear")
    array([0. , 0.5, 1. ])
    """
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"eps must be in [0, 1], got {eps}")
    rel = np.asarray(labels, dtype=np.float64)
    if rel.size and (np.nanmax(rel) > max_label or np.nanmin(rel) < 0):
        raise ValueError(f"labels must lie in [0, max_label={max_label}], got [{rel.min()}, {rel.max()}]")
    top = float(gain_values(np.array([max_label], dtype=np.float64), gain)[0])
    if top <= 0:
        # Every label is 0 (no relevant item possible): only noise clicks remain.
        return np.full(rel.shape, float(eps))
    return eps + (1.0 - eps) * gain_values(rel, gain) / top


def top_k_matrix(scores: Any, query_offsets: Any, top_k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each query's ranking by descending score (ties: input order), cut at ``top_k``.

    Returns ``(shown, n_shown)``: ``shown`` [Q, K] holds row indices in rank order (-1 = padding),
    ``n_shown`` [Q] the number of real entries. K = ``top_k`` or the longest list.

    >>> shown, n = top_k_matrix(np.array([0.1, 0.9, 0.5, 2.0, 1.0]), np.array([0, 3, 5]))
    >>> shown
    array([[ 1,  2,  0],
           [ 3,  4, -1]])
    >>> n
    array([3, 2])
    """
    s = np.asarray(scores, dtype=np.float64)
    offsets = np.asarray(query_offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    if len(s) != offsets[-1]:
        raise ValueError(f"scores has {len(s)} entries, query_offsets covers {offsets[-1]} rows")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN")
    qidx = query_index(offsets)
    # lexsort is stable: rows of one query by descending score, equal scores in input order.
    order = np.lexsort((-s, qidx))
    rank0 = np.arange(len(s)) - offsets[qidx[order]]
    longest = int(lengths.max()) if len(lengths) else 0
    k = longest if top_k is None else min(int(top_k), longest)
    keep = rank0 < k
    shown = np.full((len(lengths), k), -1, dtype=np.int64)
    shown[qidx[order][keep], rank0[keep]] = order[keep]
    return shown, np.minimum(lengths, k)


def _check_click_args(model, sessions_per_query, randomize_fraction, swap_fraction, top_k) -> None:
    if model not in MODELS:
        raise LtrError(f"unknown click model {model!r}: use one of {', '.join(MODELS)}")
    if sessions_per_query < 1:
        raise LtrError(f"sessions_per_query must be >= 1, got {sessions_per_query}")
    for name, value in (("randomize_fraction", randomize_fraction), ("swap_fraction", swap_fraction)):
        if not 0.0 <= value <= 1.0:
            raise LtrError(f"{name} must be in [0, 1], got {value}")
    if randomize_fraction + swap_fraction > 1.0 + 1e-12:
        raise LtrError("randomize_fraction + swap_fraction must not exceed 1")
    if top_k is not None and top_k < 1:
        raise LtrError(f"top_k must be >= 1 or None, got {top_k}")


def _pbm_theta(examination: Sequence[float] | None, eta: float, k: int) -> np.ndarray:
    """PBM examination of positions 1..k: the user curve cut at k, or ``1 / r^eta``."""
    if examination is None:
        return pbm_examination(k, eta)
    theta = np.asarray(examination, dtype=np.float64).ravel()
    if len(theta) < k:
        raise LtrError(f"examination curve has {len(theta)} positions, {k} are shown")
    if ((theta < 0) | (theta > 1)).any():
        raise LtrError("examination probabilities must lie in [0, 1]")
    return theta[:k]


def _session_modes(rng: np.random.Generator, n_sessions: int, randomize_fraction: float, swap_fraction: float) -> np.ndarray:
    """Mode of each session [S] (int8): one uniform draw u, randomized when ``u < randomize_fraction``,
    swap when ``randomize_fraction <= u < randomize_fraction + swap_fraction``, production otherwise."""
    u = rng.random(n_sessions)
    session_mode = np.zeros(n_sessions, dtype=np.int8)
    session_mode[u < randomize_fraction] = MODE_RANDOMIZED
    session_mode[(u >= randomize_fraction) & (u < randomize_fraction + swap_fraction)] = MODE_SWAP
    return session_mode


def _randomize_order(rng, shown, rank, valid, rows) -> None:
    """Shuffle the shown entries of sessions ``rows`` uniformly, in place (padding stays at the end)."""
    k = shown.shape[1]
    # Uniform permutation of the shown entries: sort random keys, padding keys at +inf.
    keys = np.where(valid[rows], rng.random((len(rows), k)), np.inf)
    perm = np.argsort(keys, axis=1, kind="stable")
    shown[rows] = np.take_along_axis(shown[rows], perm, axis=1)
    rank[rows] = np.take_along_axis(rank[rows], perm, axis=1)


def _swap_first(rng, shown, rank, slen, rows) -> np.ndarray:
    """Swap position 1 with a uniform position k in 1..n_shown in sessions ``rows``, in place; returns k."""
    kpos = 1 + np.floor(rng.random(len(rows)) * slen[rows]).astype(np.int64)
    kpos = np.minimum(kpos, slen[rows])  # guards the (measure-zero) u == 1 edge
    col = kpos - 1
    for arr in (shown, rank):
        first = arr[rows, 0].copy()
        arr[rows, 0] = arr[rows, col]
        arr[rows, col] = first
    return kpos


def _draw_clicks(rng, spec: dict, a, s, valid) -> tuple[np.ndarray, np.ndarray]:
    """Clicks [B, K] (bool) given attractions ``a`` [B, K] (relevance probabilities ``s`` for DBN's
    satisfaction and trust bias), and the examination propensity of each cell; then click noise.

    PBM: click when ``u < theta_r a_r``. Cascade: the first cell with ``u < a_r`` is the click, and
    ``P(examined at r) = prod_{j<r} (1 - a_j)``. DBN, UBM, trust bias: :mod:`ltr.clicks.simulate.browsing`.
    """
    model = spec["model"]
    if model in ("dbn", "ubm", "trust"):
        if model == "dbn":
            click, prop = browsing.draw_dbn(rng, a, s, spec["gamma"], valid)
        elif model == "ubm":
            click, prop = browsing.draw_ubm(rng, a, spec["ubm"], valid)
        else:
            click, prop = browsing.draw_trust(rng, s, spec["theta"], spec["eps_plus"], spec["eps_minus"], valid)
        return browsing.add_noise(rng, click, spec["noise"], valid), prop
    draw = rng.random(a.shape)
    if model == "pbm":
        prop = np.broadcast_to(spec["theta"], a.shape)
        click = (draw < prop * a) & valid
        return browsing.add_noise(rng, click, spec["noise"], valid), prop
    hit = (draw < a) & valid
    has = hit.any(axis=1)
    first_hit = np.argmax(hit, axis=1)
    click = np.zeros(a.shape, dtype=bool)
    click[np.flatnonzero(has), first_hit[has]] = True
    # P(examined at r) = prod_{j<r} (1 - a_j): an exclusive cumulative product.
    prop = np.concatenate([np.ones((len(a), 1)), np.cumprod(1.0 - a, axis=1)[:, :-1]], axis=1)
    return browsing.add_noise(rng, click, spec["noise"], valid), prop


def _plackett_luce_lists(scores: Any, query_offsets: np.ndarray, temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """What a Plackett-Luce logger draws from: each query's whole list [Q, L] (row indices, -1 = padding,
    :func:`top_k_matrix`) and its keys ``score / temperature`` (-inf on padding, so padding sorts last)."""
    if not np.isfinite(temperature) or temperature < 0:
        raise LtrError(f"logger_temperature must be a finite number >= 0, got {temperature}")
    full, _ = top_k_matrix(scores, query_offsets, None)
    s = np.asarray(scores, dtype=np.float64)
    keys = np.where(full >= 0, s[np.maximum(full, 0)] / temperature, -np.inf)
    return full, keys


def _plackett_luce_draw(rng, plackett, sq, k: int) -> np.ndarray:
    """The top ``k`` of one Plackett-Luce ranking per session of queries ``sq`` [B, k] (row indices, -1 =
    padding): the Gumbel-max trick, sorting ``score / T + Gumbel noise`` in descending order."""
    full, keys = plackett
    noisy = keys[sq] + rng.gumbel(size=(len(sq), keys.shape[1]))
    order = np.argsort(-noisy, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(full[sq], order, axis=1)


def _simulate_chunk(rng, spec, start, sq, mode, base, n_shown, rows, session_swap, plackett=None) -> tuple[np.ndarray, ...]:
    """Sessions ``start..start+len(sq)-1`` (queries ``sq``, modes ``mode``): their log entries as a tuple
    (session, query, doc, position, logged_rank, click, propensity); swap positions go into ``session_swap``.
    ``rows``: per data-set row, its attraction and its relevance probability (``(attr, rho)``); ``plackett``:
    a stochastic logger's lists and keys (:func:`_plackett_luce_lists`), None for the deterministic ``base``."""
    k = base.shape[1]
    shown = base[sq] if plackett is None else _plackett_luce_draw(rng, plackett, sq, k)
    slen = n_shown[sq]
    valid = np.arange(k)[None, :] < slen[:, None]
    rank = np.broadcast_to(np.arange(1, k + 1), shown.shape).copy()
    # rng order per chunk (order keys, swap positions, click draws) fixes the log of a seed: keep it.
    rnd = np.flatnonzero(mode == MODE_RANDOMIZED)
    if len(rnd):
        _randomize_order(rng, shown, rank, valid, rnd)
    sw = np.flatnonzero(mode == MODE_SWAP)
    if len(sw):
        session_swap[start + sw] = _swap_first(rng, shown, rank, slen, sw)
    cells = np.where(valid, shown, 0)
    a = np.where(valid, rows[0][cells], 0.0)
    s = np.where(valid, rows[1][cells], 0.0)
    click, prop = _draw_clicks(rng, spec, a, s, valid)
    r_idx, c_idx = np.nonzero(valid)
    return (
        start + r_idx,
        sq[r_idx],
        shown[r_idx, c_idx],
        c_idx + 1,
        rank[r_idx, c_idx],
        click[r_idx, c_idx].astype(np.int8),
        np.asarray(prop)[r_idx, c_idx].astype(np.float64),
    )


def _session_chunks(setup: dict, chunk_sessions: int | None, progress: bool) -> Iterator[tuple[int, "ClickLog"]]:
    """The sessions in chunks of ``chunk_sessions`` (default: about ``_CHUNK_CELLS`` cells): ``(start, log)``
    with ``log`` the chunk's sessions numbered from 0 (global id = start + local id).

    Two streams of one seed: the session modes take the first S uniform draws of ``default_rng(seed)``
    (one per session, drawn chunk by chunk), and the clicks a copy of that generator advanced past
    those S draws; so the log is the same as drawing all modes first and then the chunks, and for a
    fixed chunk size the chunks never depend on how many are kept in memory.
    """
    spec, base, n_shown, rows, plackett = setup["spec"], setup["base"], setup["n_shown"], setup["rows"], setup["plackett"]
    nonempty, per_query = setup["nonempty"], setup["sessions_per_query"]
    n_sessions = len(nonempty) * per_query
    mode_rng, rng = np.random.default_rng(setup["seed"]), np.random.default_rng(setup["seed"])
    rng.bit_generator.advance(n_sessions)
    width = base.shape[1] if plackett is None else plackett[0].shape[1]  # a stochastic logger sorts whole lists
    chunk = int(chunk_sessions) if chunk_sessions else max(1, _CHUNK_CELLS // max(width, 1))
    if chunk < 1:
        raise LtrError(f"chunk_sessions must be >= 1, got {chunk_sessions}")
    starts = range(0, n_sessions, chunk)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc=f"simulating {spec['model']} clicks", unit="chunk")
    for start in starts:
        stop = min(n_sessions, start + chunk)
        sq = nonempty[np.arange(start, stop) // per_query]
        mode = _session_modes(mode_rng, stop - start, setup["randomize_fraction"], setup["swap_fraction"])
        swap = np.zeros(stop - start, dtype=np.int64)
        part = _simulate_chunk(rng, spec, 0, sq, mode, base, n_shown, rows, swap, plackett)
        yield start, _assemble_log([part], sq, mode, swap, setup["meta"])


def _click_meta(spec, eta, examination, eps, max_label, gain, k, sessions_per_query, randomize_fraction, swap_fraction,
                seed, offsets) -> dict:
    """The simulator's settings as stored in :attr:`ClickLog.meta` (JSON-able)."""
    model = spec["model"]
    theta = spec.get("theta")
    return {
        "model": model,
        "eta": float(eta) if model in ("pbm", "trust", "ubm") and examination is None else None,
        "examination": theta.tolist() if theta is not None else None,
        "eps": float(eps),
        "max_label": float(max_label),
        "gain": gain if isinstance(gain, str) else getattr(gain, "__name__", "custom"),
        "top_k": int(k),
        "sessions_per_query": int(sessions_per_query),
        "randomize_fraction": float(randomize_fraction),
        "swap_fraction": float(swap_fraction),
        "seed": int(seed),
        "n_queries": int(len(offsets) - 1),
        "n_rows": int(offsets[-1]),
        "noise": float(spec["noise"]),
        "gamma": float(spec["gamma"]) if model == "dbn" else None,
        "ubm_examination": spec["ubm"].tolist() if model == "ubm" else None,
        "eps_plus": spec["eps_plus"].tolist() if model == "trust" else None,
        "eps_minus": spec["eps_minus"].tolist() if model == "trust" else None,
    }


def _model_spec(model, k, eta, examination, gamma, ubm_xi, ubm_matrix, eps_plus, eps_minus, noise) -> dict:
    """What :func:`_draw_clicks` needs of the click model, checked: theta, gamma, the UBM matrix, trust curves."""
    if not 0.0 <= noise <= 1.0:
        raise LtrError(f"click noise must be in [0, 1], got {noise}")
    spec: dict = {"model": model, "noise": float(noise), "theta": None}
    if model in ("pbm", "trust"):
        spec["theta"] = _pbm_theta(examination, eta, k)
    if model == "dbn":
        if not 0.0 <= gamma <= 1.0:
            raise LtrError(f"DBN perseverance gamma must be in [0, 1], got {gamma}")
        spec["gamma"] = float(gamma)
    if model == "ubm":
        spec["ubm"] = (browsing.ubm_examination(k, eta, ubm_xi) if ubm_matrix is None
                       else browsing.check_ubm_matrix(ubm_matrix, k))
    if model == "trust":
        spec["eps_plus"], spec["eps_minus"] = browsing.trust_curves(k, eps_plus, eps_minus)
    return spec


def _assemble_log(parts, session_query, session_mode, session_swap, meta) -> ClickLog:
    """One :class:`ClickLog` from the chunks' entry tuples and the session arrays."""

    def cat(i: int, dtype) -> np.ndarray:
        return np.concatenate([p[i] for p in parts]).astype(dtype) if parts else np.zeros(0, dtype=dtype)

    return ClickLog(
        session=cat(0, np.int64),
        query=cat(1, np.int64),
        doc=cat(2, np.int64),
        position=cat(3, np.int64),
        logged_rank=cat(4, np.int64),
        click=cat(5, np.int8),
        propensity=cat(6, np.float64),
        session_query=session_query.astype(np.int64),
        session_mode=session_mode,
        session_swap=session_swap,
        meta=meta,
    )


# long: the simulator's one public entry point; its parameters are documented together in the docstring
def simulate_clicks(
    labels: Any,
    query_offsets: Any,
    scores: Any,
    *,
    model: str = "pbm",
    eta: float = 1.0,
    examination: Sequence[float] | None = None,
    eps: float = 0.1,
    max_label: float | None = None,
    gain: Any = "exp2",
    top_k: int | None = 10,
    sessions_per_query: int = 1,
    randomize_fraction: float = 0.0,
    swap_fraction: float = 0.0,
    seed: int = 0,
    progress: bool = False,
    gamma: float = 0.9,
    ubm_xi: float | None = None,
    ubm_matrix: Any = None,
    eps_plus: Any = None,
    eps_minus: Any = None,
    noise: float = 0.0,
    logger_temperature: float = 0.0,
) -> ClickLog:
    """Simulate click sessions on each query's ranking by ``scores`` (the logging ranker).

    Parameters
    ----------
    labels, query_offsets : the data set's graded labels [N] and query offsets [Q+1].
    scores : the logging ranker's scores [N] (higher = shown earlier; ties keep input order).
    model : ``"pbm"`` (position-based), ``"cascade"``, ``"dbn"`` (dynamic Bayesian network),
        ``"ubm"`` (user browsing model) or ``"trust"`` (PBM with trust bias); see
        :mod:`ltr.clicks.simulate.browsing` for the last three.
    eta : PBM / trust examination ``theta_r = 1/r^eta`` (ignored when ``examination`` is given);
        UBM's default matrix ``r^-(eta - xi) d^-xi``.
    examination : PBM / trust examination per position 1..K (a user curve), overrides ``eta``.
    eps, max_label, gain : the attraction map ``eps + (1-eps) g(rel)/g(max_label)``; ``max_label``
        defaults to the largest label in the data. DBN's satisfaction and trust bias's relevance
        probability are ``rho = g(rel)/g(max_label)`` (the map with eps = 0).
    top_k : number of items shown per session (``None``: the whole list).
    sessions_per_query : sessions simulated for each non-empty query.
    randomize_fraction, swap_fraction : shares of sessions with a random order / a swap of position
        1 with a uniform position k in 1..n_shown.
    seed : the random seed; the log is a deterministic function of all the arguments.
    progress : show a tqdm bar over chunks of sessions.
    gamma : DBN perseverance (probability of going on after an unsatisfied position).
    ubm_xi, ubm_matrix : UBM's distance exponent (default eta / 2) or a full matrix ``G[r-1, d-1]``.
    eps_plus, eps_minus : trust bias click probabilities of an examined relevant / non-relevant
        item (scalars or curves over positions; defaults 1 and 0.65 / r).
    noise : probability of a spurious click on every shown item, after the model's clicks.
    logger_temperature : 0 (default): every session of a query shows the same ranking, by ``scores``.
        T > 0: a stochastic (Plackett-Luce) logger; each session ranks the query's items by
        ``scores / T + G`` with G standard Gumbel noise, which draws the ranking item by item with
        ``P(d next) = exp(s_d / T) / sum of exp(s / T) over the items not yet placed``, then shows its
        top ``top_k``. Every item then reaches the top k with a positive probability, so the log
        carries evidence about items a deterministic logger never shows (see the ``policy-aware``
        estimator of :mod:`ltr.clicks.estimators.unbiased`). The logged rank of such a session is its shown rank.

    Expected click rates (what the tests check): under PBM, ``P(click at r) = theta_r * a(item at r)``;
    under the cascade model, ``a_r * prod_{j<r} (1 - a_j)``; the others in :mod:`ltr.clicks.simulate.browsing`.
    The logged propensity is the examination probability of the entry: ``theta_r`` (PBM, trust),
    the list's ``P(E_r)`` (cascade, DBN), ``G[r, d]`` given the session's earlier clicks (UBM).
    """
    setup = _setup(labels, query_offsets, scores, dict(
        model=model, eta=eta, examination=examination, eps=eps, max_label=max_label, gain=gain, top_k=top_k,
        sessions_per_query=sessions_per_query, randomize_fraction=randomize_fraction, swap_fraction=swap_fraction,
        seed=seed, gamma=gamma, ubm_xi=ubm_xi, ubm_matrix=ubm_matrix, eps_plus=eps_plus, eps_minus=eps_minus, noise=noise,
        logger_temperature=logger_temperature))
    return concat_logs([log for _, log in _session_chunks(setup, None, progress)], setup["meta"])


def simulate_click_chunks(labels: Any, query_offsets: Any, scores: Any, *, chunk_sessions: int | None = None,
                          progress: bool = False, **options) -> tuple[dict, Iterator[tuple[int, ClickLog]]]:
    """:func:`simulate_clicks` in chunks of sessions, for logs larger than memory: ``(meta, chunks)``
    with ``chunks`` yielding ``(start, log)``, ``log`` holding sessions ``start..start+len-1`` numbered
    from 0. ``options`` are :func:`simulate_clicks`' keywords.

    With the default ``chunk_sessions`` (about 2*10^6 cells per chunk) the concatenated chunks are
    exactly ``simulate_clicks(...)`` of the same seed. The click draws are taken chunk by chunk, so
    another chunk size gives another, equally deterministic, draw of the same model, except where the
    model draws one uniform per cell in session order (PBM and cascade without interventions or
    noise), whose log is the same for every chunk size.
    """
    bad = set(options) - set(_OPTIONS)
    if bad:
        raise TypeError(f"simulate_click_chunks() got unexpected keyword arguments: {', '.join(sorted(bad))}")
    setup = _setup(labels, query_offsets, scores, {**_OPTIONS, **options})
    return setup["meta"], _session_chunks(setup, chunk_sessions, progress)


_OPTIONS = dict(model="pbm", eta=1.0, examination=None, eps=0.1, max_label=None, gain="exp2", top_k=10,
                sessions_per_query=1, randomize_fraction=0.0, swap_fraction=0.0, seed=0, gamma=0.9, ubm_xi=None,
                ubm_matrix=None, eps_plus=None, eps_minus=None, noise=0.0, logger_temperature=0.0)


def _setup(labels: Any, query_offsets: Any, scores: Any, o: dict) -> dict:
    """Checked inputs of the simulator: the shown lists, attractions, the click model's spec and meta."""
    _check_click_args(o["model"], o["sessions_per_query"], o["randomize_fraction"], o["swap_fraction"], o["top_k"])
    lab = np.asarray(labels, dtype=np.float64)
    offsets = np.asarray(query_offsets, dtype=np.int64)
    if len(lab) != offsets[-1]:
        raise ValueError(f"labels has {len(lab)} entries, query_offsets covers {offsets[-1]} rows")
    max_label = o["max_label"]
    if max_label is None:
        max_label = float(lab.max()) if len(lab) else 0.0
    gain, eps = o["gain"], o["eps"]
    rows = (attraction(lab, max_label=max_label, eps=eps, gain=gain), attraction(lab, max_label=max_label, eps=0.0, gain=gain))
    base, n_shown = top_k_matrix(scores, offsets, o["top_k"])
    k = base.shape[1]
    spec = _model_spec(o["model"], k, o["eta"], o["examination"], o["gamma"], o["ubm_xi"], o["ubm_matrix"],
                       o["eps_plus"], o["eps_minus"], o["noise"])
    meta = _click_meta(spec, o["eta"], o["examination"], eps, max_label, gain, k, o["sessions_per_query"],
                       o["randomize_fraction"], o["swap_fraction"], o["seed"], offsets)
    temperature = float(o["logger_temperature"])
    plackett = _plackett_luce_lists(scores, offsets, temperature) if temperature != 0 else None
    meta["logger_temperature"] = temperature
    return {"spec": spec, "base": base, "n_shown": n_shown, "rows": rows, "nonempty": np.flatnonzero(n_shown > 0),
            "sessions_per_query": int(o["sessions_per_query"]), "seed": o["seed"], "meta": meta, "plackett": plackett,
            "randomize_fraction": o["randomize_fraction"], "swap_fraction": o["swap_fraction"]}
