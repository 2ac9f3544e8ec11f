"""NeuralRanker: the scikit-learn interface over the trainer, checked against the trainer itself,
metrics.evaluate, scikit-learn's clone / cross-validation, and pandas data frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import sklearn
from sklearn.base import clone
from sklearn.model_selection import GroupKFold, cross_val_score, cross_validate
from test_training import make_ds

import losses
import metrics
from ltr import NeuralRanker, ranking_scorer
from ltr.train.config import TrainConfig
from ltr.train.models import FeatureTransform, MLPScorer
from ltr.train.trainer import Trainer, predict_scores, seed_everything

SMALL = dict(hidden=(8,), epochs=3, batch_size=8, lr=0.01, seed=3)
ONE = dict(SMALL, ensemble=1)  # one model, where the default ensemble of three is not the point


@pytest.fixture(scope="module")
def data():
    train, valid, test = make_ds(40, 41), make_ds(12, 42), make_ds(12, 43)
    return train, valid, test


def arrays(ds):
    return ds.features, ds.labels, np.repeat(ds.query_ids, ds.query_lengths)


def frame(ds):
    x, _, qid = arrays(ds)
    df = pd.DataFrame(x, columns=[f"feat_{j}" for j in range(x.shape[1])])
    df.insert(2, "qid", qid)  # anywhere in the frame
    return df


def test_fit_predict_score_equal_the_trainer(data):
    train, valid, test = data
    ranker = NeuralRanker(**SMALL).fit(*arrays(train), eval_set=[arrays(valid)])
    # the same runs through the trainer directly: NeuralRanker's default is the average of three models
    # trained with seeds seed, seed+1, seed+2, each with identical weights to the trainer's
    results = []
    for seed in (3, 4, 5):
        seed_everything(seed)
        model = MLPScorer(train.n_features, hidden=(8,), input_noise=0.1)  # NeuralRanker's defaults: noise 0.1, softmax
        model.set_normalizer(FeatureTransform.fit(train.features, "auto"))  # NeuralRanker's default input transform
        cfg = TrainConfig(epochs=3, batch_size=8, lr=0.01, seed=seed, metrics=("ndcg@10",), progress=False)
        results.append(Trainer(model, losses.get_loss("softmax"), cfg).fit(train, valid))
    for member, result in zip(ranker.model_.members, results):
        np.testing.assert_array_equal(predict_scores(member, test.features), predict_scores(result.model, test.features))
    expected = np.mean([predict_scores(r.model, test.features) for r in results], axis=0)
    predicted = ranker.predict(test.features)
    np.testing.assert_allclose(predicted, expected, rtol=1e-6, atol=1e-7)  # torch averages in float32
    assert ranker.best_epoch_ == results[0].best_epoch and ranker.n_features_in_ == 6
    # score = mean NDCG@10 over queries with a relevant item, the toolkit's conventions
    x, y, qid = arrays(test)
    ev = metrics.evaluate(predicted, test.labels, test.query_offsets, ["ndcg@10"])
    assert ranker.score(x, y, qid=qid) == pytest.approx(ev.mean[ev.names["ndcg@10"]], abs=1e-15)
    assert list(ranker.evals_result_["valid"]) == [ev.names["ndcg@10"]] and len(ranker.history_) == 3
    # one model on request: the first member exactly
    single = NeuralRanker(**SMALL, ensemble=1).fit(*arrays(train), eval_set=[arrays(valid)])
    np.testing.assert_array_equal(single.predict(test.features), predict_scores(results[0].model, test.features))


def test_params_round_trip_and_clone(data):
    ranker = NeuralRanker(model="linear", loss="lambdarank", loss_params={"k": 5}, epochs=2, normalize="log1p_standard")
    params = ranker.get_params()
    assert params["loss_params"] == {"k": 5} and params["model"] == "linear" and params["epochs"] == 2
    other = NeuralRanker().set_params(**params)
    assert other.get_params() == params
    ranker.fit(*arrays(data[0]))
    copy = clone(ranker)
    assert copy.get_params() == params and not hasattr(copy, "model_")
    assert copy.get_params()["loss_params"] is not params["loss_params"]  # clone copies mutable params
    with pytest.raises(ValueError, match="model must be 'mlp' or 'linear'"):
        NeuralRanker(model="tree").fit(*arrays(data[0]))


def test_data_frames_and_arrays_give_the_same_model(data):
    train, valid, test = data
    a = NeuralRanker(**ONE).fit(*arrays(train), eval_set=[arrays(valid)])
    b = NeuralRanker(**ONE).fit(frame(train), train.labels, eval_set=[(frame(valid), valid.labels)])
    np.testing.assert_array_equal(a.predict(test.features), b.predict(frame(test)))
    assert list(b.feature_names_in_) == [f"feat_{j}" for j in range(6)]
    assert b.score(frame(test), test.labels) == a.score(*arrays(test))
    with pytest.raises(ValueError, match="columns"):
        b.predict(frame(test).rename(columns={"feat_0": "other"}))
    with pytest.raises(ValueError, match="query ids given twice"):
        NeuralRanker(**SMALL).fit(frame(train), train.labels, qid=arrays(train)[2])


def test_query_ids_must_be_given_and_contiguous(data):
    x, y, qid = arrays(data[0])
    with pytest.raises(ValueError, match="query ids are needed"):
        NeuralRanker(**SMALL).fit(x, y)
    shuffled = qid.copy()
    shuffled[[0, -1]] = shuffled[[-1, 0]]  # the first row now belongs to the last query
    with pytest.raises(ValueError, match="not contiguous"):
        NeuralRanker(**SMALL).fit(x, y, qid=shuffled)
    with pytest.raises(ValueError, match="X has 4 features, the ranker was fitted on 6"):
        NeuralRanker(**SMALL).fit(x, y, qid=qid).predict(x[:, :4])


def _manual_folds(df, y, groups, scorer):
    """What cross_val_score should give, fold by fold, with the estimator fitted by hand."""
    out = []
    for tr, te in GroupKFold(n_splits=3).split(df, y, groups):
        est = NeuralRanker(**ONE).fit(df.iloc[tr], y[tr])
        out.append(scorer(est, df.iloc[te], y[te]))
    return out


def test_group_k_fold_cross_validation_with_the_ranking_scorer(data):
    ds = make_ds(30, 44)
    df, y = frame(ds), ds.labels
    scorer = ranking_scorer("ndcg@10")
    scores = cross_val_score(NeuralRanker(**ONE), df, y, groups=df["qid"], cv=GroupKFold(n_splits=3), scoring=scorer)
    np.testing.assert_allclose(scores, _manual_folds(df, y, df["qid"].to_numpy(), scorer), rtol=0, atol=1e-12)
    assert np.all((scores > 0) & (scores <= 1))
    # numpy arrays with scikit-learn's metadata routing: qid reaches fit and the scorer
    x, _, qid = arrays(ds)
    with sklearn.config_context(enable_metadata_routing=True):
        routed = cross_validate(NeuralRanker(**ONE).set_fit_request(qid=True), x, y, cv=GroupKFold(n_splits=3),
                                scoring=scorer, params={"qid": qid, "groups": qid})
    np.testing.assert_allclose(routed["test_score"], scores, rtol=0, atol=1e-12)


def test_default_ranker_is_ltr_train_with_no_option(tmp_path, capsys):
    """NeuralRanker() and `ltr train` with nothing but the files (and the epoch cap, for time) give the same
    scores on test data, to the last bit: same input transform, query norm, scorer, loss, batch size and
    ensemble of three seeds."""
    from ltr.cli import main
    from ltr.data import load_svmlight
    from ltr.models.folder import load_scorer

    assert main(["synth", "--out", str(tmp_path / "data"), "--queries", "60", "--mean-length", "15", "--seed", "0",
                 "--quiet"]) == 0
    files = {s: tmp_path / "data" / f"{s}.txt" for s in ("train", "valid", "test")}
    assert main(["train", "--train", str(files["train"]), "--valid", str(files["valid"]), "--out", str(tmp_path / "run"),
                 "--epochs", "3", "--quiet"]) == 0
    capsys.readouterr()
    train, valid, test = (load_svmlight(files[s], cache=False) for s in ("train", "valid", "test"))
    qid = {name: np.repeat(ds.query_ids, ds.query_lengths) for name, ds in (("train", train), ("valid", valid),
                                                                            ("test", test))}
    ranker = NeuralRanker(epochs=3).fit(train.features, train.labels, qid["train"],
                                        eval_set=[(valid.features, valid.labels, qid["valid"])])
    score, _ = load_scorer(tmp_path / "run")
    np.testing.assert_array_equal(ranker.predict(test.features, qid=qid["test"]), score(test.features, test.query_offsets))
    assert len(ranker.model_.members) == 3
