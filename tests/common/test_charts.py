"""The small day charts' geometry (apps/common/charts.py): values scaled into the plot, stacked series, a round top
for the value axis, and labels for both axes."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest

from apps.common.charts import compact, day_chart, day_label, nice_ceiling

DAYS = [date(2025, 3, 1) + timedelta(days=i) for i in range(5)]


def points(path: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in re.findall(r"(-?[\d.]+),(-?[\d.]+)", path)]


@pytest.mark.parametrize(
    "value, ceiling", [(0, 1), (0.3, 0.5), (1, 1), (7, 10), (12, 20), (21, 25), (412, 500), (2_600_000, 5_000_000)]
)
def test_the_value_axis_tops_out_at_a_round_number(value, ceiling):
    assert nice_ceiling(value) == pytest.approx(ceiling)


def test_values_are_scaled_into_the_plot_left_to_right_and_bottom_up():
    chart = day_chart(DAYS, {"n": [0, 5, 10, 5, 0]})
    line = points(chart["series"][0]["line"])
    assert [x for x, _ in line] == pytest.approx([40, 117, 194, 271, 348])  # LEFT to width - RIGHT
    assert [y for _, y in line] == pytest.approx([118, 64, 10, 64, 118])  # the bottom is 0, the top 10
    assert chart["ceiling"] == 10
    assert all(chart["left"] <= x <= chart["right"] and chart["top"] <= y <= chart["bottom"] for x, y in line)


def test_an_area_closes_along_the_axis_under_its_line():
    (series,) = day_chart(DAYS, {"n": [1, 2, 3, 2, 1]})["series"]
    area = points(series["area"])
    assert series["area"].endswith("Z") and area[:5] == points(series["line"])
    assert area[5:] == [(x, 118.0) for x, _ in reversed(area[:5])]


def test_stacked_series_stand_on_the_one_before_and_share_one_scale():
    chart = day_chart(DAYS, {"background": [2, 2, 2, 2, 2], "foreground": [0, 3, 8, 0, 0]})
    background, foreground = chart["series"]
    assert chart["ceiling"] == 10  # the top of the stack (2 + 8), not either series alone
    assert [y for _, y in points(foreground["line"])] == pytest.approx([96.4, 64, 10, 96.4, 96.4])
    assert points(foreground["area"])[5:] == list(reversed(points(background["line"])))


def test_the_axes_are_labelled_with_days_in_words_and_short_values():
    chart = day_chart(DAYS, {"n": [0, 1200, 0, 0, 0]})
    assert [t["label"] for t in chart["x_ticks"]] == ["1 Mar", "3 Mar", "5 Mar"]
    assert [t["anchor"] for t in chart["x_ticks"]] == ["start", "middle", "end"]
    assert [t["label"] for t in chart["y_ticks"]] == ["0", "1k", "2k"]
    assert compact(2_500_000) == "2.5M" and compact(12) == "12" and compact(0.5) == "0.5"
    assert day_label(date(2025, 12, 9)) == "9 Dec"


def test_a_single_day_is_a_level_line_across_the_plot():
    chart = day_chart(DAYS[:1], {"n": [4]})
    line = points(chart["series"][0]["line"])
    assert [x for x, _ in line] == [40, 348] and line[0][1] == line[1][1]
    assert [t["label"] for t in chart["x_ticks"]] == ["1 Mar"]


def test_a_series_without_a_value_for_every_day_is_refused():
    with pytest.raises(ValueError):
        day_chart(DAYS, {"n": [1, 2]})
    with pytest.raises(ValueError):
        day_chart([], {"n": []})
