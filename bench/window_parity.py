"""Issue 47's constraint on the one window: no measured figure moves. The same experiments run by
the code before the window was written once (--old, default f49a14c) and by this checkout, side by
side, and their figures compared.

What: two sequential experiments (design = "sequential": the window under test) a user runs, each a fresh server per cell: MariaDB with sysbench
oltp_read_only at 2 threads (2 tables x 20k rows) and PostgreSQL 15 with pgbench select-only at 2
clients (scale 5), each glibc against jemalloc, 3 s warm-up and 8 s windows, REPEATS rounds. ROUNDS
times, in a shuffled order per round, each experiment is run by both checkouts (`python -m perflab
run` with the checkout as its working directory: its own perflab package). From each run's export:
  - the verdict row's ratio (jemalloc / glibc, the figure a user reads);
  - QPS per cell (its steady state), averaged per variant;
  - perflab's own CPU over the windows, % of a core (resources.harness_cpu_s / window seconds);
  - other_cpu_cores of the machine over the windows (a figure from a busy machine is not this machine's).
Printed per experiment: old and new means, new/old with a 95% interval over the rounds (pairs run
back to back), and whether the goal holds: new/old within 2% for the ratio and the QPS (the interval
says whether the run resolves 2%), perflab's own CPU at most 1% of a core.

Run: python3 bench/window_parity.py             # ~25 minutes on an idle machine
     python3 bench/window_parity.py --quick     # smoke test: 1 round, 1 repeat, 2 s windows
     python3 bench/window_parity.py --observe 'perf = true' --old 8db4e81   # the same with observers on
                                                # (an [observe] table appended to both experiments)
Exit status: 0 when it measured, 1 on a real error, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import _common as C

ROOT = Path(__file__).resolve().parent.parent
OLD = "f49a14c"  # the last commit with the six hand-written windows

MARIADB = """
[experiment]
name = "parity-mariadb"
design = "sequential"  # the window under test (interleaved runs its seats' turns instead)
duration = "{duration}s"
warmup = "{warmup}s"
repeats = {repeats}
[dataset]
tables = 2
table_size = 20000
[workload]
test = "oltp_read_only"
threads = [2]
[variants.allocator]
glibc = {{}}
jemalloc = {{ preload = "jemalloc" }}
"""

POSTGRESQL = """
[experiment]
name = "parity-pg"
server = "postgresql"
design = "sequential"
duration = "{duration}s"
warmup = "{warmup}s"
repeats = {repeats}
[dataset]
scale = 5
[workload]
tool = "pgbench"
test = "select-only"
threads = [2]
[variants.allocator]
glibc = {{}}
jemalloc = {{ preload = "jemalloc" }}
"""


def run(checkout: Path, experiment: Path, out: Path) -> dict[str, Any]:
    """One `perflab run` by `checkout`'s perflab, and its export."""
    for args in (["run", str(experiment), "-o", str(out)], ["export", str(out), "--format", "json"]):
        done = subprocess.run([sys.executable, "-m", "perflab", *args], cwd=checkout, capture_output=True,
                              text=True, check=False, timeout=3600)  # fmt: skip
        if done.returncode != 0:
            raise C.BenchError(f"{checkout.name}: perflab {args[0]} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def figures(doc: dict[str, Any]) -> dict[str, float | None]:
    cells = [c for c in doc["cells"] if c["status"] == "ok"]
    if len(cells) < len(doc["cells"]):
        failed = [c.get("error") for c in doc["cells"] if c["status"] != "ok"]
        raise C.BenchError(f"failed cells: {failed}")
    rows = [r for r in doc["comparisons"] if r["kind"] == "variant"]
    qps = {v: C.mean([c["summary"]["qps"] for c in cells if c["variant"]["allocator"] == v]) for v in ("glibc", "jemalloc")}
    windows = sum(c["summary"]["total_time_s"] for c in cells)
    return {
        "ratio": rows[0]["ratio"] if rows else None,
        "qps_glibc": qps["glibc"],
        "qps_jemalloc": qps["jemalloc"],
        "own_cpu_pct": 100 * sum(c["resources"]["harness_cpu_s"] for c in cells) / windows,
        "other_cpu_cores": max((c["resources"].get("other_cpu_cores") or 0.0) for c in cells),
    }


def measure(rounds: int, cfg: dict[str, int], old: str, observe: str = "") -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {"mariadb": [], "postgresql": []}
    with tempfile.TemporaryDirectory(prefix="parity-") as tmp:
        work = Path(tmp)
        checkout = work / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(checkout), old],
                       check=True, capture_output=True)  # fmt: skip
        try:
            files = {}
            for name, text in (("mariadb", MARIADB), ("postgresql", POSTGRESQL)):
                files[name] = work / f"{name}.toml"
                observed = f"[observe]\n{observe}\n" if observe else ""
                files[name].write_text(text.format(**cfg) + observed, encoding="utf-8")
            for n in range(rounds):
                pair: dict[str, dict[str, Any]] = {name: {} for name in files}
                for code, where in random.sample([("old", checkout), ("new", ROOT)], 2):
                    for name, path in files.items():
                        C.say(f"round {n + 1}/{rounds}: {name} by the {code} code")
                        pair[name][code] = figures(run(where, path, work / f"{name}-{code}-{n}"))
                for name in files:
                    found[name].append(pair[name])
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)], check=False)
    return found


def report(found: dict[str, list[dict[str, Any]]], quick: bool, old: str) -> None:
    rows = []
    for name, pairs in found.items():
        for key in ("ratio", "qps_glibc", "qps_jemalloc", "own_cpu_pct"):
            olds = [p["old"][key] for p in pairs if p["old"][key] is not None]
            news = [p["new"][key] for p in pairs if p["new"][key] is not None]
            ratios = [p["new"][key] / p["old"][key] for p in pairs if p["old"][key] and p["new"][key] is not None]
            ci = C.ci95(ratios)
            rows.append([name, key, C.rnd(C.mean(olds) if olds else None), C.rnd(C.mean(news) if news else None),
                         C.rnd(C.mean(ratios) if ratios else None),
                         f"{ci[0]:.4f}-{ci[1]:.4f}" if ci else "-"])  # fmt: skip
    C.say(C.table(["experiment", "figure", f"old ({old})", "new", "new/old", "95% CI"], rows))
    other = max(p[c]["other_cpu_cores"] for pairs in found.values() for p in pairs for c in ("old", "new"))
    C.say(f"other_cpu_cores (largest cell): {other}")
    if quick:
        C.say("(quick mode: a smoke test, not the figures to quote)")
    C.final_json({"bench": "window_parity", "quick": quick, "old": old, "pairs": found, "other_cpu_cores": other})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 round, 1 repeat, 2 s windows")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old", default=OLD, help="the commit to compare with (default: %(default)s)")
    parser.add_argument("--observe", default="", help="the body of an [observe] table for both experiments")
    args = parser.parse_args()
    cfg = {"duration": 2, "warmup": 1, "repeats": 1} if args.quick else {"duration": 8, "warmup": 3, "repeats": 3}
    rounds = 1 if args.quick else args.rounds

    def go() -> None:
        report(measure(rounds, cfg, args.old, args.observe), args.quick, args.old)

    C.main_guard(go)


if __name__ == "__main__":
    main()
