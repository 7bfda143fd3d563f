"""What running a host axis's hosts at once buys (issue 36, docs/hosts.md "A host axis"), on real SSH
hosts in network namespaces of this machine (tests/integration/sshhosts.py).

Two server hosts, each with a client host of its own (db1+load1, db2+load2, each pair wired together):
the same experiment (oltp_point_select, 1 thread, 2 labels a round on each host) run with its hosts at
once (the default: meta host_schedule concurrent) and one at a time (concurrent_hosts = false), in
alternating order, R runs each. Printed: each mode's wall time per run and their ratio with its 95%
CI, whether each round's cells overlapped, and the cells' QPS in each mode.

All four "hosts" are namespaces of this 2-CPU machine: at once, the two servers and two clients share
its CPUs, so QPS drops there and the wall-time ratio counts only what the lanes overlap (restores,
starts, warm-ups, waits, the run's own steps). On separate machines the windows overlap too, and the
ratio tends to 1/hosts; the QPS of each host is then its own.
Run (root, idle machine, under the measurement lock):
     flock /work/measure.lock python3 bench/host_lanes.py           # ~8 minutes
     flock /work/measure.lock python3 bench/host_lanes.py --quick   # smoke test: ~3 minutes
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's perflab, and tests/integration

import _common as C

from tests.integration.sshhosts import SshLab, perflab_via, ssh_hosts, wire

EXPERIMENT = """
[experiment]
name = "host-lanes"
duration = "{duration}s"
warmup = "1s"
repeats = {repeats}
{concurrent}
[hosts.db1]
ssh = "{db1}"
[hosts.db2]
ssh = "{db2}"
[hosts.load1]
ssh = "{load1}"
[hosts.load2]
ssh = "{load2}"

[dataset]
tables = 1
table_size = 10000

[workload]
test = "oltp_point_select"
threads = [1]

[variants.host]
a = {{ server_host = "db1", client_host = "load1" }}
b = {{ server_host = "db2", client_host = "load2" }}

[variants.log]
OFF = {{}}
ON = {{ server_options = {{ general_log = "ON" }} }}
"""
NAMES = ["db1", "db2", "load1", "load2"]


def settings(quick: bool) -> dict[str, Any]:
    return {"runs": 2 if quick else 4, "repeats": 1 if quick else 2, "duration": 2 if quick else 4}


def one_run(lab: SshLab, tmp: Path, cfg: dict[str, Any], concurrent: bool, index: int) -> dict[str, Any]:
    body = EXPERIMENT.format(
        duration=cfg["duration"],
        repeats=cfg["repeats"],
        concurrent="" if concurrent else "concurrent_hosts = false",
        **{name: lab.hosts[name].ssh for name in NAMES},
    )
    spec = tmp / f"lanes-{index}.toml"
    spec.write_text(body, encoding="utf-8")
    out = tmp / f"results-{index}"
    shm = tmp / "shm"
    shm.mkdir(exist_ok=True)
    started = time.monotonic()
    done = perflab_via(lab, shm, "run", str(spec), "-o", str(out), "--history", "off")
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise C.BenchError(f"perflab run failed ({done.returncode}): {done.stderr[-2000:]}")
    doc = json.loads(perflab_via(lab, tmp, "export", str(out), "--format", "json").stdout)
    cells = doc["cells"]
    if any(c["status"] != "ok" for c in cells):
        raise C.BenchError(f"a cell failed: {[c.get('error') for c in cells if c['status'] != 'ok']}")
    overlapped = []  # per round: did the hosts' blocks (each host's cells of the round) overlap in time?
    for repeat in sorted({c["repeat"] for c in cells}):
        blocks: dict[str, list[dt.datetime]] = {}
        for c in cells:
            if c["repeat"] == repeat:
                times = [dt.datetime.fromisoformat(c["started_at"]), dt.datetime.fromisoformat(c["ended_at"])]
                blocks.setdefault(c["build"]["host"]["name"], []).extend(times)
        overlapped.append(max(min(t) for t in blocks.values()) < min(max(t) for t in blocks.values()))
    return {
        "concurrent": concurrent,
        "wall_s": round(wall, 2),
        "schedule": doc["host_schedule"]["concurrent"],
        "rounds_overlapped": sum(overlapped),
        "rounds": len(overlapped),
        "qps": C.rnd(C.mean([c["summary"]["qps"] for c in cells]), 1),
        "other_cpu_cores": C.other_cpu_cores(cells),
    }


def ratio_ci(at_once: list[float], in_turn: list[float]) -> tuple[float, tuple[float, float] | None]:
    """The ratio of mean wall times (at once / in turn), with a 95% CI from the log ratios' spread."""
    logs = [math.log(a / b) for a, b in zip(at_once, in_turn, strict=True)]  # paired by alternation
    ci = C.ci95(logs)
    ratio = C.mean(at_once) / C.mean(in_turn)
    return ratio, ((math.exp(ci[0]), math.exp(ci[1])) if ci else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: 2 runs a mode, 1 round, 2 s windows")
    args = parser.parse_args()
    cfg = settings(args.quick)
    if os.geteuid() != 0:
        raise SystemExit("error: root is needed (network namespaces, sshd)")

    def run() -> None:
        with tempfile.TemporaryDirectory(prefix="plbench-lanes-") as tmp, ssh_hosts(Path(tmp), NAMES) as lab:
            wire(lab, "load1", "db1")
            wire(lab, "load2", "db2")
            rows = []
            for i in range(cfg["runs"]):
                for concurrent in (True, False) if i % 2 == 0 else (False, True):  # alternating order
                    rows.append(one_run(lab, Path(tmp), cfg, concurrent, len(rows)))
                    C.say(f"run {len(rows)}: {'at once' if concurrent else 'in turn'} {rows[-1]['wall_s']} s")
        at_once = [r["wall_s"] for r in rows if r["concurrent"]]
        in_turn = [r["wall_s"] for r in rows if not r["concurrent"]]
        ratio, ci = ratio_ci(at_once, in_turn)
        C.say(
            C.table(
                ["mode", "runs", "wall s (mean)", "rounds overlapped", "QPS a cell (mean)", "other_cpu_cores"],
                [
                    [
                        "at once" if mode else "in turn",
                        len(sel),
                        round(C.mean([r["wall_s"] for r in sel]), 1),
                        f"{sum(r['rounds_overlapped'] for r in sel)}/{sum(r['rounds'] for r in sel)}",
                        round(C.mean([r["qps"] for r in sel]), 0),
                        max((r["other_cpu_cores"]["max"] or 0) for r in sel),
                    ]
                    for mode in (True, False)
                    for sel in [[r for r in rows if r["concurrent"] is mode]]
                ],
            )
        )
        shown = f"[{ci[0]:.3f}-{ci[1]:.3f}]" if ci else "(no CI: too few runs)"
        C.say(f"wall time, hosts at once / one at a time: {ratio:.3f} {shown} (ideal on separate machines: 0.5)")
        C.final_json({"ratio": round(ratio, 4), "ci95": ci, "runs": rows, "settings": cfg})

    C.main_guard(run)


if __name__ == "__main__":
    main()
