"""Why the calibrated shim's measured slowdown is below its nominal cost: which CPU bounds the pace.

What: kept results directories of bench/fidelity.py runs (`none` and `slowN` variants of the
calibrated shim, tests/data/calibrated/). For every slow variant, its measured effect (1 - the
paired B/A ratio over the run's rounds, with its 95% interval) against two nominal effects of
the same burn (the variant's extra server CPU per transaction; `fidelity.nominal()`):
  - server-bound: 1 - server / (server + burn), as if the server's CPU alone set the pace;
  - machine-bound: 1 - (server + client) / (server + client + burn), the client sharing the
    two vCPUs, which the workload keeps busy (the cores the pair used are printed: ~2 means the
    machine is the bound).
Pooled: each model's mean and mean absolute difference from the measured effects, and how many
measured intervals hold it. Analysis only: no measurement, no server is started.

Run: python3 bench/archive/shim_nominal.py --runs DIR [DIR...]
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: _common and the scripts imported below
import _common as C
import fidelity as F


def cores(cells: list[dict[str, Any]], name: str) -> float | None:
    """Server plus client CPU per second of the window: 2.0 is both vCPUs busy."""
    used = []
    for c in F.of(cells, name):
        cpu = (F.server_cpu(c), F.client_cpu(c))
        tps = (c.get("summary") or {}).get("tps")
        if c["status"] == "ok" and None not in cpu and tps:
            used.append((cpu[0] + cpu[1]) * tps / 1e6)
    return C.mean(used) if used else None


def analyse_run(path: Path) -> list[dict[str, Any]]:
    cells = json.loads(C.cli("export", str(path)))["cells"]
    qps = F.by_round(cells)
    rows = []
    for name in sorted((n for n in qps if n.startswith("slow")), key=lambda n: int(n[4:])):
        full = F.full_run(qps[F.BASE], qps[name])
        machine, server = F.nominal(cells, name, int(name[4:]))
        if full["paired"] is None or machine is None or server is None:
            continue
        low, high = 1 - full["paired"][1], 1 - full["paired"][0]  # the effect's interval
        rows.append(
            {
                "run": path.name,
                "variant": name,
                "rounds": full["rounds"],
                "measured": C.rnd(1 - full["ratio"]),
                "measured_ci": [C.rnd(low), C.rnd(high)],
                "machine": C.rnd(machine),
                "server": C.rnd(server),
                "machine_inside": low <= machine <= high,
                "server_inside": low <= server <= high,
                "cores": C.rnd(cores(cells, name), 2),
                "other_cpu_cores": C.other_cpu_cores(F.of(cells, name)),
            }
        )
    return rows


def pooled(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"variants": len(rows)}
    for model in ("machine", "server"):
        diffs = [r["measured"] - r[model] for r in rows]
        out[model] = {
            "mean_difference": C.rnd(C.mean(diffs)),
            "mean_abs_difference": C.rnd(C.mean([abs(d) for d in diffs])),
            "overstates": sum(d < 0 for d in diffs),
            "inside_ci": sum(r[f"{model}_inside"] for r in rows),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", required=True, metavar="DIR", help="kept bench/fidelity.py results")
    args = parser.parse_args()
    rows = [row for run in args.runs for row in analyse_run(Path(run))]
    if not rows:
        raise C.BenchError("no slow variant with a paired interval in these runs")
    C.say(
        C.table(
            [
                "run",
                "variant",
                "rounds",
                "measured [95%]",
                "machine-bound",
                "server-bound",
                "cores used",
                "other cores",
            ],
            [
                [
                    r["run"],
                    r["variant"],
                    r["rounds"],
                    f"{C.pct(r['measured'], 1)} [{C.pct(r['measured_ci'][0], 1)}, {C.pct(r['measured_ci'][1], 1)}]",
                    C.pct(r["machine"], 1) + ("" if r["machine_inside"] else " (outside)"),
                    C.pct(r["server"], 1) + ("" if r["server_inside"] else " (outside)"),
                    r["cores"],
                    r["other_cpu_cores"]["mean"],
                ]
                for r in rows
            ],
        )
    )
    total = pooled(rows)
    for model in ("machine", "server"):
        p = total[model]
        C.say(
            f"{model}-bound: measured minus nominal {C.pct(p['mean_difference'], 2)} on average "
            f"(absolute {C.pct(p['mean_abs_difference'], 2)}); above the measured effect in {p['overstates']} "
            f"of {total['variants']}; inside its 95% interval in {p['inside_ci']} of {total['variants']}"
        )
    C.final_json({"runs": rows, "pooled": total})


if __name__ == "__main__":
    C.main_guard(main)
