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
# # Calibrate a CTR model before an auction
#
# An ad auction ranks ads by bid x pCTR and charges by it, so the predicted click rates must be
# probabilities, not just a good order. A model trained on down-sampled negatives (a common way to
# save compute when clicks are rare) orders ads well but predicts click rates several times too
# high. This tutorial measures that, calibrates on held-out data, checks that the calibration did
# not change the ranking quality, and runs the auctions against an oracle that knows the true click
# rates. It runs in CI on small data; `experiments/calibrate_ctr_before_auction.py` is the full
# study ([Experiments](../experiments.md)).

# %%
import numpy as np
from sklearn.linear_model import LogisticRegression

from ltr.calibrate import (
    calibration_metrics,
    check_auc_invariance,
    correct_downsampling,
    downsample_negatives,
    generate_impressions,
    make_calibrator,
    oracle_comparison,
)
from ltr.calibrate.auction import pad_groups
from metrics import auc

# %% [markdown]
# ## Impressions with known click rates
#
# `generate_impressions` draws requests of 8 ads each, with features, bids, clicks and the true
# click probability of every impression (known here because the data is simulated). The requests
# are split into a training part, a held-out part for calibration and a test part.

# %%
imps = generate_impressions(6000, 8, seed=0)
train, held_out, test = imps.split_requests((0.6, 0.2, 0.2), seed=0)
print(f"{imps.n} impressions, click rate {imps.clicks.mean():.3f}")

# %% [markdown]
# ## A model trained on 10 % of the negatives
#
# Every click is kept, and each non-click with probability 0.1. The logistic regression then sees a
# click rate about ten times the real one, and predicts accordingly.

# %%
RATE = 0.1
kept = downsample_negatives(train, RATE, seed=0)
model = LogisticRegression(max_iter=1000).fit(kept.features, kept.clicks)
raw_held_out = model.predict_proba(held_out.features)[:, 1]
raw_test = model.predict_proba(test.features)[:, 1]
print(f"kept {kept.n} of {train.n} rows; mean prediction {raw_test.mean():.3f} vs click rate {test.clicks.mean():.3f}")

# %% [markdown]
# ## Calibrate on held-out data
#
# Three ways back to probabilities: Platt scaling (a logistic fit on the score's logit), strict
# isotonic regression (monotone, with the ties isotonic regression would create broken in score
# order), and, since the down-sampling rate is known here, its exact inverse. Each calibrator is
# fitted on the held-out part only; fitting on the model's own training predictions is refused.

# %%
calibrated = {
    "raw": raw_test,
    "platt": make_calibrator("platt").fit(raw_held_out, held_out.clicks).predict(raw_test),
    "isotonic-strict": make_calibrator("isotonic-strict").fit(raw_held_out, held_out.clicks).predict(raw_test),
    "rate correction": correct_downsampling(raw_test, RATE),
}
for name, p in calibrated.items():
    m = calibration_metrics(test.clicks, p)
    print(f"{name:16s} LogLoss {m['log_loss']:.4f}  ECE(mass) {m['ece_mass']:.4f}  AUC {auc(test.clicks, p):.4f}")

# %% [markdown]
# ## The order did not change
#
# Calibration should move the probabilities, not the ranking. `check_auc_invariance` compares the
# AUC before and after, globally and per request, and counts the tied pairs a calibration created
# (plain isotonic regression creates some; the strict variant does not).

# %%
report = check_auc_invariance(raw_test, calibrated["isotonic-strict"], test.clicks, groups=test.request_ids)
print(report.to_text())
assert report.unchanged
raw_ece = calibration_metrics(test.clicks, raw_test)["ece_mass"]
for name in ("platt", "isotonic-strict", "rate correction"):
    assert calibration_metrics(test.clicks, calibrated[name])["ece_mass"] < raw_ece / 3, name

