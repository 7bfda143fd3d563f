"""What perflab's profile code makes of the recordings in tests/data/profiles/ (shared by the
golden tests and tests/data/regen_profiles.py, which writes its result as expected.json).

Function starts come from the recording (function_starts.json), not from the binaries
installed here, so the results do not depend on the mariadbd of the machine running tests.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from perflab.analyze.profile import Merged, Profile, round_row
from perflab.analyze.profile_diff import diff
from perflab.observers.elf import FunctionStarts
from perflab.observers.perf_script import fold_perf_script
from perflab.observers.pmp import ModuleMap, StackSampler, fold_rows, parse_eu_stack

DATA = Path(__file__).resolve().parent.parent / "data" / "profiles"


def recordings() -> dict[str, Any]:
    return json.loads((DATA / "recordings.json").read_text(encoding="utf-8"))


def starts_loader() -> Any:
    recorded = recordings()["function_starts"]
    return lambda path: FunctionStarts(path.rsplit("/", 1)[-1], recorded.get(path, []))


def perf_text(key: str) -> list[str]:
    with gzip.open(DATA / f"{key}.txt.gz", "rt", encoding="utf-8") as f:
        return f.read().splitlines(keepends=True)


def fold_perf(key: str) -> tuple[Counter, Any]:
    return fold_perf_script(perf_text(key), starts_loader())


def folded_digest(stacks: Counter) -> str:
    text = "".join(f"{s} {c}\n" for s, c in sorted(stacks.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def perf_profiles(variant: str) -> Merged:
    profiles = []
    for key, rec in sorted(recordings()["perf"].items()):
        if rec["variant"] == variant:
            stacks, stats = fold_perf(key)
            txn = rec["transactions"] * min(1.0, rec["seconds"] / rec["window_s"])
            profiles.append(
                Profile.from_stacks(stacks, transactions=txn, sample_us=1e6 / rec["frequency_hz"], dsos=stats.dsos)
            )
    return Merged(profiles)


def eu_stack_threads() -> list[tuple[int, list[str]]]:
    modules = ModuleMap((DATA / "maps.txt").read_text(encoding="utf-8"), starts_loader())
    return parse_eu_stack((DATA / "eu_stack.txt").read_text(encoding="utf-8"), modules)


def sampler_fold() -> tuple[Counter, list, Any]:
    sampler = StackSampler(0, DATA)
    sampler.out = DATA / "pmp_sampler.txt"
    return fold_rows(sampler.rows(), sampler.dsos)


def expected() -> dict[str, Any]:
    perf = {}
    for key in sorted(recordings()["perf"]):
        stacks, stats = fold_perf(key)
        summary = {k: v for k, v in dataclasses.asdict(stats).items() if k != "dsos"}
        perf[key] = {
            "stats": summary,
            "unique_stacks": len(stacks),
            "digest": folded_digest(stacks),
            "top": [[s, c] for s, c in sorted(stacks.items(), key=lambda kv: (-kv[1], kv[0]))[:5]],
        }
    pmp_stacks, timed, pmp_stats = sampler_fold()
    rows = diff(perf_profiles("order"), perf_profiles("distinct")).rows(limit=15, by="self")
    return {
        "perf": perf,
        "eu_stack": [[tid, frames] for tid, frames in eu_stack_threads()],
        "pmp_sampler": {
            "stacks": dict(sorted(pmp_stacks.items())),
            "samples": pmp_stats.samples,
            "timed_rows": len(timed),
        },
        "diff_order_to_distinct": [round_row({k: v for k, v in r.items() if k != "callers"}) for r in rows],
    }
