"""PostgreSQL as a managed server (issue 13's figures): restore vs prepare per cell, the
harness's CPU during windows, and the QPS CV of 5 repeats of one cell beside MariaDB's.

What: three experiments, one after the other, each one cell x 5 repeats (a fresh server per
repeat, 5 s max warm-up, 15 s window, 2 clients), run with the perflab CLI as a user runs it:
  pg-pgbench    server = "postgresql", pgbench select-only, scale 10 (1M rows)
  pg-sysbench   server = "postgresql", sysbench oltp_point_select over its pgsql driver, 4 x 250k rows
  mariadb       sysbench oltp_point_select, 4 x 250k rows (the same statement, the same client)
Printed per experiment: mean QPS, the CV of QPS over the repeats, the dataset's prepare time
(initdb or mariadb-install-db, the load, a clean shutdown) against the per-cell restore time
(the copy each cell gets instead), the harness's CPU as a share of one core over the window,
and other_cpu_cores (a figure from a busy machine is not this machine's noise).

Goals: restore << prepare; harness CPU < 1% of a core.
Run: python3 bench/pg_server.py            # ~8 minutes, idle machine
     python3 bench/pg_server.py --quick    # smoke test: 3 repeats of 3 s windows, tiny datasets
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as C

HEAD = """
[experiment]
name = "{name}"
duration = "{duration}s"
max_warmup = "{warmup}s"
repeats = {repeats}
"""
BODIES = {
    "pg-pgbench": 'server = "postgresql"\n[dataset]\nscale = {scale}\n[workload]\ntool = "pgbench"\n'
    'test = "select-only"\nthreads = [2]\n',
    "pg-sysbench": 'server = "postgresql"\n[dataset]\ntables = 4\ntable_size = {table_size}\n[workload]\n'
    'test = "oltp_point_select"\nthreads = [2]\n',
    "mariadb": '[dataset]\ntables = 4\ntable_size = {table_size}\n[workload]\ntest = "oltp_point_select"\nthreads = [2]\n',
}


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"duration": 3, "warmup": 2, "repeats": 3, "scale": 1, "table_size": 5000}
    return {"duration": 15, "warmup": 5, "repeats": 5, "scale": 10, "table_size": 250_000}


def one(name: str, cfg: dict[str, Any], tmp: Path, extra: list[str]) -> dict[str, Any]:
    toml = tmp / f"{name}.toml"
    toml.write_text(HEAD.format(name=name, **cfg) + BODIES[name].format(**cfg), encoding="utf-8")
    results = tmp / name
    started = time.monotonic()
    C.cli("run", str(toml), "-o", str(results), *extra)
    wall = time.monotonic() - started
    doc = json.loads(C.cli("export", str(results)))
    ok = [c for c in doc["cells"] if c["status"] == "ok"]
    if not ok:
        raise C.BenchError(f"{name}: no cell ran: {doc['cells'][0]['error']}")
    qps = [c["summary"]["qps"] for c in ok]
    (dataset,) = doc["datasets"].values()
    harness = [c["resources"]["harness_cpu_s"] / c["summary"]["total_time_s"] for c in ok]
    return {
        "cells": len(ok),
        "failed": len(doc["cells"]) - len(ok),
        "qps": C.mean(qps),
        "cv": C.cv(qps),
        "prepare_s": dataset["prepare_s"],
        "restore_s": C.mean([c["resources"]["restore_s"] for c in ok]),
        "data_bytes": dataset["data_bytes"],
        "harness_cores": max(harness),
        "other_cpu_cores": [c["resources"].get("other_cpu_cores") or 0.0 for c in ok],
        "wall_s": round(wall, 1),
    }


def report(cfg: dict[str, Any], rows: dict[str, dict[str, Any]], quick: bool) -> None:
    table = [
        [name, r["cells"], f"{r['qps']:,.0f}", C.pct(r["cv"]), f"{r['prepare_s']:.1f}", f"{r['restore_s']:.2f}",
         f"{r['data_bytes'] / 2**20:.0f}", C.pct(r["harness_cores"]), f"{max(r['other_cpu_cores']):.3f}"]
        for name, r in rows.items()
    ]  # fmt: skip
    C.say(C.table(["experiment", "cells", "QPS", "CV", "prepare s", "restore s/cell", "data MiB",
                   "harness, max share of a core", "other_cpu_cores max"], table))  # fmt: skip
    if quick:
        C.say("(quick mode: short windows, tiny datasets; a smoke test, not the figures to quote)")
    C.final_json({"bench": "pg_server", "quick": quick, "settings": cfg, "experiments": rows})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: 3 repeats of 3 s windows, tiny datasets")
    parser.add_argument("--allow-concurrent", action="store_true", help="run beside another perflab run (smoke tests)")
    args = parser.parse_args()
    cfg = settings(args.quick)
    extra = ["--allow-concurrent"] if args.allow_concurrent else []

    def run() -> None:
        with tempfile.TemporaryDirectory(prefix="plbench-pg-") as tmp:
            rows = {name: one(name, cfg, Path(tmp), extra) for name in BODIES}
        report(cfg, rows, args.quick)

    C.main_guard(run)


if __name__ == "__main__":
    main()
