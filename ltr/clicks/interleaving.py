"""Team-draft interleaving (Radlinski, Kurup and Joachims, CIKM 2008) on simulated users.

Two rankers A and B each order a query's items. Team draft builds the shown list in rounds: the
team with fewer picks so far picks next (a fair coin decides when both have as many), and a team
picks its highest-ranked item not yet shown. Each shown item belongs to the team that picked it.
A simulated user clicks on the interleaved list (any model of :mod:`ltr.clicks.click_models`);
the session is a win for A when A's items got more clicks than B's, a loss when fewer, a tie
otherwise (including no click). Over n sessions::

    preference(A over B) = (wins_A + ties / 2) / n        (0.5: no preference)
    p-value: two-sided sign test on the sessions that are not ties (binomial with p = 1/2)

Sessions needed to detect a preference (normal approximation of the sign test, level alpha, power
1 - beta), with w = P(A wins | not a tie) and t the tie rate::

    n = [ (z_{1-alpha/2} * 0.5 + z_{1-beta} * sqrt(w (1 - w))) / (w - 0.5) ]^2 / (1 - t)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ltr.clicks.click_models import _model_spec, attraction, top_k_matrix
from ltr.errors import LtrError

__all__ = ["team_draft", "InterleavingResult", "interleave_sessions", "sessions_to_detect"]


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


def interleave_sessions(labels: Any, query_offsets: Any, scores_a: Any, scores_b: Any, *, sessions_per_query: int = 10,
                        top_k: int = 10, model: str = "pbm", eta: float = 1.0, eps: float = 0.1, max_label: float | None = None,
                        seed: int = 0, **model_options) -> InterleavingResult:
    """Team-draft interleave ``scores_a`` and ``scores_b`` on every non-empty query, simulate clicks with
    ``model`` (options as :func:`ltr.clicks.click_models.simulate_clicks`) and credit the teams."""
    from ltr.clicks.click_models import _draw_clicks

    if sessions_per_query < 1 or top_k < 1:
        raise LtrError(f"sessions_per_query and top_k must be >= 1, got {sessions_per_query}, {top_k}")
    lab = np.asarray(labels, dtype=np.float64)
    offsets = np.asarray(query_offsets, dtype=np.int64)
    max_label = float(lab.max()) if max_label is None else float(max_label)
    rng = np.random.default_rng(seed)
    shown, team, session_query = _interleaved_lists(rng, scores_a, scores_b, offsets, sessions_per_query, top_k)
    valid = shown >= 0
    cells = np.where(valid, shown, 0)
    a = np.where(valid, attraction(lab, max_label=max_label, eps=eps)[cells], 0.0)
    rho = np.where(valid, attraction(lab, max_label=max_label, eps=0.0)[cells], 0.0)
    spec = _model_spec(model, top_k, eta, model_options.get("examination"), model_options.get("gamma", 0.9),
                       model_options.get("ubm_xi"), model_options.get("ubm_matrix"), model_options.get("eps_plus"),
                       model_options.get("eps_minus"), model_options.get("noise", 0.0))
    click, _ = _draw_clicks(rng, spec, a, rho, valid)
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
