# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     name: python3
# ---

# %% [markdown]
# # Learn from click logs
#
# Clicks are cheap relevance labels with a bias: users examine the top of a list more than the
# bottom, so an item shown first collects clicks an equally good item shown tenth never gets. This
# tutorial simulates a click log with a known bias, estimates the bias back from a share of
# randomized traffic, uses it to evaluate a new ranker offline (IPS / SNIPS), and trains rankers on
# the clicks. It runs in CI on small data; `experiments/clicks_position_bias.py` is the full study
# ([Experiments](../experiments.md)).

# %%
import numpy as np

import losses
import metrics
from ltr.clicks import (
    click_dcg,
    click_training_set,
    estimate_from_randomized,
    expected_click_dcg,
    simulate_clicks,
)
from ltr.clicks.simulate.click_models import attraction
from ltr.data import make_synthetic_splits
from ltr.train import MLPScorer, Trainer, TrainConfig, predict_scores, seed_everything

# %% [markdown]
# ## A labelled data set and a logging ranker
#
# The synthetic data has graded labels, so the truth is known. The "production" ranker that showed
# the lists is the label plus noise: good, not perfect.

# %%
train, valid, test = make_synthetic_splits(300, 40, mean_list_length=20, seed=0)
rng = np.random.default_rng(0)
logger = train.labels + rng.normal(scale=1.5, size=train.n_items)
max_label = float(train.labels.max())

# %% [markdown]
# ## Simulate the users
#
# The position-based model: a user examines rank r with probability theta_r = 1 / r^eta and clicks
# an examined item with probability a(rel) = eps + (1 - eps)(2^rel - 1)/(2^max - 1). Each query is
# shown 30 times; in 30 % of the sessions the top 10 are shown in random order, which is what lets
# us measure the bias without knowing it.

# %%
log = simulate_clicks(train.labels, train.query_offsets, logger, model="pbm", eta=1.0, eps=0.1,
                      max_label=max_label, top_k=10, sessions_per_query=30, randomize_fraction=0.3, seed=0)
print(f"{log.n_sessions} sessions, {log.n_clicks} clicks")

# %% [markdown]
# ## Estimate the position bias
#
# In the randomized sessions every item is equally likely at every rank, so the click rate at rank r
# over the click rate at rank 1 estimates theta_r / theta_1. The simulator used 1/r.

# %%
est = estimate_from_randomized(log, 10)
for r in range(0, 10, 3):
    print(f"rank {r + 1}: estimated {est.theta[r]:.3f} [{est.low[r]:.3f}, {est.high[r]:.3f}], true {1 / (r + 1):.3f}")
assert abs(est.theta[1] - 0.5) < 0.15

# %% [markdown]
# ## Evaluate a new ranker on the old log
#
# A candidate ranker is scored from the log alone: a click at the rank the candidate would give the
# item counts with its DCG discount. Naively the clicks over-reward what the logger put on top; IPS
# divides each click by the examination probability of the position where it happened, which undoes
# the bias in expectation. The truth (known here) is the expected click-DCG of the candidate's
# ranking under the attraction probabilities, over the items the log ever showed (an item never
# shown can never be clicked, whatever the weighting).

# %%
candidate = train.labels + rng.normal(scale=0.5, size=train.n_items)
shown = np.zeros(train.n_items, dtype=bool)
shown[log.doc] = True
a = attraction(train.labels, max_label=max_label, eps=0.1)
truth = float(np.mean(expected_click_dcg(candidate, a, train.query_offsets, k=10, support=shown)))
estimates = {name: float(np.nanmean(click_dcg(log, candidate, train.query_offsets, estimator=name, k=10)))
             for name in ("naive", "ips")}
print({name: round(v, 4) for name, v in estimates.items()}, "truth:", round(truth, 4))
assert abs(estimates["ips"] - truth) < abs(estimates["naive"] - truth)

# %% [markdown]
# ## Train on clicks
#
# `click_training_set` turns the log into a ranking data set whose labels are clicks. With
# `weighting="ips"` each click is weighted by 1 / theta of its position, and the weights reach the
# loss. Both rankers are judged on the test queries' true labels.

# %%
def ndcg_after_training(data):
    seed_everything(0)
    model = MLPScorer(data.n_features, hidden=(32,))
    fit = Trainer(model, losses.LambdaRank(k=10), TrainConfig(epochs=4, patience=None, progress=False)).fit(data, valid)
    scores = predict_scores(fit.model, test.features)
    return float(metrics.evaluate(scores, test.labels, test.query_offsets, ["ndcg@10"])["ndcg@10"])


raw, _ = click_training_set(train, log, weighting="none")
ips, _ = click_training_set(train, log, weighting="ips")
results = {"raw clicks": ndcg_after_training(raw), "IPS-weighted clicks": ndcg_after_training(ips)}
chance = float(metrics.evaluate(rng.random(test.n_items), test.labels, test.query_offsets, ["ndcg@10"])["ndcg@10"])
print({name: round(v, 4) for name, v in results.items()}, "random order:", round(chance, 4))
assert min(results.values()) > chance

# %% [markdown]
# Both learned from clicks alone. Whether the weighting pays off depends on the data: in the full
# study it made no difference on the synthetic data and gained about 0.04 NDCG@10 on MQ2008
# ([Experiments](../experiments.md)); on a sample this small, expect the two to be close.

# %% [markdown]
# ## Where next
#
# - The same steps from the command line: `ltr clicks simulate / estimate / evaluate`
#   ([Learning from clicks](../guide/clicks.md)).
# - The full study compares naive, IPS and SNIPS over many rankers and seeds, on synthetic data and
#   MQ2008, and trains with estimated propensities.
