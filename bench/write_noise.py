"""Restart-to-restart noise of write workloads, on disk against tmpfs (issue 35).

What: the CV of QPS over the repeats of one cell (a fresh server on a fresh copy of the dataset
each time), for sysbench oltp_write_only on MariaDB and pgbench tpcb-like on PostgreSQL, with
the datadirs on tmpfs and on a directory on disk (--disk, default /var/tmp), run with the perflab
CLI as a user runs it. On disk each server keeps its own durability defaults (docs/storage.md),
so the disk's fsyncs are in every transaction; on tmpfs perflab's apply (PostgreSQL: fsync,
synchronous_commit and full_page_writes off). Printed per experiment: cells, mean QPS, the CV
of QPS over repeats with its 95% interval (chi-square, from C.ci95 of the log QPS), fsync and
fdatasync per transaction and the disk's write bytes per second ([observe] io), and
other_cpu_cores (a figure from a busy machine is not this machine's noise).

How: four experiments one after the other in a random order (--seed), each one cell x N repeats
(10; 3 with --quick), 20 s windows after a 5 s warm-up, 2 clients.

Run: python3 bench/write_noise.py [--disk /var/tmp] [--quick] [--seed N]
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import tempfile
from pathlib import Path
from typing import Any

import _common as C

WORKLOADS = {
    "mariadb": '[dataset]\ntables = 4\ntable_size = {table_size}\n[workload]\ntest = "oltp_write_only"\nthreads = [2]\n',
    "postgresql": '[dataset]\nscale = {scale}\n[workload]\ntool = "pgbench"\ntest = "tpcb-like"\nthreads = [2]\n',
}


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"duration": 3, "warmup": 1, "repeats": 3, "scale": 1, "table_size": 5000}
    return {"duration": 20, "warmup": 5, "repeats": 10, "scale": 10, "table_size": 100_000}


def experiment(name: str, server: str, storage: str, cfg: dict[str, Any]) -> str:
    head = (f'[experiment]\nname = "{name}"\nserver = "{server}"\nduration = "{cfg["duration"]}s"\n'
            f'warmup = "{cfg["warmup"]}s"\nrepeats = {cfg["repeats"]}\n')  # fmt: skip
    if storage != "tmpfs":
        head += f'storage = "{storage}"\n'
    return head + WORKLOADS[server].format(**cfg) + "[observe]\nio = true\n"


def one(name: str, server: str, storage: str, cfg: dict[str, Any], tmp: Path) -> dict[str, Any]:
    toml = tmp / f"{name}.toml"
    toml.write_text(experiment(name, server, storage, cfg), encoding="utf-8")
    C.cli("run", str(toml), "-o", str(tmp / name))
    doc = json.loads(C.cli("export", str(tmp / name)))
    ok = [c for c in doc["cells"] if c["status"] == "ok"]
    if len(ok) < 2:
        raise C.BenchError(f"{name}: {len(ok)} cells ran: {doc['cells'][0].get('error')}")
    qps = [c["summary"]["qps"] for c in ok]
    logs = [math.log(q) for q in qps]
    io = [c["resources"].get("io") or {} for c in ok]
    per_txn = [x.get("per_txn") or {} for x in io]
    return {
        "server": server, "storage": doc.get("storage"), "cells": len(ok), "qps": C.mean(qps), "cv": C.cv(qps),
        "log_sd": C.stdev(logs), "log_ci95": C.ci95(logs),
        "fsyncs_per_txn": C.mean([p.get("sys.fsync", 0) + p.get("sys.fdatasync", 0) for p in per_txn]),
        "disk_write_bytes_per_s": C.mean([(x.get("rates") or {}).get("disk.write_bytes_per_s") or 0 for x in io]),
        "other_cpu_cores": C.other_cpu_cores(ok),
    }  # fmt: skip


def run(args: argparse.Namespace) -> None:
    cfg = settings(args.quick)
    plan = [(f"{server}-{where}", server, "tmpfs" if where == "tmpfs" else args.disk)
            for server in WORKLOADS for where in ("tmpfs", "disk")]  # fmt: skip
    random.Random(args.seed).shuffle(plan)
    with tempfile.TemporaryDirectory(prefix="plbench-wn-") as tmp, \
            tempfile.TemporaryDirectory(prefix="plbench-", dir=args.disk) as disk:  # fmt: skip
        Path(disk).chmod(0o755)  # the postgres user runs PostgreSQL's server
        rows = {name: one(name, server, disk if s != "tmpfs" else s, cfg, Path(tmp)) for name, server, s in plan}
    table = [[name, r["cells"], f"{r['qps']:,.0f}", C.pct(r["cv"]), f"{r['fsyncs_per_txn']:.3f}",
              f"{r['disk_write_bytes_per_s'] / 2**20:.1f}", r["other_cpu_cores"]["max"]]
             for name, r in sorted(rows.items())]  # fmt: skip
    C.say(C.table(["experiment", "cells", "QPS", "CV over restarts", "fsyncs/txn", "disk MiB/s written",
                   "other_cpu_cores max"], table))  # fmt: skip
    if args.quick:
        C.say("(quick mode: short windows, tiny datasets; a smoke test, not the figures to quote)")
    C.final_json({"bench": "write_noise", "quick": args.quick, "seed": args.seed, "settings": cfg, "experiments": rows})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--disk", default="/var/tmp", help="a directory on the disk to measure (default /var/tmp)")
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--quick", action="store_true", help="smoke test: 3 repeats of 3 s windows, tiny datasets")
    args = parser.parse_args()
    C.main_guard(lambda: run(args))


if __name__ == "__main__":
    main()
