"""Team-draft interleaving (Radlinski, Kurup and Joachims, CIKM 2008) on simulated users.

Two rankers A and B each order a query's items. Team draft builds the shown list in rounds: the
team with fewer picks so far picks next (a fair coin decides when both have as many), and a team
picks its highest-ranked item not yet shown. Each shown item belongs to the team that picked it.
A simulated user clicks on the interleaved list (any model of :mod:`ltr.clicks.simulate.click_models`);
the session is a win for A when A's items got more clicks than B's, a loss when fewer, a tie
otherwise (including no click). Over n sessions::

    preference(A over B) = (wins_A + ties / 2) / n        (0.5: no preference)
    p-value: two-sided sign test on the sessions that are not ties (binomial with p = 1/2)

Sessions needed to detect a preference (normal approximation of the sign test, level alpha, power
1 - beta), with w = P(A wins | not a tie) and t the tie rate::

    n = [ (z_{1-alpha/2} * 0.5 + z_{1-beta} * sqrt(w (1 - w))) / (w - 0.5) ]^2 / (1 - t)

Probabilistic interleaving (Hofmann, Whiteson and de Rijke, CIKM 2011) makes each ranker a softmax over
its own ranks, ``P_X(d) = r_X(d)^-tau / sum_{d' left} r_X(d')^-tau`` (tau = 3; ranks are the rankers'
original ones, the sum runs over the documents not placed yet). Each position of the shown list goes to
a ranker drawn by a fair coin, which samples a document from its softmax over what is left. Instead of
the drawn assignment, the comparison marginalises over every assignment that could have produced the
shown list: since the prior is uniform and ``P(list | assignment)`` is a product over positions, the
posterior assigns position r to A independently with probability

    q_r = P_A(d_r | left_r) / (P_A(d_r | left_r) + P_B(d_r | left_r))

and a session's outcome is the expected sign of (clicks credited to A - clicks credited to B) under
those independent assignments of its clicked positions, a number in [-1, 1] (computed exactly by a
dynamic programme over the clicked positions). Over sessions: the mean outcome, a t-test of mean 0, and

    n = ((z_{1-alpha/2} + z_{1-beta}) * sd / mean)^2          (:func:`sessions_to_detect_mean`)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ltr.clicks.simulate.click_models import _model_spec, attraction, top_k_matrix
from ltr.base.errors import LtrError

__all__ = ["team_draft", "InterleavingResult", "interleave_sessions", "sessions_to_detect", "softmax_ranker_weights",
           "probabilistic_lists", "expected_outcome", "ProbabilisticResult", "probabilistic_sessions",
           "sessions_to_detect_mean", "compare_interleaving"]


def team_draft(ranking_a: np.ndarray, ranking_b: np.ndarray, coins: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """One team-draft list of length ``min(k, n)`` from two orders of the same ``n`` items.

    ``coins``: one bit per round (used when both teams have as many picks; 1 means A picks first).
    Returns ``(items, team)`` with ``team`` 0 for A's picks and 1 for B's.

    >>> team_draft(np.array([0, 1, 2]), np.array([2, 1, 0]), np.array([1, 1]), 3)
    (array([0, 2, 1]), array([0, 1, 0]))
    """
    n = min(k, len(ranking_a))
    shown: list[int] = []
    team: list[int] = []
    taken = set()
    picks = [0, 0]
    heads = [0, 0]
    orders = (ranking_a, ranking_b)
    rounds = 0
    while len(shown) < n:
        if picks[0] == picks[1]:
            side = 0 if coins[rounds % len(coins)] else 1
            rounds += 1
        else:
            side = 0 if picks[0] < picks[1] else 1
        order = orders[side]
        while order[heads[side]] in taken:
            heads[side] += 1
        item = int(order[heads[side]])
        taken.add(item)
        shown.append(item)
        team.append(side)
        picks[side] += 1
    return np.array(shown, dtype=np.int64), np.array(team, dtype=np.int64)


@dataclass
class InterleavingResult:
    """Per-session credits and outcomes, with the summary of the module docstring."""

    credit_a: np.ndarray
    credit_b: np.ndarray
    session_query: np.ndarray

    @property
    def wins(self) -> int:
        return int((self.credit_a > self.credit_b).sum())

    @property
    def losses(self) -> int:
        return int((self.credit_a < self.credit_b).sum())

    @property
    def ties(self) -> int:
        return int(len(self.credit_a) - self.wins - self.losses)

    @property
    def preference(self) -> float:
        return (self.wins + 0.5 * self.ties) / max(len(self.credit_a), 1)

    def p_value(self) -> float:
        from scipy.stats import binomtest

        decided = self.wins + self.losses
        return 1.0 if decided == 0 else float(binomtest(self.wins, decided, 0.5).pvalue)

    def summary(self) -> dict:
        return {"sessions": len(self.credit_a), "wins_a": self.wins, "wins_b": self.losses, "ties": self.ties,
                "preference_a": self.preference, "p_value": self.p_value()}


def _interleaved_lists(rng, scores_a, scores_b, offsets, sessions_per_query, k):
    """Shown rows [S, K] (-1 padding), team [S, K] and each session's query."""
    rank_a, n_a = top_k_matrix(scores_a, offsets, None)
    rank_b, _ = top_k_matrix(scores_b, offsets, None)
    queries = np.flatnonzero(n_a > 0)
    session_query = np.repeat(queries, sessions_per_query)
    shown = np.full((len(session_query), k), -1, dtype=np.int64)
    team = np.full((len(session_query), k), -1, dtype=np.int64)
    coins = rng.random((len(session_query), k)) < 0.5
    for s, q in enumerate(session_query):
        n = int(n_a[q])
        items, t = team_draft(rank_a[q, :n], rank_b[q, :n], coins[s], k)
        shown[s, : len(items)] = items
        team[s, : len(items)] = t
    return shown, team, session_query


