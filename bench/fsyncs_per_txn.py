"""fsyncs per transaction at innodb_flush_log_at_trx_commit 1 and 2, on disk (issue 35).

What: MariaDB on a directory on disk (--disk, default /var/tmp), sysbench oltp_write_only, the
variants innodb_flush_log_at_trx_commit = 1 (the redo log synced at every commit) and 2 (written
at every commit, synced once a second), at 1, 4 and 16 client threads, with [observe] io: the
server's fsync and fdatasync calls per transaction (the kernel's syscall tracepoints, over its
whole process), the disk's writes and flushes per transaction (/proc/diskstats), InnoDB's redo
bytes per transaction, and QPS. At 1 the expectation is about one sync per transaction at one
thread and fewer as threads share a group commit; at 2, about one a second whatever the rate.

How: `perflab run examples/durability.toml`'s matrix with the threads and --rounds given here
(rounds: 5; 2 with --quick), run with the perflab CLI; figures are the mean over rounds per
variant x threads, with their min-max.

Run: python3 bench/fsyncs_per_txn.py [--disk /var/tmp] [--quick]
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import _common as C

EXPERIMENT = """
[experiment]
name = "fsyncs-per-txn"
design = "sequential"
duration = "{duration}s"
warmup = "{warmup}s"
repeats = {rounds}
storage = "{disk}"

[dataset]
tables = 4
table_size = {table_size}

[workload]
test = "oltp_write_only"
threads = {threads}

[variants.flush_log_at_trx_commit]
"1" = {{ server_options = {{ innodb_flush_log_at_trx_commit = 1 }} }}
"2" = {{ server_options = {{ innodb_flush_log_at_trx_commit = 2 }} }}

[observe]
io = true
"""
FIGURES = ("sys.fdatasync", "sys.fsync", "disk.writes", "disk.flushes", "innodb.log_bytes_written")


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"duration": 3, "warmup": 1, "rounds": 2, "table_size": 5000, "threads": [1, 4]}
    return {"duration": 15, "warmup": 5, "rounds": 5, "table_size": 100_000, "threads": [1, 4, 16]}


def run(args: argparse.Namespace) -> None:
    cfg = settings(args.quick)
    with tempfile.TemporaryDirectory(prefix="plbench-fs-") as tmp, \
            tempfile.TemporaryDirectory(prefix="plbench-", dir=args.disk) as disk:  # fmt: skip
        toml = Path(tmp) / "e.toml"
        toml.write_text(EXPERIMENT.format(disk=disk, **cfg), encoding="utf-8")
        C.cli("run", str(toml), "-o", str(Path(tmp) / "r"))
        doc = json.loads(C.cli("export", str(Path(tmp) / "r")))
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for cell in doc["cells"]:
        if cell["status"] == "ok":
            groups[(cell["variant"]["flush_log_at_trx_commit"], cell["threads"])].append(cell)
    rows, out = [], {}
    for (flush, threads), cells in sorted(groups.items()):
        per = [c["resources"]["io"]["per_txn"] for c in cells]
        syncs = [p.get("sys.fdatasync", 0) + p.get("sys.fsync", 0) for p in per]
        figures = {k: C.mean([p.get(k, 0) for p in per]) for k in FIGURES}
        qps = C.mean([c["summary"]["qps"] for c in cells])
        out[f"{flush}/t{threads}"] = {"cells": len(cells), "syncs_per_txn": syncs, "qps": qps, **figures}
        rows.append([flush, threads, len(cells), f"{C.mean(syncs):.3f}", f"{min(syncs):.3f}-{max(syncs):.3f}",
                     f"{figures['disk.flushes']:.3f}", f"{figures['innodb.log_bytes_written']:.0f}", f"{qps:,.0f}"])  # fmt: skip
    C.say(f"storage: {doc.get('storage')}")
    C.say(C.table(["flush_log_at_trx_commit", "threads", "cells", "fsync+fdatasync/txn", "min-max",
                   "disk flushes/txn", "redo bytes/txn", "QPS"], rows))  # fmt: skip
    C.say(f"other_cpu_cores: {C.other_cpu_cores([c for c in doc['cells'] if c['status'] == 'ok'])}")
    if args.quick:
        C.say("(quick mode: short windows, a tiny dataset; a smoke test, not the figures to quote)")
    C.final_json({"bench": "fsyncs_per_txn", "quick": args.quick, "settings": cfg, "storage": doc.get("storage"),
                  "groups": out})  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--disk", default="/var/tmp", help="a directory on the disk to measure (default /var/tmp)")
    parser.add_argument("--quick", action="store_true", help="smoke test: 2 rounds of 3 s windows, a tiny dataset")
    args = parser.parse_args()
    C.main_guard(lambda: run(args))


if __name__ == "__main__":
    main()
