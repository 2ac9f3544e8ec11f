"""Where an estimator's propensities come from, said truly, and the refusals when a log cannot give them.

The estimators that divide clicks by examination propensities (``ips``, ``policy-aware``, IPS / SNIPS /
policy-aware evaluation) read them from the log's ``propensity`` column unless a curve is given. A log
without that column (a user's own log, say) holds 1.0 as a placeholder: dividing by it would be naive clicks
under another name, so they refuse, naming the ways to get propensities. A record (``clicks_training.json``,
``ltr clicks evaluate``'s report) states the source it used:

* ``logged (simulator's truth)``: the column of a log ``ltr clicks simulate`` wrote (its meta names the model);
* ``logged (the log's propensity column)``: the column of any other log;
* the source of a given curve: an estimate (``estimated ...``) or a file (``file PATH``).

A log without a single click is refused by every estimator (:func:`require_clicks`): nothing in it says which
items users preferred.
"""

from __future__ import annotations

from ltr.base.errors import LtrError

__all__ = ["NEEDS_PROPENSITY", "logged_source", "require_propensity", "missing_propensity", "require_clicks"]

#: the training estimators that divide by the logged propensity when no curve is given
NEEDS_PROPENSITY = ("ips", "policy-aware", "doubly-robust")

WAYS = ("--propensity estimated (estimated from this log: its randomized or swap sessions when it has them, "
        "else regression EM on its production sessions), --propensity-file CURVE (one propensity per position: the "
        "JSON of `ltr clicks estimate --method em|harvest --json`, the clicks_training.json of --estimator dla, or "
        "a text file), or a propensity column in the log; --estimator rem and dla estimate them while they train")


def logged_source(meta: dict) -> str | None:
    """The source of a log's logged propensities (module docstring), None when it has no propensity column."""
    if meta.get("propensity") == "absent":
        return None
    return "logged (simulator's truth)" if meta.get("model") else "logged (the log's propensity column)"


def missing_propensity(what: str, log: str | None = None) -> LtrError:
    """The refusal of ``what`` (``--estimator ips``, ``ips``) on a log without propensities."""
    name = f"--log {log}" if log else "the click log"
    return LtrError(f"{what} divides clicks by examination propensities, and {name} has no propensity column (they "
                    f"are not taken as 1.0: that would be naive clicks); give {WAYS}")


def require_propensity(meta: dict, what: str, log: str | None = None) -> str:
    """The logged propensities' source, or the refusal of :func:`missing_propensity`."""
    source = logged_source(meta)
    if source is None:
        raise missing_propensity(what, log)
    return source


def require_clicks(n_clicks: float, n_sessions: int | None = None, log: str | None = None) -> None:
    """Refuse a log without a click (module docstring)."""
    if n_clicks <= 0:
        name = f"--log {log}" if log else "the click log"
        sessions = f" ({n_sessions} sessions)" if n_sessions is not None else ""
        raise LtrError(f"{name} has no click{sessions}: no estimator can learn which items users preferred from it")