def _user_clicks(rng, shown, lab, max_label, eps, model, eta, model_options) -> np.ndarray:
    """Clicks [S, K] of simulated users on the shown lists (-1 padding) under ``model``."""
    from ltr.clicks.simulate.click_models import _draw_clicks

    valid = shown >= 0
    cells = np.where(valid, shown, 0)
    a = np.where(valid, attraction(lab, max_label=max_label, eps=eps)[cells], 0.0)
    rho = np.where(valid, attraction(lab, max_label=max_label, eps=0.0)[cells], 0.0)
    spec = _model_spec(model, shown.shape[1], eta, model_options.get("examination"), model_options.get("gamma", 0.9),
                       model_options.get("ubm_xi"), model_options.get("ubm_matrix"), model_options.get("eps_plus"),
                       model_options.get("eps_minus"), model_options.get("noise", 0.0))
    click, _ = _draw_clicks(rng, spec, a, rho, valid)
    return click


def interleave_sessions(labels: Any, query_offsets: Any, scores_a: Any, scores_b: Any, *, sessions_per_query: int = 10,
                        top_k: int = 10, model: str = "pbm", eta: float = 1.0, eps: float = 0.1, max_label: float | None = None,
                        seed: int = 0, **model_options) -> InterleavingResult:
    """Team-draft interleave ``scores_a`` and ``scores_b`` on every non-empty query, simulate clicks with
    ``model`` (options as :func:`ltr.clicks.simulate.click_models.simulate_clicks`) and credit the teams."""
    if sessions_per_query < 1 or top_k < 1:
        raise LtrError(f"sessions_per_query and top_k must be >= 1, got {sessions_per_query}, {top_k}")
    lab = np.asarray(labels, dtype=np.float64)
    offsets = np.asarray(query_offsets, dtype=np.int64)
    max_label = float(lab.max()) if max_label is None else float(max_label)
    rng = np.random.default_rng(seed)
    shown, team, session_query = _interleaved_lists(rng, scores_a, scores_b, offsets, sessions_per_query, top_k)
    click = _user_clicks(rng, shown, lab, max_label, eps, model, eta, model_options)
    credit_a = (click & (team == 0)).sum(axis=1)
    credit_b = (click & (team == 1)).sum(axis=1)
    return InterleavingResult(credit_a, credit_b, session_query)


