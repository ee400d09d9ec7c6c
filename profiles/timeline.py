"""Interval arithmetic on a GPU timeline: the union of activity intervals and the gaps between them."""
from __future__ import annotations

import numpy as np


def merge(start, end) -> list[tuple[float, float]]:
    """Sorted, non-overlapping intervals covering the given [start, end) intervals."""
    out: list[list[float]] = []
    for s, e in sorted(zip(start, end)):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def union(start, end) -> float:
    return sum(e - s for s, e in merge(start, end))


def gaps(intervals: list[tuple[float, float]], lo: float, hi: float) -> np.ndarray:
    """Lengths of the idle stretches of [lo, hi) outside the merged intervals."""
    edges = [lo, *[x for s, e in intervals for x in (max(s, lo), min(e, hi))], hi]
    starts, ends = np.array(edges[0::2]), np.array(edges[1::2])
    return np.clip(ends - starts, 0, None)[ends > starts]
