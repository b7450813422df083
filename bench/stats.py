"""Percentiles as every benchmark here prints them, in milliseconds."""

import statistics


def percentiles(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100) if len(samples) > 1 else samples * 99
    return {"n": len(samples), "p50_ms": round(statistics.median(samples), 2), "p99_ms": round(cuts[98], 2)}
