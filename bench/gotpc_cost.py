"""go-tpc's own CPU per transaction, against sysbench's, on the same MariaDB (issue 35).

What: the client's CPU per transaction (cell `client.cpu_us_per_txn`: the client process's
user + system time over the window, from /proc, divided by its transactions) and the server's
(`resources.server_cpu_us_per_txn`), for go-tpc v1.0.7 TPC-C (1 warehouse; a transaction is any
of the five TPC-C types, NOPM counts new orders only) and, as the baseline measured in the same
run, sysbench oltp_read_write (4 tables x 100k rows). Both share the 2 vCPUs with the server, so
the client's share of the CPU a transaction costs is the figure that says how much of the
machine the load generator takes: client / (client + server), per tool and thread count, and
go-tpc's share over sysbench's (the ratio).

How: two `perflab run`s as a user runs them, in an order the seed picks: each a sequential
design, one variant (glibc), threads 1 and 4, ROUNDS repeats (3; 1 with --quick) of 20 s windows
after a 5 s warm-up (--quick: 4 s after 1 s). Printed per tool and threads: cells, mean TPS, client
and server CPU per transaction (mean, min-max), the client's share, and other_cpu_cores.

Run: flock /work/measure.lock python3 bench/gotpc_cost.py [--quick] [--seed N]   # ~8 minutes
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

GOTPC = """
[experiment]
name = "gotpc-cost"
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

SYSBENCH = """
[experiment]
name = "sysbench-cost"
design = "sequential"
duration = "{duration}s"
warmup = "{warmup}s"
repeats = {rounds}

[dataset]
tables = 4
table_size = {table_size}

[workload]
test = "oltp_read_write"
threads = [1, 4]
"""


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"duration": 4, "warmup": 1, "rounds": 1, "table_size": 5000}
    return {"duration": 20, "warmup": 5, "rounds": 3, "table_size": 100_000}


def measure(tool: str, body: str, tmp: Path) -> list[dict[str, Any]]:
    toml = tmp / f"{tool}.toml"
    toml.write_text(body, encoding="utf-8")
    C.cli("run", str(toml), "-o", str(tmp / tool))
    return [c for c in json.loads(C.cli("export", str(tmp / tool)))["cells"] if c["status"] == "ok"]


def figures(cells: list[dict[str, Any]]) -> dict[str, Any]:
    client = [c["client"]["cpu_us_per_txn"] for c in cells]
    server = [c["resources"]["server_cpu_us_per_txn"] for c in cells]
    share = [a / (a + b) for a, b in zip(client, server, strict=True)]
    return {
        "cells": len(cells),
        "tps": C.mean([c["summary"]["tps"] for c in cells]),
        "client_us": client,
        "server_us": server,
        "client_share": C.mean(share),
    }


def run(args: argparse.Namespace) -> None:
    cfg = settings(args.quick)
    order = ["go-tpc", "sysbench"]
    random.Random(args.seed).shuffle(order)
    bodies = {"go-tpc": GOTPC.format(**cfg), "sysbench": SYSBENCH.format(**cfg)}
    cells: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="plbench-gotpc-") as tmp:
        for tool in order:
            C.say(f"measuring {tool} ...")
            cells[tool] = measure(tool, bodies[tool], Path(tmp))
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for tool, found in cells.items():
        for cell in found:
            groups[(tool, cell["threads"])].append(cell)
    out = {f"{tool}/t{threads}": figures(found) for (tool, threads), found in sorted(groups.items())}
    rows = []
    for key, f in out.items():
        rows.append(
            [
                key,
                f["cells"],
                f"{f['tps']:,.0f}",
                f"{C.mean(f['client_us']):.0f}",
                f"{min(f['client_us']):.0f}-{max(f['client_us']):.0f}",
                f"{C.mean(f['server_us']):.0f}",
                C.pct(f["client_share"], 1),
            ]
        )
    C.say(f"order: {', '.join(order)} (seed {args.seed})")
    C.say(C.table(["tool/threads", "cells", "TPS", "client us/txn", "min-max", "server us/txn", "client share"], rows))
    for threads in (1, 4):
        a, b = out.get(f"go-tpc/t{threads}"), out.get(f"sysbench/t{threads}")
        if a and b:
            ratio = a["client_share"] / b["client_share"]
            out[f"share_ratio/t{threads}"] = ratio
            C.say(f"threads {threads}: go-tpc's client share over sysbench's: {ratio:.2f}")
    every = [c for found in cells.values() for c in found]
    C.say(f"other_cpu_cores: {C.other_cpu_cores(every)}")
    if args.quick:
        C.say("(quick mode: short windows, one round; a smoke test, not the figures to quote)")
    C.final_json({"bench": "gotpc_cost", "quick": args.quick, "settings": cfg, "order": order, "groups": out})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: one round of 4 s windows")
    parser.add_argument("--seed", type=int, default=35)
    args = parser.parse_args()
    C.main_guard(lambda: run(args))


if __name__ == "__main__":
    main()