# %% [markdown]
# ## What it is worth in the auction
#
# A second-price auction with 3 slots per request, a reserve on the score and a minimum pCTR. The
# oracle runs the same auctions with the true click rates; `oracle_comparison` reports revenue and
# welfare as shares of the oracle's, and how often the model's allocation is the oracle's.

# %%
offsets = test.request_offsets
bids, mask = pad_groups(test.bids, offsets)
true_ctr, _ = pad_groups(test.true_ctr, offsets)
agreement = {}
for name, p in calibrated.items():
    pctr, _ = pad_groups(np.clip(p, 0.0, 1.0), offsets)
    money = oracle_comparison(bids, pctr, true_ctr, mask, slots=3, score_reserve=0.06, threshold=0.02)
    agreement[name] = money["allocation_agreement"]
    print(f"{name:16s} revenue {money['revenue_ratio']:.3f} of the oracle's, "
          f"same allocation in {money['allocation_agreement']:.1%} of requests")

# %% [markdown]
# The ranking was the same for all four (same AUC), yet the allocations differ: the reserve and the
# pCTR threshold read the predictions as probabilities, so inflated ones let the wrong ads through.
# Every calibrated model agrees with the oracle far more often than the raw one.

# %%
assert min(agreement[name] for name in ("platt", "isotonic-strict", "rate correction")) > 2 * agreement["raw"]

# %% [markdown]
# ## The same auctions from the command line
#
# `ltr auction` runs GSP and VCG on a table with one row per candidate ad of a request (request id,
# ad id, bid, pCTR) and reports revenue, welfare and cost per click with intervals over requests;
# with the true CTR it adds the oracle and the **winners' PCOC**, the predicted over the true
# expected clicks of the ads that won. Here the test requests, once with the raw model's pCTRs and
# once with Platt's, a reserve of 0.3 per click and 3 slots whose click-through falls 0.7 per slot.

# %%
import json
import subprocess
import sys

import pandas as pd

table = pd.DataFrame({"request": test.request_ids, "ad": np.arange(test.n), "bid": test.bids,
                      "raw": np.clip(raw_test, 0.0, 1.0), "platt": calibrated["platt"], "true_ctr": test.true_ctr})
table.to_parquet("requests.parquet")
winners_pcoc = {}
for column in ("raw", "platt"):
    command = ["ltr", "auction", "--table", "requests.parquet", "--pctr-column", column, "--true-ctr-column", "true_ctr",
               "--slots", "3", "--position-effects", "1,0.7,0.49", "--reserve", "0.3", "--out", f"auction-{column}"]
    print("$", " ".join(command))
    subprocess.run([sys.executable, "-m", *command], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    gsp = json.load(open(f"auction-{column}/report.json"))["mechanisms"]["gsp"]
    winners_pcoc[column] = gsp["winners_pcoc"]["value"]
    print(f"{column:6s} GSP revenue {gsp['revenue_over_oracle']['value']:.3f} of the oracle's, welfare "
          f"{gsp['welfare_over_oracle']['value']:.3f}, winners' PCOC {gsp['winners_pcoc']['value']:.2f} "
          f"[{gsp['winners_pcoc']['low']:.2f}, {gsp['winners_pcoc']['high']:.2f}]")

# %% [markdown]
# The raw model expects several times the clicks its winning ads get, and so would an advertiser
# paying by its pCTRs; after Platt the winners' predicted clicks are close to their true ones.
# `ltr auction --fit-reserves --reserve-field F` fits a reserve per value of a field on one day and
# `--reserves` applies it on the next ([Calibration before auctions](../guide/calibration.md)).

# %%
assert winners_pcoc["raw"] > 2 and abs(winners_pcoc["platt"] - 1) < abs(winners_pcoc["raw"] - 1) / 5

# %% [markdown]
# ## Where next
#
# - `ltr calibrate` does the fit / report / reliability diagram from files on the command line, and
#   `ltr calibrate --apply` applies a saved calibrator to a new day's table
#   ([Calibration before auctions](../guide/calibration.md)).
# - The full study adds distorted models (squared, doubled, sharpened) that keep AUC and lose money.
