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
# # A neural ranker against the GBDT baseline
#
# Gradient-boosted trees are the baseline every neural ranker has to beat on tabular
# learning-to-rank data. This tutorial trains both on the same synthetic data, judges both with the
# same metric definitions, and asks whether the difference is more than noise. It runs in CI on
# small data (a few seconds); raise `N_QUERIES` and `EPOCHS` for a real comparison, and see
# [Experiments](../experiments.md) for the full study on MQ2008 and 10,000 synthetic queries.

# %%
import numpy as np

import losses
import metrics
from ltr.data import make_synthetic_splits
from ltr.gbdt import predict_booster, train_lightgbm
from ltr.train import FeatureTransform, MLPScorer, Trainer, TrainConfig, predict_scores, seed_everything

N_QUERIES, EPOCHS, ROUNDS = 300, 8, 60

# %% [markdown]
# ## The data
#
# `make_synthetic_splits` draws MSLR-like lists: 136 features, grades 0..4 from a hidden non-linear
# teacher plus noise, heavy-tailed list lengths, a few queries without any relevant document. The
# split is by query, so no query is in two parts.

# %%
train, valid, test = make_synthetic_splits(N_QUERIES, mean_list_length=30, seed=0)
print(f"train {train.n_queries} queries / {train.n_items} items, valid {valid.n_queries}, test {test.n_queries}")

# %% [markdown]
# ## The neural ranker
#
# An MLP on `log1p` + standardised features (the transform is fitted on the training split and
# saved inside the model), trained with LambdaRank: each pair of items is weighted by how much
# NDCG@10 would change if the two swapped places, computed by `metrics.swap`, the same code that
# scores the test set. Early stopping watches validation NDCG@10 and restores the best epoch.

# %%
seed_everything(0)
model = MLPScorer(train.n_features, hidden=(64, 32))
model.set_normalizer(FeatureTransform.fit(train.features, "log1p_standard"))
config = TrainConfig(epochs=EPOCHS, patience=3, monitor="ndcg@10", progress=False)
fit = Trainer(model, losses.LambdaRank(k=10), config).fit(train, valid)
print("best epoch", fit.best_epoch, "of", fit.epochs_run)
print({name: round(value, 4) for name, value in fit.valid_metrics.items()})

# %% [markdown]
# ## The GBDT baseline
#
# LightGBM's lambdarank objective on the same `RankingDataset`. Its `label_gain` is built from the
# toolkit's gain (2^rel - 1), so the NDCG it optimises is the NDCG the toolkit reports.

# %%
booster, info = train_lightgbm(train, valid, {"num_leaves": 15, "min_data_in_leaf": 10}, num_boost_round=ROUNDS)
print("LightGBM rounds:", booster.current_iteration())

# %% [markdown]
# ## One evaluation for both
#
# Both models score the test queries, and `metrics.evaluate` judges both under one set of
# conventions. The names it returns say which: gain, discount, the ideal cut, what happens to a
# query without a relevant document (skipped), and how tied scores are ordered.

# %%
scores = {
    "lightgbm": predict_booster(booster, test.features),
    "mlp-lambdarank": predict_scores(fit.model, test.features),
}
names = ["ndcg@10", "map", "mrr"]
results = {run: metrics.evaluate(s, test.labels, test.query_offsets, names) for run, s in scores.items()}
for run, result in results.items():
    print(run, {name: round(float(result[name]), 4) for name in names})
print(results["lightgbm"].names["ndcg@10"])

# %% [markdown]
# ## More than noise?
#
# The test set is small, so a difference of means says little on its own. `metrics.compare` pairs
# the two runs query by query: the mean difference with a 95% interval, a paired t-test (Holm
# correction over the runs compared), and how many queries each run wins.

# %%
comparison = metrics.compare(results, baseline="lightgbm")
for row in comparison.rows:
    if not row.is_baseline:
        print(f"{row.metric}: {row.run} - lightgbm = {row.difference:+.4f} "
              f"[{row.low:+.4f}, {row.high:+.4f}], p = {row.p_adjusted:.3f}, "
              f"wins/ties/losses {row.wins}/{row.ties}/{row.losses}")

# %% [markdown]
# On a few hundred queries and a few epochs, expect the trees to be ahead: the neural ranker needs
# more data and more of DASALC's ingredients to catch up ([Experiments](../experiments.md) has the
# full comparison). Both models learned, though: each beats a random order of the same lists by a
# wide margin.

# %%
rng = np.random.default_rng(0)
chance = metrics.evaluate(rng.random(test.n_items), test.labels, test.query_offsets, ["ndcg@10"])["ndcg@10"]
for run, result in results.items():
    assert result["ndcg@10"] > chance + 0.05, (run, float(result["ndcg@10"]), float(chance))
print("random order:", round(float(chance), 4))

# %% [markdown]
# ## Where next
#
# - `ltr ablate` runs this comparison over seeds and data sets, with intervals over seeds and
#   paired tests over queries ([Ablation studies](../guide/ablation.md)).
# - DASALC's ingredients (log1p transform, input noise, an attention scorer, seed ensembles) are
#   options of `ltr train` ([Training neural rankers](../guide/training.md)).
