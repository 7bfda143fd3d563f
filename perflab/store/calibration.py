"""Calibration files: what `perflab calibrate` measured on this machine for one workload,
stored per host so that `repeats = "auto"` can plan with it; and whether one may be used.

One JSON file per host, workload and design, under the cache (`$PERFLAB_CACHE/calibration/`,
else ~/.cache/perflab/calibration/): HOSTNAME-WORKLOADHASH.json (HOSTNAME-WORKLOADHASH-interleaved.json
for design = "interleaved"), where WORKLOADHASH is the first 16 hex digits of the sha256 of the
experiment file's [dataset] and [workload] sections (canonical JSON). The file starts with its format:

    {"format": "perflab-calibration/1", "created_at": "2026-11-22T23:40:00+00:00",
     "host": {"hostname": ..., "kernel": ..., "cpu_model": ..., ...}, "workload_hash": "...",
     "server_sha256": "...", "noise": {"per_second": ..., "restart": ..., "overhead": ...},
     "variance": {...}, "plan": {...}, ...}

Format history:
  perflab-calibration/1  first version (docs/methodology.md#calibration).
                         `design` added within it on 2026-11-26 (experiment.design of the A/A run;
                         absent: the sequential design, which every earlier file measured).

A calibration is used only when it matches: the same host identity (HOST_KEYS of hostinfo),
the same workload hash, the same design (experiment.design: a file without `design` measured the
sequential one), the same server binary (sha256), and not older than MAX_AGE_DAYS.
Otherwise it is ignored, and `perflab run` says which file and why (`find`); passed
explicitly (`perflab run --calibration FILE`), a mismatch is an error (exit 2: `check`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from perflab.errors import UsageError

FORMAT = "perflab-calibration/1"
MAX_AGE_DAYS = 30
HOST_KEYS = ("hostname", "kernel", "machine", "cpu_model", "cores", "memory_bytes", "glibc", "mariadbd", "sysbench")
NOISE_KEYS = ("per_second", "restart", "overhead")
MAX_CHASE_WEIGHT = 5.0  # host_speed.chase_weight: the chase's weight beside the spin (0.6-2.3 here)
MAX_STEAL_WEIGHT = 20.0  # host_speed.steal_weight: steal's (per core) beside the canary's; wider than the chase's, as
# a quiet hour's canary slope can be small beside steal's
MAX_SLOPE = 5.0  # |host_speed.slope| beyond it: no slope of a real host (0.5 here); calibrate does not save one
HINT = "run `perflab calibrate FILE.toml` on this machine (`perflab docs experiment#calibration`)"
NONE_MATCHED = "no calibration matched this host and workload"
WHAT_IT_BUYS = (
    "`perflab calibrate FILE.toml` measures this machine's noise once (a few minutes), so that runs "
    "start with the rounds an effect the size of equivalence_margin needs and say what fixed repeats "
    "can detect (said once per machine)"
)


def workload_hash(dataset: dict[str, Any], workload: dict[str, Any]) -> str:
    """The workload identity: the [dataset] and [workload] sections, canonical JSON, sha256."""
    text = json.dumps({"dataset": dataset, "workload": workload}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def host_identity(host: dict[str, Any]) -> dict[str, Any]:
    return {key: host.get(key) for key in HOST_KEYS}


def path_for(directory: Path, host: dict[str, Any], whash: str, design: str = "sequential") -> Path:
    """HOST-WORKLOADHASH.json; an interleaved design's calibration beside it, -interleaved.json."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", str(host.get("hostname") or "host")) or "host"
    suffix = "" if design == "sequential" else f"-{design}"
    return directory / f"{name}-{whash}{suffix}.json"


