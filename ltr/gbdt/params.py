"""An engine's parameters checked before any work, as the toolkit's own options are: names and ranges.

``ltr gbdt --param KEY=VALUE``, the ``[lightgbm]`` / ``[xgboost]`` / ``[catboost]`` tables of a TOML
file and ``ltr tune``'s spaces pass parameters to the engine's library as they are. Left to the
library, a misspelt name is a warning that scrolls away (XGBoost's "Parameters: { "max_dept" } are not
used", LightGBM's "Unknown parameter") or a raw C++ message (CatBoost's ``depth = 40``: "Maximum tree
depth is 16"). Here, before any data is read, :func:`check_engine_params` refuses with one line naming
the option and the key:

1. the value's type: a number, true/false, text or a list of them (TOML's tables and NaN are refused);
2. the value's range, for the engine's common numeric parameters (:data:`ENGINE_RULES`, the same
   words as every option's rule; a LightGBM alias is checked by its parameter's rule);
3. the name, by the library itself: LightGBM's list of every parameter and alias (its C API's
   ``LGBM_DumpParamAliases``), XGBoost's own report of the parameters a booster of the objective did
   not use (on a dry run of one round on four rows) and CatBoost's own parameter check (the one its
   ``fit`` runs first), whose refusal of a value also becomes one line naming the key.

A misspelt name is refused with the closest known names (``difflib``).
"""

from __future__ import annotations

import difflib
import math
import re
import warnings
from typing import Any

import numpy as np

from ltr.base.checks import Rule, integer, number
from ltr.base.errors import LtrError

__all__ = ["ENGINE_RULES", "LIGHTGBM_RULES", "check_param_values", "check_engine_params"]

# [lightgbm] keys that ltr gbdt has options for, or whose range LightGBM's documentation states: the
# same rule for --num-leaves, a TOML value and a searched range of ltr tune.
LIGHTGBM_RULES: dict[str, Rule] = {
    "num_leaves": integer(min=2, max=131072), "learning_rate": number(above=0), "max_depth": integer(),
    "min_data_in_leaf": integer(min=0), "min_sum_hessian_in_leaf": number(min=0), "bagging_freq": integer(min=0),
    "bagging_fraction": number(above=0, max=1), "feature_fraction": number(above=0, max=1),
    "lambda_l1": number(min=0), "lambda_l2": number(min=0), "min_gain_to_split": number(min=0),
    "max_bin": integer(min=2), "num_threads": integer(min=0),
}
_UNIT = number(above=0, max=1)
# XGBoost's documented ranges (parameter.rst), its aliases under their own names; a learning rate of
# 0 (allowed by XGBoost) trains nothing, so it is refused as the toolkit's --learning-rate refuses it
XGBOOST_RULES: dict[str, Rule] = {
    **{name: number(above=0) for name in ("eta", "learning_rate")},
    **{name: number(min=0) for name in ("gamma", "min_split_loss", "lambda", "reg_lambda", "alpha", "reg_alpha",
                                        "min_child_weight", "max_delta_step")},
    "max_depth": integer(min=0), "max_leaves": integer(min=0), "max_bin": integer(min=2),
    "num_parallel_tree": integer(min=1), "nthread": integer(min=0), "n_jobs": integer(min=0),
    **{name: _UNIT for name in ("subsample", "colsample_bytree", "colsample_bylevel", "colsample_bynode")},
    "lambdarank_num_pair_per_sample": integer(min=1),
}
# CatBoost's documented ranges (symmetric trees: depth at most 16)
CATBOOST_RULES: dict[str, Rule] = {
    **{name: number(above=0) for name in ("learning_rate", "eta")},
    **{name: integer(min=1, max=16) for name in ("depth", "max_depth")},
    **{name: number(min=0) for name in ("l2_leaf_reg", "reg_lambda", "random_strength", "bagging_temperature")},
    **{name: _UNIT for name in ("subsample", "rsm", "colsample_bylevel")},
    **{name: integer(min=1, max=65535) for name in ("border_count", "max_bin")},
    **{name: integer(min=1) for name in ("iterations", "num_boost_round", "n_estimators", "num_trees",
                                         "min_data_in_leaf", "min_child_samples", "leaf_estimation_iterations")},
    "max_leaves": integer(min=1, max=64), "num_leaves": integer(min=1, max=64), "thread_count": integer(min=-1),
}
ENGINE_RULES: dict[str, dict[str, Rule]] = {"lightgbm": LIGHTGBM_RULES, "xgboost": XGBOOST_RULES,
                                            "catboost": CATBOOST_RULES}


def check_param_values(params: dict[str, Any], *, where: str) -> dict[str, Any]:
    """Only numbers, booleans, text or lists of them (the engines judge the rest by name); returns ``params``.

    >>> check_param_values({"max_depth": 4, "eval_at": [1, 5]}, where="--param")
    {'max_depth': 4, 'eval_at': [1, 5]}
    >>> check_param_values({"eta": float("nan")}, where="--param")
    Traceback (most recent call last):
    ...
    ltr.base.errors.LtrError: --param eta must be a number, true/false, text or a list of them, got nan
    """
    for key, value in params.items():
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(v, (bool, int, float, str)) for v in items) or (
                any(isinstance(v, float) and not math.isfinite(v) for v in items)):
            raise LtrError(f"{where} {key} must be a number, true/false, text or a list of them, got {value!r}")
    return params


