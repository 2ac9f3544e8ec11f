"""The one markdown-table layout of the toolkit's reports (ltr clicks, the experiments)."""

import pytest

from ltr.study.report_table import format_interval, markdown_table


def test_table_layout_alignment_and_empty_cells():
    text = markdown_table(["method", "AUC", "ties"], [["platt", "0.7500", ""], ["none", 0.5, 3]], align="lrr")
    assert text.split("\n") == [
        "| method | AUC | ties |",
        "|---|---:|---:|",
        "| platt | 0.7500 |  |",
        "| none | 0.5 | 3 |",
    ]
    assert markdown_table(["a", "b"], []) == "| a | b |\n|---|---|"


@pytest.mark.parametrize("align", ["l", "lrx", "lc"])
def test_align_must_give_l_or_r_per_column(align):
    with pytest.raises(ValueError, match="one of 'l' / 'r' per column"):
        markdown_table(["a", "b"], [], align=align)


def test_interval_cell():
    assert format_interval(0.12345, 0.1, 0.15) == "0.1235 [0.1000, 0.1500]"
    assert format_interval(-0.05, -0.1, 0.0, "+.4f") == "-0.0500 [-0.1000, +0.0000]"
