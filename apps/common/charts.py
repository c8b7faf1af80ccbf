"""Small charts drawn on the server as SVG: values per day scaled into lines and areas, with the labels of their
axes. The memory growth chart (apps/memories/views/charts.py) and the tokens chart of the models page
(apps/llm/views.py) draw through it; the templates only place what it computed."""

from __future__ import annotations

import math
from datetime import date

WIDTH, HEIGHT = 360, 140
# Room around the plot for the axes' labels: the values' on the left, the days' below.
LEFT, RIGHT, TOP, BOTTOM = 40, 12, 10, 22


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × a power of ten at or above `value` (1 for nothing): the top of the value axis."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 2.5, 5, 10) if step * power >= value * (1 - 1e-9))


def compact(value: float) -> str:
    """1200 → "1.2k", 3_400_000 → "3.4M", 12 → "12": short enough for an axis."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.1f}".rstrip("0").rstrip(".") + suffix
    return f"{value:.1f}".rstrip("0").rstrip(".")


def day_label(day: date) -> str:
    """ "3 Mar": a day on an axis (the year is said beside the chart)."""
    return f"{day.day} {day:%b}"


def _points(xs: list[float], ys: list[float]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys, strict=True))


def day_chart(days: list[date], series: dict[str, list[float]], *, width: int = WIDTH, height: int = HEIGHT) -> dict:
    """Each series as a line along its top and an area down to the series before it (stacked, in the order given:
    the first stands on the axis); the last series' top sets the scale. Every series has a value per day.

    Answers the drawing's size, the plot's edges, per series its `line` and `area` (SVG path data), and the ticks:
    days (first, middle, last) below and values (0, half, top) on the left, each with where it goes."""
    if not days or any(len(values) != len(days) for values in series.values()):
        raise ValueError("A day chart needs a value per day in every series.")
    left, right, top, bottom = LEFT, width - RIGHT, TOP, height - BOTTOM
    ceiling = nice_ceiling(max((sum(column) for column in zip(*series.values(), strict=True)), default=0))
    # One day alone is drawn across the whole width, as a level line.
    n = max(len(days) - 1, 1)
    xs = [left + (right - left) * i / n for i in range(len(days))] if len(days) > 1 else [left, right]

    def y(value: float) -> float:
        return bottom - (bottom - top) * value / ceiling

    drawn, base = [], [0.0] * len(days)
    for name, values in series.items():
        tops = [b + v for b, v in zip(base, values, strict=True)]
        upper, lower = [y(v) for v in tops], [y(v) for v in base]
        if len(days) == 1:
            upper, lower = upper * 2, lower * 2
        line = "M" + _points(xs, upper)
        area = f"M{_points(xs, upper)} L{_points(xs[::-1], lower[::-1])} Z"
        drawn.append({"name": name, "line": line, "area": area})
        base = tops
    middle = len(days) // 2
    x_ticks = [{"x": xs[0], "label": day_label(days[0]), "anchor": "start"}]
    if len(days) > 2:
        x_ticks.append({"x": round(xs[middle], 1), "label": day_label(days[middle]), "anchor": "middle"})
    if len(days) > 1:
        x_ticks.append({"x": xs[-1], "label": day_label(days[-1]), "anchor": "end"})
    y_ticks = [{"y": round(y(v), 1), "label": compact(v)} for v in (0, ceiling / 2, ceiling)]
    return {
        "width": width,
        "height": height,
        "left": left,
        "right": right,
        "top": top,
        "bottom": bottom,
        "series": drawn,
        "x_ticks": x_ticks,
        "y_ticks": y_ticks,
        "ceiling": ceiling,
    }
