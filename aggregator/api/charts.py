"""Hand-made SVG charts of the dashboard: estimates with interval error bars, and report timelines.

Server-side and static: no script, no inline style (the dashboard's Content-Security-Policy allows
neither); colours come from the dashboard's stylesheet through class names. Every text and attribute value
is escaped (:func:`markupsafe.escape`), so a hostile category label is drawn as text. Each mark carries its
exact numbers as ``data-*`` attributes (``repr`` of the float, which reads back as the same double), so a
test, or a screen reader's table beside the chart, sees the numbers the API serves.

The x scale of an estimate chart spans [min(0, lowest bound), max(1, highest bound)] for proportions: LDP
estimates are unbiased, not clipped, so an interval may reach below 0 or above 1 and is drawn where it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

__all__ = ["Bar", "error_bar_chart", "timeline_chart"]

_WIDTH = 640
_LABEL_WIDTH = 170
_ROW = 30
_PAD = 24


@dataclass(frozen=True)
class Bar:
    """One estimate with its interval: ``label`` (a category), ``estimate`` and ``low``/``high`` (None when
    undefined, e.g. a share at n = 0)."""

    label: str
    estimate: float | None
    low: float | None
    high: float | None


def _attr(value: float | int | str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _short(text: str, limit: int = 22) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering [low, high]."""
    span = high - low
    if span <= 0:
        return [low]
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    ticks, value = [], first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def error_bar_chart(
    bars: Sequence[Bar], *, title: str, percent: bool = True, domain: tuple[float, float] | None = None
) -> Markup:
    """A horizontal dot-and-whisker chart: one row per bar, the dot at the estimate, the whisker from low
    to high. ``title`` names the chart for screen readers (``role="img"`` with ``aria-label``). The axis
    spans [0, 1] (``percent``) or [0, max], or ``domain`` (a number question's range), widened to every value."""
    values = [v for b in bars for v in (b.estimate, b.low, b.high) if v is not None and math.isfinite(v)]
    if domain is not None:
        low, high = min([domain[0], *values]), max([domain[1], *values])
        high = high if high > low else low + 1.0
    else:
        low = min([0.0, *values])
        high = max([1.0 if percent else 0.0, *values]) or 1.0
    plot = _WIDTH - _LABEL_WIDTH - _PAD

    def x(value: float) -> float:
        return round(_LABEL_WIDTH + (value - low) / (high - low) * plot, 2)

    height = _PAD * 2 + _ROW * max(1, len(bars))
    parts = [
        f'<svg class="chart errorbars" viewBox="0 0 {_WIDTH} {height}" role="img" aria-label="{escape(title)}" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    axis_y = height - _PAD
    for tick in _ticks(low, high):
        label = f"{tick * 100:g}%" if percent else f"{tick:g}"
        parts.append(
            f'<line class="grid" x1="{x(tick)}" x2="{x(tick)}" y1="{_PAD // 2}" y2="{axis_y}"/>'
            f'<text class="tick" x="{x(tick)}" y="{axis_y + 16}" text-anchor="middle">{escape(label)}</text>'
        )
    if low < 0:
        parts.append(f'<line class="zero" x1="{x(0.0)}" x2="{x(0.0)}" y1="{_PAD // 2}" y2="{axis_y}"/>')
    for i, bar in enumerate(bars):
        y = _PAD + i * _ROW + _ROW // 2
        shown = "no estimate" if bar.estimate is None else (
            f"{bar.estimate * 100:.1f}%" if percent else f"{bar.estimate:,.1f}"
        )  # fmt: skip
        interval = "" if bar.low is None or bar.high is None else (
            f", 95% interval {bar.low * 100:.1f}% to {bar.high * 100:.1f}%" if percent
            else f", 95% interval {bar.low:,.1f} to {bar.high:,.1f}"
        )  # fmt: skip
        parts.append(
            f'<g class="bar" data-category="{escape(bar.label)}" data-estimate="{_attr(bar.estimate)}" '
            f'data-ci-low="{_attr(bar.low)}" data-ci-high="{_attr(bar.high)}">'
            f"<title>{escape(bar.label)}: {escape(shown)}{escape(interval)}</title>"
            f'<text class="label" x="{_LABEL_WIDTH - 8}" y="{y + 4}" text-anchor="end">'
            f"{escape(_short(bar.label))}</text>"
        )
        if bar.low is not None and bar.high is not None:
            x1, x2 = x(bar.low), x(bar.high)
            parts.append(
                f'<line class="whisker" x1="{x1}" x2="{x2}" y1="{y}" y2="{y}"/>'
                f'<line class="cap" x1="{x1}" x2="{x1}" y1="{y - 6}" y2="{y + 6}"/>'
                f'<line class="cap" x1="{x2}" x2="{x2}" y1="{y - 6}" y2="{y + 6}"/>'
            )
        if bar.estimate is not None:
            parts.append(f'<circle class="dot" cx="{x(bar.estimate)}" cy="{y}" r="5"/>')
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every piece above is escaped or a number


def timeline_chart(buckets: Sequence[tuple[str, int]], *, title: str) -> Markup:
    """Vertical bars of accepted reports per bucket (``(start, reports)``), oldest left."""
    height, top, bottom, left = 200, 16, 36, 48
    plot_w, plot_h = _WIDTH - left - _PAD, height - top - bottom
    peak = max([n for _, n in buckets] + [1])
    step = min(plot_w / max(1, len(buckets)), 60.0)  # a few buckets stay bars, not one slab
    parts = [
        f'<svg class="chart timeline" viewBox="0 0 {_WIDTH} {height}" role="img" aria-label="{escape(title)}" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    for tick in _ticks(0, peak, 4):
        y = round(top + plot_h - tick / peak * plot_h, 2)
        parts.append(
            f'<line class="grid" x1="{left}" x2="{_WIDTH - _PAD}" y1="{y}" y2="{y}"/>'
            f'<text class="tick" x="{left - 6}" y="{y + 4}" text-anchor="end">{tick:g}</text>'
        )
    label_every = max(1, math.ceil(len(buckets) / 8))
    for i, (start, reports) in enumerate(buckets):
        h = round(reports / peak * plot_h, 2)
        x = round(left + i * step + step * 0.1, 2)
        parts.append(
            f'<g class="bucket" data-start="{escape(start)}" data-reports="{reports}">'
            f"<title>{escape(start)}: {reports} reports</title>"
            f'<rect class="column" x="{x}" y="{round(top + plot_h - h, 2)}" width="{round(step * 0.8, 2)}" '
            f'height="{h}"/></g>'
        )
        if i % label_every == 0:
            parts.append(
                f'<text class="tick" x="{round(x + step * 0.4, 2)}" y="{height - bottom + 16}" '
                f'text-anchor="middle">{escape(start[5:16].replace("T", " ").removesuffix(" 00:00"))}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every piece above is escaped or a number
