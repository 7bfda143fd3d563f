"""Results directories for the history tests: one run of an experiment, its per-repeat QPS given,
cloned from the recorded tiny run (tests/data/report/tiny), so every cell is a real stored cell."""

from __future__ import annotations

import datetime as dt
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from perflab.store import folded
from perflab.store.results import Results

TINY = Path(__file__).resolve().parent.parent / "data" / "report" / "tiny"
START = dt.datetime(2026, 11, 1, 3, 0, tzinfo=dt.UTC)


def template(cache: Path) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """(meta, one cell, its intervals) of the tiny run (copied: opening it may upgrade it)."""
    copy = cache / "tiny-template"
    if not copy.exists():
        shutil.copytree(TINY, copy)
    with Results(copy) as tiny:
        cell = tiny.cells()[0]
        return tiny.meta(), cell, tiny.intervals(cell["id"])


def make_run(
    directory: Path,
    night: int,
    qps: list[float],
    *,
    name: str = "nightly",
    variant: dict[str, str] | None = None,
    host: dict[str, Any] | None = None,
    git: dict[str, str] | None = None,
    workload: dict[str, Any] | None = None,
    profile: dict[str, int] | None = None,
    cell_extra: dict[str, Any] | None = None,
) -> Path:
    """A run started `night` days after START whose settled repeats have these QPS values."""
    meta, cell, intervals = template(directory.parent)
    variant = {"log": "OFF"} if variant is None else variant
    experiment = {**meta["experiment"], "name": name, "axes": {k: [v] for k, v in variant.items()}}
    if workload is not None:
        experiment["workload"] = {**experiment["workload"], **workload}
    started = START + dt.timedelta(days=night)
    with Results(directory, create=True) as results:
        results.set_meta(**{
            **meta, "experiment": experiment, "started_at": started.isoformat(), "status": "complete",
            "ended_at": (started + dt.timedelta(minutes=5)).isoformat(), "host": {**meta["host"], **(host or {})},
            "git": git or {}, "cell_count": len(qps),
        })  # fmt: skip
        for i, value in enumerate(qps):
            factor = value / cell["summary"]["qps"]
            summary = {**cell["summary"], "qps": value, "tps": cell["summary"]["tps"] * factor}
            summary["latency_ms"] = {k: v / factor for k, v in cell["summary"]["latency_ms"].items()}
            key = ",".join(f"{a}={b}" for a, b in variant.items()) + f"/t2/r{i + 1}"
            row = {
                **cell,
                "id": i,
                "key": key,
                "variant": variant,
                "repeat": i + 1,
                "summary": summary,
                **(cell_extra or {}),
            }
            scaled = [{**iv, "qps": iv["qps"] * factor, "tps": iv["tps"] * factor} for iv in intervals]
            results.commit_cell(row, scaled, [])
            if profile is not None:  # [observe] perf as the run stores it: folded stacks and their row
                _profile(results, directory, i, profile, summary["transactions"])
    return directory


def make_paired_run(
    directory: Path,
    night: int,
    sides: dict[str, list[float]],
    *,
    name: str = "nightly",
    axis: str = "config",
    spec_text: str | None = None,
) -> Path:
    """A run of one axis whose labels (the first the baseline) ran in rounds: `sides` maps each
    label to its QPS per round, so the run's comparison pairs them within rounds."""
    meta, cell, intervals = template(directory.parent)
    experiment = {**meta["experiment"], "name": name, "axes": {axis: list(sides)}}
    started = START + dt.timedelta(days=night)
    count = sum(len(v) for v in sides.values())
    with Results(directory, create=True) as results:
        results.set_meta(**{
            **meta, "experiment": experiment, "started_at": started.isoformat(), "status": "complete",
            "ended_at": (started + dt.timedelta(minutes=5)).isoformat(), "git": {}, "cell_count": count,
            **({"spec_text": spec_text} if spec_text is not None else {}),
        })  # fmt: skip
        cell_id = 0
        for label, qps in sides.items():
            for i, value in enumerate(qps):
                factor = value / cell["summary"]["qps"]
                summary = {**cell["summary"], "qps": value, "tps": cell["summary"]["tps"] * factor}
                summary["latency_ms"] = {k: v / factor for k, v in cell["summary"]["latency_ms"].items()}
                row = {**cell, "id": cell_id, "key": f"{axis}={label}/t2/r{i + 1}", "variant": {axis: label},
                       "repeat": i + 1, "summary": summary}  # fmt: skip
                scaled = [{**iv, "qps": iv["qps"] * factor, "tps": iv["tps"] * factor} for iv in intervals]
                results.commit_cell(row, scaled, [])
                cell_id += 1
    return directory


def _profile(results: Results, directory: Path, cell_id: int, stacks: dict[str, int], transactions: float) -> None:
    meta = {"source": "perf", "window": "measured", "target": "server", "seconds": 2.0, "transactions": transactions,
            "frequency_hz": 99.0, "dsos": {}}  # fmt: skip
    path = folded.write(folded.base(directory, cell_id, "perf"), Counter(stacks), meta)
    results.commit_profile({
        "cell_id": cell_id, "source": "perf", "phase": "measured", "target": "server",
        "path": str(path.relative_to(directory)), "samples": sum(stacks.values()), "seconds": 2.0,
        "transactions": transactions, "window_transactions": int(transactions), "frequency_hz": 99.0,
        "call_graph": "fp", "quality": None, "top": [],
    })  # fmt: skip
