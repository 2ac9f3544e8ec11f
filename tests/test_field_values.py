"""Field values compared as values (issue 46, part 2): ints, floats with integral values and text of
the same value meet the same fitted offsets; each field's type is recorded; a mismatch that could only
miss is refused naming the field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ltr.calibrate.factory import calibrator_from_json, make_calibrator
from ltr.calibrate.field_values import encode_values, value_key, words_type
from ltr.calibrate.fields_data import make_field_world
from ltr.base.errors import LtrError

F = ["advertiser", "device"]


@pytest.fixture(scope="module")
def world_rows():
    imps = make_field_world(seed=0).impressions(30000, seed=1)
    return imps.pooled_logit, imps.clicks, {f: imps.fields[f] for f in F}


@pytest.mark.parametrize("method", ["field-aware", "multicalibration"])
def test_ints_floats_and_text_of_one_value_get_one_prediction(world_rows, method):
    s, y, fields = world_rows
    cal = make_calibrator(method, fields=F).fit(s, y, fields)
    as_int = cal.predict(s, fields)
    as_float = cal.predict(s, {f: v.astype(np.float64) for f, v in fields.items()})  # pandas' int column with nulls
    as_text = cal.predict(s, {f: v.astype(str) for f, v in fields.items()})
    as_text_float = cal.predict(s, {f: np.char.add(v.astype(str), ".0") for f, v in fields.items()})
    assert np.array_equal(as_int, as_float) and np.array_equal(as_int, as_text)
    assert np.array_equal(as_int, as_text_float)
    # and the offsets matter: missing them (as text matching did for floats) moves predictions
    assert np.max(np.abs(as_float - cal.global_.predict(s))) > 0.01
    d = cal.to_dict()
    assert d["field_types"] == {"advertiser": "int", "device": "int"}
    again = calibrator_from_json(json.dumps(d))
    assert np.array_equal(again.predict(s, {f: v.astype(np.float64) for f, v in fields.items()}), as_int)


def test_the_keys_and_types():
    assert [value_key(v) for v in (3, 3.0, "3", " 3.00 ", np.float32(3.0), np.uint8(3), True)] == ["3"] * 6 + ["1"]
    assert [value_key(v) for v in (0.5, "0.50", "phone", " tablet ", 1e-7)] == ["0.5", "0.5", "phone", "tablet", "1e-07"]
    codes, keys = encode_values(np.array([2.0, 10.0, 2.0, 1.5]))
    assert keys == ["1.5", "10", "2"] and codes.tolist() == [2, 1, 2, 0]
    codes, keys = encode_values(np.array(["b", 1, "1", 1.0, "a"], dtype=object))
    assert keys == ["1", "a", "b"] and codes.tolist() == [2, 0, 0, 0, 1]
    assert words_type(["1", "20"]) == "int" and words_type(["1", "0.5"]) == "float"
    assert words_type(["1", "phone"]) == "text"


def test_a_type_mismatch_is_refused_naming_the_field(world_rows):
    s, y, fields = world_rows
    cal = make_calibrator("field-aware", fields=F).fit(s, y, fields)
    bad = dict(fields, device=np.array([f"dev{v}" for v in fields["device"]]))
    with pytest.raises(LtrError, match="field 'device': the calibrator was fitted on int values, but this table "
                                       "holds the text 'dev0'"):
        cal.predict(s, bad)
    named = dict(fields, device=np.array(["phone", "tablet", "desktop"])[fields["device"]])
    text_cal = make_calibrator("field-aware", fields=F).fit(s, y, named)
    assert text_cal.to_dict()["field_types"]["device"] == "text"
    with pytest.raises(LtrError, match="field 'device': the calibrator was fitted on text values, but this table "
                                       "holds numbers"):
        text_cal.predict(s, fields)


def test_older_files_with_text_keys_of_floats_still_match(world_rows):
    s, y, fields = world_rows
    cal = make_calibrator("field-aware", fields=F).fit(s, y, fields)
    d = json.loads(cal.to_json())
    d.pop("field_types")  # as written before the types were recorded
    d["offsets"]["device"] = {f"{k}.0": v for k, v in d["offsets"]["device"].items()}  # numpy's text of floats
    old = calibrator_from_json(json.dumps(d))
    assert np.array_equal(old.predict(s, fields), cal.predict(s, fields))


def test_stream_and_memory_share_one_vocabulary(tmp_path, world_rows):
    """A Parquet float field (an int column with a null, dropped) is binned under the keys the in-memory
    fit learns from ints: the streamed calibrator's offsets have the same keys and values."""
    import pandas as pd

    from ltr.calibrate.stream_fit import fit_binned
    from ltr.calibrate.stream_stats import stream_table

    s, y, fields = world_rows
    df = pd.DataFrame({"score": s, "label": y, "device": fields["device"].astype(np.float64),
                       "advertiser": fields["advertiser"]})
    df.loc[5, "device"] = np.nan
    df.to_parquet(tmp_path / "t.parquet")
    stats = stream_table(tmp_path / "t.parquet", field_columns=F, score_scale="logit", drop_invalid=True, fit_fraction=1.0)
    assert stats.dropped["fields"] == 1 and set(stats.values(1)) == {"0", "1", "2"}
    streamed = fit_binned(stats, "field-aware")
    mem = make_calibrator("field-aware", fields=F).fit(s, y, fields)
    assert set(streamed.offsets_["device"]) == set(mem.offsets_["device"])
    for k, v in mem.offsets_["device"].items():
        assert streamed.offsets_["device"][k] == pytest.approx(v, abs=5e-3)  # the binned fit's error
