"""Shared helpers for the benchmarks: import the plugin under its fixed name."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def load_plugin() -> Any:
    """This checkout as the package ``project_history_recall`` (never by folder name)."""
    if "project_history_recall" in sys.modules:
        return sys.modules["project_history_recall"]
    spec = importlib.util.spec_from_file_location(
        "project_history_recall", ROOT / "__init__.py", submodule_search_locations=[str(ROOT)]
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["project_history_recall"] = module
    spec.loader.exec_module(module)
    return module


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (``pct`` in 0..100) of a non-empty list."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def summary_ms(samples: list[float]) -> dict[str, float]:
    """p50 / p95 / mean in milliseconds of samples given in seconds."""
    return {
        "p50_ms": round(percentile(samples, 50) * 1000, 2),
        "p95_ms": round(percentile(samples, 95) * 1000, 2),
        "mean_ms": round(statistics.fmean(samples) * 1000, 2),
    }
