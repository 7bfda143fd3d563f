"""go-tpc's own CPU per transaction on MariaDB and on PostgreSQL (issue 50, "Measure").

What: the client's CPU per transaction, go-tpc v1.0.12 TPC-C on 1 warehouse against each server
kind perflab runs here: MariaDB (its MySQL driver, over TCP to 127.0.0.1) and PostgreSQL 15 (its
postgres driver, lib/pq, through the server's unix socket). Per cell: `client.cpu_us_per_txn` (the
go-tpc process's user + system time over the window, from /proc, over its transactions of all five
types) and the same CPU over the window's new orders only (x transactions / new orders: the
transactions NOPM counts), with the server's CPU per transaction beside it and `other_cpu_cores`
(what else the machine ran). The two servers run different SQL for the same transaction (go-tpc's
PostgreSQL statements, its own prepared statements per driver), so no ratio to a baseline is
printed: each server's own figures, side by side.

How: two `perflab run`s as a user runs them (examples/tpcc.toml's form), in an order the seed
picks: each a sequential design, one variant, threads 1 and 4, ROUNDS repeats (3; 1 with --quick)
of 20 s windows after a 5 s warm-up (--quick: 4 s after 1 s). Printed per server and threads:
cells, mean TPS and NOPM, client CPU per transaction and per new order (mean, min-max), server
CPU per transaction, other_cpu_cores (mean, max).

Run: flock /work/measure.lock python3 bench/gotpc_cpu.py [--quick] [--seed N]   # ~6 minutes
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import _common as C

TPCC = """
[experiment]
name = "gotpc-cpu-{server}"
server = "{server}"
design = "sequential"
duration = "{duration}s"
warmup = "{warmup}s"
repeats = {rounds}

[workload]
tool = "go-tpc"
test = "tpcc"
warehouses = 1
threads = [1, 4]
"""
SERVERS = ("mariadb", "postgresql")


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"duration": 4, "warmup": 1, "rounds": 1}
    return {"duration": 20, "warmup": 5, "rounds": 3}


def measure(server: str, cfg: dict[str, Any], tmp: Path) -> list[dict[str, Any]]:
    toml = tmp / f"{server}.toml"
    toml.write_text(TPCC.format(server=server, **cfg), encoding="utf-8")
    C.cli("run", str(toml), "-o", str(tmp / server))
    return [c for c in json.loads(C.cli("export", str(tmp / server)))["cells"] if c["status"] == "ok"]


def per_new_order(cell: dict[str, Any]) -> float:
    """The client's CPU over the window per new order (NOPM's transactions), in µs."""
    summary = cell["summary"]
    return cell["client"]["cpu_us_per_txn"] * summary["transactions"] / summary["queries"]


def figures(cells: list[dict[str, Any]]) -> dict[str, Any]:
    other = [c["resources"]["other_cpu_cores"] for c in cells if c["resources"].get("other_cpu_cores") is not None]
    return {
        "cells": len(cells),
        "tps": C.mean([c["summary"]["tps"] for c in cells]),
        "nopm": C.mean([c["summary"]["qps"] for c in cells]),
        "client_us_per_txn": [c["client"]["cpu_us_per_txn"] for c in cells],
        "client_us_per_new_order": [per_new_order(c) for c in cells],
        "server_us_per_txn": C.mean([c["resources"]["server_cpu_us_per_txn"] for c in cells]),
        "other_cpu_cores_mean": C.mean(other) if other else None,
        "other_cpu_cores_max": max(other) if other else None,
    }


def row(key: str, f: dict[str, Any]) -> list[Any]:
    txn, new = f["client_us_per_txn"], f["client_us_per_new_order"]
    mean, most = f["other_cpu_cores_mean"], f["other_cpu_cores_max"]
    other = "-" if mean is None else f"{mean:.2f} / {most:.2f}"
    return [
        key,
        f["cells"],
        f"{f['tps']:,.0f}",
        f"{f['nopm']:,.0f}",
        f"{C.mean(txn):.0f} ({min(txn):.0f}-{max(txn):.0f})",
        f"{C.mean(new):.0f} ({min(new):.0f}-{max(new):.0f})",
        f"{f['server_us_per_txn']:.0f}",
        other,
    ]


def run(args: argparse.Namespace) -> None:
    cfg = settings(args.quick)
    order = list(SERVERS)
    random.Random(args.seed).shuffle(order)
    cells: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="plbench-gotpc-cpu-") as tmp:
        for server in order:
            C.say(f"measuring go-tpc on {server} ...")
            cells[server] = measure(server, cfg, Path(tmp))
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for server, found in cells.items():
        for cell in found:
            groups[(server, cell["threads"])].append(cell)
    out = {f"{server}/t{threads}": figures(found) for (server, threads), found in sorted(groups.items())}
    header = ["server/threads", "cells", "TPS", "NOPM", "client us/txn", "client us/new order", "server us/txn",
              "other cores mean / max"]  # fmt: skip
    C.say(f"order: {', '.join(order)} (seed {args.seed})")
    C.say(C.table(header, [row(k, f) for k, f in out.items()]))
    every = [c for found in cells.values() for c in found]
    C.say(f"other_cpu_cores: {C.other_cpu_cores(every)}")
    if args.quick:
        C.say("(quick mode: short windows, one round; a smoke test, not the figures to quote)")
    C.final_json({"bench": "gotpc_cpu", "quick": args.quick, "settings": cfg, "order": order, "groups": out})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: one round of 4 s windows")
    parser.add_argument("--seed", type=int, default=50)
    args = parser.parse_args()
    C.main_guard(lambda: run(args))


if __name__ == "__main__":
    main()
