"""Trust bias from the logs (issue 47 part 3): intervention harvesting's trust-bias fit recovers the simulator's
alpha and beta on the scale of position 1, and `--estimator affine` takes them estimated or from a file, with the
source recorded; a log whose trust bias is not known is refused with the ways to get it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ltr.cli import main
from ltr.clicks.propensities.harvesting import counts_from_logs
from ltr.clicks.propensities.trust import estimate_trust
from ltr.clicks.simulate.browsing import trust_affine, trust_curves
from ltr.clicks.simulate.click_models import pbm_examination, simulate_clicks
from ltr.data import save_svmlight
from ltr.data.synthetic import make_mslr_like


@pytest.fixture(scope="module")
def trust_logs():
    """Three logging rankers of different quality (labels plus noise of deviation 0.5, 1 and 2), PBM 1/r with the
    default trust bias (eps+ = 1, eps- = 0.65 / r), 300 sessions of each of 100 queries per ranker."""
    ds = make_mslr_like(n_queries=100, n_features=20, mean_list_length=20, seed=0)
    rng = np.random.default_rng(0)
    logs = [simulate_clicks(ds.labels, ds.query_offsets, ds.labels + rng.normal(0, noise, ds.n_items), model="trust",
                            top_k=10, sessions_per_query=300, seed=s) for s, noise in enumerate((0.5, 1.0, 2.0))]
    return ds, logs


def _truth(k: int):
    alpha, beta = trust_affine(pbm_examination(k, 1.0), *trust_curves(k))
    a = alpha / alpha[0]
    return a, beta - a * beta[0]


def test_the_fit_recovers_alpha_and_beta_on_the_scale_of_position_one(trust_logs):
    _, logs = trust_logs
    est = estimate_trust(counts_from_logs(logs, 6))
    a, b = _truth(6)  # a = 1, 0.964, 0.746, 0.598, 0.497, 0.425; b = 0, -0.464, -0.413, -0.348, -0.297, -0.258
    assert est.alpha[0] == 1.0 and est.beta[0] == 0.0 and est.identified.all()
    # measured here: at most 0.114 off on alpha (position 2) and 0.078 on beta; 8 times the sessions bring both
    # within 0.021 (the per-key click probabilities are estimated with the lines, which biases short logs)
    assert np.abs(est.alpha - a).max() < 0.13 and np.abs(est.beta - b).max() < 0.09
    # the position-based model (beta = 0) is far off: the fit is not its start
    assert np.abs(b).max() > 0.4


def test_affine_trains_from_an_estimate_file_and_refuses_a_log_whose_trust_bias_is_unknown(trust_logs, tmp_path, capsys):
    ds, logs = trust_logs
    save_svmlight(ds, tmp_path / "data.txt")
    paths = []
    for i, log in enumerate(logs):
        paths.append(str(tmp_path / f"log{i}.npz"))
        log.save(paths[-1])
    est = tmp_path / "trust.json"
    assert main(["clicks", "estimate", "--method", "harvest", "--trust", "--positions", "6", "--log", *paths,
                 "--json", str(est), "--quiet"]) == 0
    rows = json.loads(est.read_text())["rows"]
    assert [r["position"] for r in rows] == list(range(1, 7)) and rows[1]["alpha_truth"] == pytest.approx(_truth(6)[0][1])
    common = ["clicks", "train", "--data", str(tmp_path / "data.txt"), "--valid", str(tmp_path / "data.txt"),
              "--estimator", "affine", "--model", "linear", "--epochs", "1", "--quiet"]
    assert main([*common, "--log", paths[0], "--out", str(tmp_path / "m"), "--affine-file", str(est)]) == 0
    info = json.loads((tmp_path / "m" / "clicks_training.json").read_text())
    assert info["affine_source"].startswith(f"file {est}") and info["alpha"][:6] == [r["alpha"] for r in rows]
    assert info["alpha"][6:] == [rows[-1]["alpha"]] * 4  # positions 7-10: held at the last estimated one
    # a log from outside: its trust bias is not in it
    log = logs[0]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"session": log.session, "query": log.query, "doc": log.doc, "position": log.position,
                             "click": log.click}), tmp_path / "outside.parquet")
    assert main([*common, "--log", str(tmp_path / "outside.parquet"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "not known (it was not simulated)" in err and "--affine estimated" in err and "--affine-file" in err
    # one deterministic ranker shows every document at one position: nothing to harvest
    assert main([*common, "--log", str(tmp_path / "outside.parquet"), "--out", str(tmp_path / "o"),
                 "--affine", "estimated"]) == 2
    assert "nothing can be harvested" in capsys.readouterr().err