def save(path: Path, doc: dict[str, Any]) -> Path:
    """Write `doc` (replacing the previous calibration of this host and workload) atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read(path: Path) -> dict[str, Any]:
    """The calibration in `path`; a UsageError naming what is wrong with it otherwise."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read: {exc.strerror or exc}", HINT) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: corrupt calibration file (not JSON: {exc})", HINT) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise UsageError(f"{path}: format {found!r} is not {FORMAT!r}", "a newer or older perflab wrote it; " + HINT)
    noise = doc.get("noise")
    given = noise if isinstance(noise, dict) else {}
    bad = [k for k in NOISE_KEYS if not isinstance(given.get(k), int | float) or given[k] < 0]
    if not isinstance(noise, dict) or bad or not isinstance(doc.get("created_at"), str):
        what = f"noise.{bad[0]}" if isinstance(noise, dict) and bad else "noise" if not noise else "created_at"
        raise UsageError(f"{path}: corrupt calibration file ({what} is missing or not a number >= 0)", HINT)
    slope = doc.get("host_speed")  # optional: the canary's slope ([observe] host_speed)
    if slope is not None and not (
        isinstance(slope, dict) and isinstance(slope.get("slope"), int | float) and abs(slope["slope"]) <= MAX_SLOPE
    ):
        raise UsageError(f"{path}: corrupt calibration file (host_speed.slope is not a number from -5 to 5)", HINT)
    weight = (slope or {}).get("chase_weight")  # optional, since 2026-11-25: the chase's weight beside the spin
    if weight is not None and not (isinstance(weight, int | float) and 0 <= weight <= MAX_CHASE_WEIGHT):
        raise UsageError(
            f"{path}: corrupt calibration file (host_speed.chase_weight is not a number from 0 to "
            f"{MAX_CHASE_WEIGHT:g})",
            HINT,
        )
    weight = (slope or {}).get("steal_weight")  # optional, since 2026-11-26: the host's steal time beside the canary
    if weight is not None and not (isinstance(weight, int | float) and 0 <= weight <= MAX_STEAL_WEIGHT):
        raise UsageError(
            f"{path}: corrupt calibration file (host_speed.steal_weight is not a number from 0 to "
            f"{MAX_STEAL_WEIGHT:g})",
            HINT,
        )
    return doc


def mismatch(
    doc: dict[str, Any],
    host: dict[str, Any],
    whash: str,
    server_sha: str | None,
    now: dt.datetime,
    design: str = "sequential",
    server_unknown: str = "",
) -> str:
    """Why `doc` may not plan this run ("" when it may): the first key that differs.
    `server_sha`: the binary the run's calibrated configuration runs; `server_unknown`: why
    that binary is not known yet (then a calibration of a known binary is not used)."""
    for key in HOST_KEYS:
        have, want = (doc.get("host") or {}).get(key), host.get(key)
        if have != want:
            return f"host.{key}: the calibration was measured with {have!r}, this machine has {want!r} (another host)"
    if doc.get("workload_hash") != whash:
        return (
            f"workload_hash: the calibration measured another [dataset]/[workload] ({doc.get('workload_hash')}, "
            f"this file's is {whash})"
        )
    measured = doc.get("design") or "sequential"  # files before 2026-11-26 measured the sequential design
    if measured != design:
        return f"design: the calibration measured the {measured} design, this run is {design}"
    if server_unknown and doc.get("server_sha256") is not None:
        return f"server_sha256: {server_unknown}"
    if server_sha is not None and doc.get("server_sha256") not in (None, server_sha):
        was = str(doc.get("server_sha256"))[:12]
        return f"server_sha256: the server binary changed since ({was} -> {server_sha[:12]})"
    try:
        created = dt.datetime.fromisoformat(doc["created_at"])
    except ValueError:
        return f"created_at: {doc['created_at']!r} is not a date"
    age = (now - created).total_seconds() / 86400
    if age > MAX_AGE_DAYS:
        return f"created_at: {age:.0f} days old, stale after {MAX_AGE_DAYS} (the machine may have changed)"
    return ""


def check(
    path: Path,
    host: dict[str, Any],
    whash: str,
    server_sha: str | None,
    now: dt.datetime,
    design: str = "sequential",
    server_unknown: str = "",
) -> dict[str, Any]:
    """An explicitly given calibration file, or a UsageError (exit 2) naming the mismatch."""
    doc = read(path)
    why = mismatch(doc, host, whash, server_sha, now, design, server_unknown)
    if why:
        raise UsageError(f"{path}: cannot plan this run: {why}", HINT)
    return {**doc, "file": str(path)}


def find(
    directory: Path,
    host: dict[str, Any],
    whash: str,
    server_sha: str | None,
    now: dt.datetime,
    design: str = "sequential",
    server_unknown: str = "",
) -> tuple[dict[str, Any] | None, str]:
    """(the matching calibration or None, one line saying which was used, or why none)."""
    path = path_for(directory, host, whash, design)
    if not path.exists():
        others = sorted(p.name for p in directory.glob(f"*-{whash}.json")) if directory.is_dir() else []
        elsewhere = f" (only for other hosts: {', '.join(others)})" if others else ""
        return None, f"{NONE_MATCHED}{elsewhere}; {WHAT_IT_BUYS}"
    try:
        doc = read(path)
    except UsageError as exc:
        return None, f"ignored {exc.message}"
    why = mismatch(doc, host, whash, server_sha, now, design, server_unknown)
    if why:
        return None, f"ignored {path}: {why}; {HINT}"
    return {**doc, "file": str(path)}, f"using {path} (measured {doc['created_at'][:10]})"
