"""ltr.data.columns: one-value-per-line files and .npy columns, with file:line errors."""

from __future__ import annotations

import numpy as np
import pytest

from ltr.data.columns import parse_number, read_id_column, read_number_column
from ltr.base.errors import DataFormatError, LtrError


def test_text_column_values_whitespace_and_trailing_empty_lines(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text(" 0.5\n-1e-3\t\n2\n\n  \n")
    out = read_number_column(f)
    assert out.dtype == np.float64 and out.tolist() == [0.5, -0.001, 2.0]


@pytest.mark.parametrize("text, line, message", [
    ("0.5\n\n0.7\n", 2, "empty line (one value per line expected)"),   # would shift 0.7 onto row 2
    ("0.5\nabc\n", 2, "score 'abc' is not a number"),
    ("0.5\n0.1\ninf\n", 3, "score 'inf' is not finite"),
    ("# header\n0.5\n", 1, "score '# header' is not a number"),
])
def test_text_column_errors_name_file_line_and_value(tmp_path, text, line, message):
    f = tmp_path / "s.txt"
    f.write_text(text)
    with pytest.raises(DataFormatError) as info:
        read_number_column(f, what="score")
    assert info.value.line == line and str(info.value) == f"{f}:{line}: {message}"


def test_allowed_values_and_empty_or_missing_files(tmp_path):
    f = tmp_path / "y.txt"
    f.write_text("1\n0\n1.0\n")
    assert read_number_column(f, what="label", allowed=(0, 1)).tolist() == [1.0, 0.0, 1.0]
    f.write_text("1\n2\n")
    with pytest.raises(DataFormatError, match=r"y.txt:2: label '2' is not 0 or 1"):
        read_number_column(f, what="label", allowed=(0, 1))
    f.write_text("\n\n")
    with pytest.raises(DataFormatError, match="no values"):
        read_number_column(f)
    with pytest.raises(LtrError, match="nothing.txt: file not found"):
        read_number_column(tmp_path / "nothing.txt")


def test_npy_columns(tmp_path):
    f = tmp_path / "s.npy"
    np.save(f, np.array([0.25, 1.0], dtype=np.float32))
    assert read_number_column(f).tolist() == [0.25, 1.0]
    np.save(f, np.array([True, False]))
    assert read_number_column(f, allowed=(0, 1)).tolist() == [1.0, 0.0]
    np.save(f, np.array([0.0, 1.0, 0.5]))
    with pytest.raises(DataFormatError, match=r"s.npy: element 2: label 0.5 is not 0 or 1"):
        read_number_column(f, what="label", allowed=(0, 1))
    np.save(f, np.array([0.0, np.nan]))
    with pytest.raises(DataFormatError, match=r"s.npy: element 1: score nan is not finite"):
        read_number_column(f, what="score")
    np.save(f, np.zeros((2, 2)))
    with pytest.raises(DataFormatError, match=r"expected a 1-D array, got shape \(2, 2\)"):
        read_number_column(f)
    np.save(f, np.array(["a", "b"]))
    with pytest.raises(DataFormatError, match="expected numbers"):
        read_number_column(f)
    assert read_id_column(f).tolist() == ["a", "b"]


def test_id_column_and_parse_number(tmp_path):
    f = tmp_path / "g.txt"
    f.write_text("u1\n u 2 \nu1\n")
    assert read_id_column(f).tolist() == ["u1", "u 2", "u1"]
    f.write_text("u1\n\nu2\n")
    with pytest.raises(DataFormatError, match="g.txt:2: empty line"):
        read_id_column(f)
    assert parse_number("3", "q.txt", 7, "relevance") == 3.0
    with pytest.raises(DataFormatError, match=r"q.txt:7: relevance 'x' is not a number"):
        parse_number("x", "q.txt", 7, "relevance")
