"""What a run spends between its windows, the current code against an older commit's, in the same
run: the wall time of a whole interleaved run of 4 rounds of two 1 s seats (RUN below).

Why: each stop of a process perflab started (a seat's client, its status reader, its server) waited
for its exit by polling every 50 ms (places/proc.Child.wait), 25 ms on average; MariaDB's readiness
was polled every 50 ms too. In an interleaved round of two seats that was 0.3 s of 2.7 (cProfile of
the run below). The wait is now the child's pidfd (places/proc.exited), readiness polled every 10 ms.
Measured 2026-12-01 against bfc9df0 (3 runs a side, alternated, other_cpu_cores <= 0.02): 12.02 ->
10.74 s a run (new/old 0.89); the runs' QPS and ratios alike (the windows are not touched).

What: `perflab run` of RUN, --runs times a side, alternated old/new so drift falls on both; the wall
time of each run; prints each side's median, the ratio new/old with its range over the pairs, and
the highest other_cpu_cores of any cell.

Run: python3 bench/stop_latency.py --old bfc9df0            # 3 runs a side, ~1.5 min
     python3 bench/stop_latency.py --old bfc9df0 --runs 6
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C

ROOT = Path(__file__).resolve().parent.parent
RUN = """
[experiment]
name = "stop-latency"
duration = "1s"
warmup = "0s"
repeats = 4

[dataset]
tables = 1
table_size = 2000

[workload]
test = "oltp_point_select"
threads = [4]

[variants.config]
reference = { server_options = { general_log = "OFF" } }
table     = { server_options = { general_log = "OFF", log_output = "TABLE" } }
"""


def wall_s(checkout: Path, spec: Path, out: Path) -> tuple[float, float]:
    """One run from `checkout`: its wall seconds and its cells' highest other_cpu_cores."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "perflab", "run", str(spec), "-o", str(out), "--history", "off"],
                          cwd=checkout, capture_output=True, text=True, check=False)  # fmt: skip
    took = time.monotonic() - started
    if done.returncode != 0:
        raise C.BenchError(f"{checkout.name}: perflab run exited {done.returncode}: {done.stderr[-500:]!r}")
    exported = subprocess.run([sys.executable, "-m", "perflab", "export", str(out)], cwd=ROOT,
                              capture_output=True, text=True, check=True)  # fmt: skip
    cells = json.loads(exported.stdout)["cells"]
    return took, max((c.get("resources") or {}).get("other_cpu_cores") or 0.0 for c in cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--old", required=True, help="the commit to compare with")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stop-latency-") as tmp:
        spec = Path(tmp) / "run.toml"
        spec.write_text(RUN, encoding="utf-8")
        checkout = Path(tmp) / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(checkout), args.old],
                       check=True, capture_output=True)  # fmt: skip
        try:
            took: dict[str, list[float]] = {"old": [], "new": []}
            other = 0.0
            for n in range(args.runs):
                for side in ("old", "new") if n % 2 == 0 else ("new", "old"):
                    s, o = wall_s(checkout if side == "old" else ROOT, spec, Path(tmp) / f"out-{side}-{n}")
                    took[side].append(s)
                    other = max(other, o)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)], check=False)
    old, new = statistics.median(took["old"]), statistics.median(took["new"])
    ratios = [b / a for a, b in zip(took["old"], took["new"], strict=True)]
    C.say(C.table(["run", f"old ({args.old}) wall s", "new wall s", "new/old (medians)", "pairs' range"],
                  [["4 rounds x 2 seats x 1 s", f"{old:.2f}", f"{new:.2f}", f"{new / old:.3f}",
                    f"{min(ratios):.3f}-{max(ratios):.3f}"]]))  # fmt: skip
    C.say(f"other_cpu_cores: {other:.3f} (the highest of any cell)")
    C.final_json(
        {"bench": "stop_latency", "old": args.old, "runs": args.runs, "wall_s": took, "other_cpu_cores": other}
    )


if __name__ == "__main__":
    C.main_guard(main)