def check_engine_params(engine: str, params: dict[str, Any], *, where: str, objective: str | None = None) -> dict[str, Any]:
    """``params`` of ``engine`` if their types, ranges and names are the engine's; else an LtrError naming
    ``where`` (``--param``, ``cfg.toml [xgboost]``) and the key (module docstring). ``objective``: the
    objective the parameters go with (XGBoost and CatBoost judge the names against it)."""
    check_param_values(params, where=where)
    rules = ENGINE_RULES[engine]
    canonical = _lightgbm_names() if engine == "lightgbm" else None
    for key, value in params.items():
        name = canonical.get(key, key) if canonical else key
        if name in rules:
            rules[name].check(value, f"{where} {key}")
    if not params:
        return params
    if engine == "lightgbm":
        if canonical:
            for key in params:
                if key not in canonical:
                    raise LtrError(_unknown(where, key, "LightGBM", canonical))
    elif engine == "xgboost":
        _xgboost_dry_run(params, where, objective)
    else:
        _catboost_check(params, where, objective)
    return params


def _unknown(where: str, key: str, library: str, known) -> str:
    close = difflib.get_close_matches(key, list(known), n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"{where} {key}: not a parameter {library} knows{hint}"


def _lightgbm_names() -> dict[str, str] | None:
    """{every LightGBM parameter name and alias: its parameter}, from the library (None if it cannot say)."""
    import lightgbm

    try:  # LGBM_DumpParamAliases, through the Python package's own reader of it
        table = lightgbm.basic._ConfigAliases._get_all_param_aliases()
    except (AttributeError, TypeError, ValueError):  # pragma: no cover - an older LightGBM: it warns itself
        return None
    names = {}
    for param, aliases in table.items():
        names[param] = param
        names.update({alias: param for alias in aliases})
    return names


def _named_in(message: str, params: dict[str, Any]) -> str | None:
    """The key of ``params`` an engine's message names (``Parameter max_depth``, ``{dept}``), or whose
    value it quotes (``Key 'Sideways' not found``), if any."""
    for key in params:
        if re.search(rf"(Parameter |\{{|\b){re.escape(key)}(\b|\}})", message):
            return key
    for key, value in params.items():
        if any(f"{q}{value}{q}" in message for q in "'\""):
            return key
    return None


def _without_source(message: str) -> str:
    """A C++ library's message without the source file it starts with (``catboost/x/y.cpp:128: ``)."""
    return re.sub(r"^[\w./-]+\.(?:cpp|cc|h):\d+: ", "", message)


def _xgboost_dry_run(params: dict[str, Any], where: str, objective: str | None) -> None:
    """Train one round on four rows: XGBoost warns of the names its booster did not use and raises on
    a value out of its range."""
    import xgboost as xgb

    data = xgb.DMatrix(np.arange(8, dtype=np.float32).reshape(4, 2), label=np.array([0.0, 1.0, 0.0, 1.0]))
    data.set_group([4])
    given = {**params, "objective": objective or params.get("objective", "rank:ndcg"), "validate_parameters": True,
             "verbosity": 1}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            xgb.train(given, data, num_boost_round=1)
        except xgb.core.XGBoostError as exc:
            message = " ".join(str(exc).split())
            key = _named_in(message, params)
            raise LtrError(f"{where} {key + ': ' if key else ''}XGBoost refuses it: {message[:300]}") from None
    for warning in caught:
        text = str(warning.message)
        if "are not used" in text:
            unused = re.findall(r'"([^"]+)"', text.split("{", 1)[-1].split("}", 1)[0])
            for key in unused:
                if key in params:
                    raise LtrError(f"{where} {key}: not a parameter XGBoost uses with objective "
                                   f"{given['objective']} (XGBoost: not used){_close(key, params)}")


def _close(key: str, params: dict[str, Any]) -> str:
    known = set(XGBOOST_RULES) | {"tree_method", "grow_policy", "booster", "sampling_method", "max_cat_to_onehot",
                                 "ndcg_exp_gain", "lambdarank_pair_method", "seed", "random_state", "device"}
    close = difflib.get_close_matches(key, sorted(known - {key}), n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def _catboost_check(params: dict[str, Any], where: str, objective: str | None) -> None:
    """CatBoost's own check of a parameter table (names and values), the first step of its ``fit``."""
    import catboost

    check = getattr(getattr(catboost, "_catboost", None), "_check_train_params", None)
    if check is None:  # pragma: no cover - another CatBoost: its fit says it
        return
    given = dict(params)
    named = given.pop("loss_function", None) or given.pop("objective", None)
    try:
        check({**given, "loss_function": objective or named or "YetiRank"})
    except catboost.CatBoostError as exc:
        message = " ".join(str(exc).split())
        detail = _without_source(message)
        key = _named_in(message, params)
        if "Unknown option" in message and key is not None:
            raise LtrError(f"{where} {key}: not a parameter CatBoost knows (CatBoost: {detail[:200]})") from None
        raise LtrError(f"{where} {key + ': ' if key else ''}CatBoost refuses it: {detail[:300]}") from None