def sessions_to_detect(win_rate: float, tie_rate: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Sessions for a two-sided sign test at ``alpha`` to detect ``win_rate`` != 0.5 with ``power``.

    >>> round(sessions_to_detect(0.6, 0.0), 1)   # ((1.96 * 0.5 + 0.8416 * 0.4899) / 0.1)^2
    193.8
    """
    from scipy.stats import norm

    if not 0.0 <= tie_rate < 1.0 or not 0.0 < win_rate < 1.0:
        raise LtrError(f"win_rate must be in (0, 1) and tie_rate in [0, 1), got {win_rate}, {tie_rate}")
    if win_rate == 0.5:
        return float("inf")
    za, zb = norm.ppf(1 - alpha / 2), norm.ppf(power)
    n = ((za * 0.5 + zb * np.sqrt(win_rate * (1 - win_rate))) / (win_rate - 0.5)) ** 2
    return float(n / (1.0 - tie_rate))


def softmax_ranker_weights(ranking: np.ndarray, n_items: int, tau: float = 3.0) -> np.ndarray:
    """Unnormalised softmax-ranker weights ``r(d)^-tau`` of items ``0..n_items-1`` given their order.

    >>> softmax_ranker_weights(np.array([2, 0, 1]), 3, tau=1.0).tolist()
    [0.5, 0.3333333333333333, 1.0]
    """
    w = np.zeros(n_items)
    w[np.asarray(ranking, dtype=np.int64)] = np.arange(1, len(ranking) + 1, dtype=np.float64) ** (-float(tau))
    return w


def probabilistic_lists(rng, weights_a: np.ndarray, weights_b: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw one interleaved list per row: ``weights_*`` [S, N] (0 = no item); returns ``shown`` [S, K]
    (-1 padding) and ``q`` [S, K], the posterior probability that each position came from A.

    At each position a fair coin picks a ranker, which samples an item with probability proportional to
    its weight among the items not yet shown.
    """
    s, n = weights_a.shape
    left = (weights_a > 0) | (weights_b > 0)
    shown = np.full((s, k), -1, dtype=np.int64)
    q = np.full((s, k), 0.5)
    rows = np.arange(s)
    for r in range(min(k, n)):
        wa, wb = np.where(left, weights_a, 0.0), np.where(left, weights_b, 0.0)
        za, zb = wa.sum(axis=1), wb.sum(axis=1)
        alive = (za > 0) & (zb > 0)
        if not alive.any():
            break
        pick_a = rng.random(s) < 0.5
        w = np.where(pick_a[:, None], wa, wb)
        cdf = np.cumsum(w, axis=1)
        u = rng.random(s) * cdf[:, -1]
        item = np.minimum((cdf <= u[:, None]).sum(axis=1), n - 1)
        pa = wa[rows, item] / np.where(za > 0, za, 1.0)
        pb = wb[rows, item] / np.where(zb > 0, zb, 1.0)
        shown[alive, r] = item[alive]
        q[alive, r] = pa[alive] / (pa[alive] + pb[alive])
        left[rows[alive], item[alive]] = False
    return shown, q


def expected_outcome(click: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per session ``E[sign(credit_A - credit_B)]`` when each clicked position r is A's with probability
    ``q[:, r]`` independently (``click``, ``q``: [S, K]); +1 favours A.

    >>> expected_outcome(np.array([[1, 1, 0]]), np.array([[0.9, 0.6, 0.5]])).round(6).tolist()   # .54 - .04
    [0.5]
    """
    c = np.asarray(click, dtype=bool)
    s, k = c.shape
    # dist[:, j]: probability that A holds j - m of the m clicked positions seen so far, j in 0..2K (offset K)
    dist = np.zeros((s, 2 * k + 1))
    dist[:, k] = 1.0
    for r in range(k):
        p = np.where(c[:, r], q[:, r], 0.0)[:, None]
        moved = np.zeros_like(dist)
        moved[:, 1:] += dist[:, :-1] * p          # A gets the click: difference + 1
        moved[:, :-1] += dist[:, 1:] * np.where(c[:, r], 1.0 - q[:, r], 0.0)[:, None]   # B gets it: - 1
        dist = np.where(c[:, r][:, None], moved, dist)
    return dist[:, k + 1 :].sum(axis=1) - dist[:, :k].sum(axis=1)


@dataclass
class ProbabilisticResult:
    """Per-session expected outcomes (+1 favours A) of probabilistic interleaving; see the module docstring."""

    outcome: np.ndarray
    session_query: np.ndarray

    @property
    def mean(self) -> float:
        return float(self.outcome.mean()) if len(self.outcome) else 0.0

    @property
    def preference(self) -> float:
        """``(1 + mean outcome) / 2``: 0.5 is no preference, as for team draft."""
        return 0.5 * (1.0 + self.mean)

    def p_value(self) -> float:
        from scipy.stats import ttest_1samp

        if len(self.outcome) < 2 or np.all(self.outcome == self.outcome[0]):
            return 1.0 if self.mean == 0 else 0.0
        return float(ttest_1samp(self.outcome, 0.0).pvalue)

    def summary(self) -> dict:
        o = self.outcome
        return {"sessions": len(o), "wins_a": int((o > 0).sum()), "wins_b": int((o < 0).sum()),
                "ties": int((o == 0).sum()), "mean_outcome": self.mean, "preference_a": self.preference,
                "p_value": self.p_value()}


def probabilistic_sessions(labels: Any, query_offsets: Any, scores_a: Any, scores_b: Any, *, sessions_per_query: int = 10,
                           top_k: int = 10, tau: float = 3.0, model: str = "pbm", eta: float = 1.0, eps: float = 0.1,
                           max_label: float | None = None, seed: int = 0, **model_options) -> ProbabilisticResult:
    """Probabilistic interleaving of ``scores_a`` and ``scores_b`` (softmax rankers with ``tau``) on every
    non-empty query; clicks from ``model`` as in :func:`interleave_sessions`; marginalised outcomes."""
    if sessions_per_query < 1 or top_k < 1 or tau <= 0:
        raise LtrError(f"sessions_per_query and top_k must be >= 1 and tau > 0, got {sessions_per_query}, {top_k}, {tau}")
    lab = np.asarray(labels, dtype=np.float64)
    offsets = np.asarray(query_offsets, dtype=np.int64)
    max_label = float(lab.max()) if max_label is None else float(max_label)
    rng = np.random.default_rng(seed)
    rank_a, n_a = top_k_matrix(scores_a, offsets, None)
    rank_b, _ = top_k_matrix(scores_b, offsets, None)
    queries = np.flatnonzero(n_a > 0)
    width = rank_a.shape[1]
    pos = np.arange(1, width + 1, dtype=np.float64) ** (-float(tau))
    outcomes = []
    step = max(1, 200_000 // (width * sessions_per_query))  # about 200,000 cells of [sessions, items] per chunk
    for start in range(0, len(queries), step):
        sq = np.repeat(queries[start : start + step], sessions_per_query)
        # weights over the query's items, by column (item = offset + column)
        cols_a = np.where(rank_a[sq] >= 0, rank_a[sq] - offsets[sq][:, None], -1)
        cols_b = np.where(rank_b[sq] >= 0, rank_b[sq] - offsets[sq][:, None], -1)
        wa, wb = np.zeros((len(sq), width)), np.zeros((len(sq), width))
        r_idx, c_idx = np.nonzero(cols_a >= 0)
        wa[r_idx, cols_a[r_idx, c_idx]] = pos[c_idx]
        r_idx, c_idx = np.nonzero(cols_b >= 0)
        wb[r_idx, cols_b[r_idx, c_idx]] = pos[c_idx]
        shown_col, q = probabilistic_lists(rng, wa, wb, min(top_k, width))
        shown = np.where(shown_col >= 0, shown_col + offsets[sq][:, None], -1)
        click = _user_clicks(rng, shown, lab, max_label, eps, model, eta, model_options)
        outcomes.append(expected_outcome(click, q))
    session_query = np.repeat(queries, sessions_per_query)
    return ProbabilisticResult(np.concatenate(outcomes) if outcomes else np.zeros(0), session_query)


def sessions_to_detect_mean(outcome: Any, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Sessions for a two-sided z-test of mean 0 on per-session outcomes (any of [-1, 1]) to detect their
    measured mean with ``power``: ``((z_{1-alpha/2} + z_{1-beta}) sd / mean)^2``.

    >>> round(sessions_to_detect_mean([1, 1, 1, -1]), 1)   # mean 0.5, sd 0.866
    23.5
    """
    from scipy.stats import norm

    o = np.asarray(outcome, dtype=np.float64)
    if len(o) < 2:
        raise LtrError(f"sessions_to_detect_mean needs at least 2 outcomes, got {len(o)}")
    m, sd = o.mean(), o.std()
    if m == 0:
        return float("inf")
    return float(((norm.ppf(1 - alpha / 2) + norm.ppf(power)) * sd / m) ** 2)


def compare_interleaving(labels: Any, query_offsets: Any, rankers: dict, *, sessions_per_query: int = 20, k: int = 10,
                         seed: int = 0, **options) -> list[dict]:
    """Team draft and probabilistic interleaving of every pair of ``rankers`` (name -> scores), beside
    their NDCG@k on ``labels``: per pair the NDCG difference, each method's preference for A, p-value,
    sessions needed to detect its measured preference (sign test for team draft, and the z-test on the
    mean outcome for both) and whether it prefers the ranker with the higher NDCG."""
    import itertools

    import metrics

    lab = np.asarray(labels, dtype=np.float64)
    ndcg = {}
    for name, scores in rankers.items():
        ev = metrics.evaluate(np.asarray(scores, dtype=np.float64), lab, query_offsets, [f"ndcg@{k}"])
        ndcg[name] = float(ev.mean[ev.names[f"ndcg@{k}"]])
    rows = []
    for i, (a, b) in enumerate(itertools.combinations(rankers, 2)):
        td = interleave_sessions(lab, query_offsets, rankers[a], rankers[b], sessions_per_query=sessions_per_query,
                                 top_k=k, seed=seed + i, **options)
        pi = probabilistic_sessions(lab, query_offsets, rankers[a], rankers[b], sessions_per_query=sessions_per_query,
                                    top_k=k, seed=seed + i, **options)
        td_outcome = np.sign(td.credit_a - td.credit_b).astype(np.float64)
        decided = td.wins + td.losses
        delta = ndcg[a] - ndcg[b]
        rows.append({
            "a": a, "b": b, "ndcg_a": ndcg[a], "ndcg_b": ndcg[b], "delta_ndcg": delta,
            "td_preference": td.preference, "td_p": td.p_value(),
            "td_sessions_sign": (sessions_to_detect(td.wins / decided, td.ties / len(td_outcome))
                                 if decided and td.wins != td.losses else float("inf")),
            "td_sessions": sessions_to_detect_mean(td_outcome),
            "pi_preference": pi.preference, "pi_p": pi.p_value(), "pi_sessions": sessions_to_detect_mean(pi.outcome),
            "td_agrees": bool(np.sign(td.preference - 0.5) == np.sign(delta)),
            "pi_agrees": bool(np.sign(pi.preference - 0.5) == np.sign(delta)),
        })
    return rows
