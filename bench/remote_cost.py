"""What a client on another host costs (issue 36, docs/hosts.md), on real SSH hosts in network
namespaces of this machine (tests/integration/sshhosts.py: veth pairs, Debian's sshd per namespace).

What, in four parts:
  control   the SSH operations of a run and of a cell, each timed N times: connecting a host with its
            run directory, clock and fingerprint (once per run), an exec round trip, a cell's own
            operations (its config file, sysbench's start through the wrapper, two network counter
            reads, the stop), and the removal at the run's end
  clock     the clock reading N times. Both sides are this machine's clock, so the true offset is 0:
            |offset_s| is the real error, shown beside the bound error_s that perflab records
  qps       one experiment (oltp_point_select, 2 threads) run with its client local and with its client
            in a namespace (client_host), in alternating order, R runs each: QPS ratio and its 95% CI
            (the cost of the veth and of TCP against the socket), bytes per transaction, rtt_ms
  cpu       perflab's own CPU on each host over the remote runs: this machine's harness_cpu_s per
            second of window, and on the client host the CPU of its sshd processes (the SSH session
            that carries perflab's commands and sysbench's output), per second of run
  server    the same experiment with its server in the namespace (server_host, the client here)
            against a local server, alternating, R runs each of 1 and of 3 cells: QPS ratio and its
            95% CI, and the cost of remote control per cell: a cell's share of the run's wall time
            ((3 cells - 1 cell) / 2: restore, start, warm-up, window, stop, logs fetched back),
            remote minus local, in seconds

  long      (--long, alone: <= 10 minutes) perflab's own CPU on the host over two longer runs of
            8 cells (15 s windows), one with the server in the namespace (server_host, the client
            here), one with the client there (client_host): the run's meta hosts.load.perflab_cpu
            (its ssh session less the measured server or client, over the whole run), and per cell
            over its window (resources.perflab_host_cpu) and over the whole cell
            (resources.perflab_host_cpu_cell: restore, start, warm-up, window, stop, logs)

Goals: a cell's remote control < 0.1 s; |clock offset| < 1 ms with error_s bounding it;
perflab's CPU < 1% of a core on each host.
Run (root, idle machine, under the measurement lock):
     flock /work/measure.lock python3 bench/remote_cost.py           # ~20 minutes
     flock /work/measure.lock python3 bench/remote_cost.py --quick   # smoke test: ~4 minutes
     flock /work/measure.lock python3 bench/remote_cost.py --long    # perflab's CPU over a run: ~7 minutes
Exit status: 0 when it measured, 1 on a real error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's perflab, and tests/integration

import _common as C

from perflab.hosts import clock
from perflab.hosts.session import Hosts
from perflab.hosts.target import CONFIG_ENV, parse_target
from perflab.hosts.client import RemoteChild, RemoteClient
from tests.integration.sshhosts import SshLab, ssh_hosts

EXPERIMENT = """
[experiment]
name = "remote-cost"
duration = "{duration}s"
warmup = "{warmup}s"
repeats = {repeats}
{client}
[hosts.load]
ssh = "{ssh}"
[dataset]
tables = 2
table_size = {table_size}
[workload]
test = "oltp_point_select"
threads = [2]
[variants.client]
one = {{}}
"""


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {"n": 10, "runs": 2, "duration": 3, "warmup": 1, "table_size": 5000}
    return {"n": 50, "runs": 5, "duration": 15, "warmup": 3, "table_size": 100_000}


def timed(fn: Callable[[], Any], n: int) -> dict[str, Any]:
    seconds = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - started)
    return {"mean_s": C.rnd(C.mean(seconds), 5), "max_s": C.rnd(max(seconds), 5), "n": n}


def control(lab: SshLab, tmp: Path, n: int) -> dict[str, Any]:
    target = {"load": parse_target(lab.hosts["load"].ssh)}
    (tmp / "work").mkdir()
    out: dict[str, Any] = {}
    started = time.perf_counter()
    hosts = Hosts(target, tmp / "work").__enter__()
    out["run_open_s"] = C.rnd(time.perf_counter() - started, 4)  # connect, run dir, clock, fingerprint
    try:
        remote = RemoteClient.open(hosts, "load", {"sysbench": "sysbench"})
        out["exec_round_trip"] = timed(lambda: hosts.link("load").run(["true"]), n)

        def cell() -> None:
            remote.write_config({"mysql-host": remote.address, "mysql-password": "0" * 32}, 0)
            child = RemoteChild(remote.rundir, ["sleep", "30"], tmp / "out.txt")
            remote.net_bytes()
            remote.net_bytes()
            child.kill()

        out["cell_control"] = timed(cell, n)
        hosts.measure_end()
    finally:
        started = time.perf_counter()
        hosts.close()
        out["run_close_s"] = C.rnd(time.perf_counter() - started, 4)
    return out


def clock_error(lab: SshLab, tmp: Path, n: int) -> dict[str, Any]:
    (tmp / "clock").mkdir()
    with Hosts({"load": parse_target(lab.hosts["load"].ssh)}, tmp / "clock") as hosts:
        readings = [clock.measure(hosts.link("load")) for _ in range(n)]
    offsets = [abs(r.offset_s) for r in readings]
    return {
        "abs_offset_ms": {"mean": C.rnd(C.mean(offsets) * 1e3, 4), "max": C.rnd(max(offsets) * 1e3, 4)},
        "error_ms": {
            "mean": C.rnd(C.mean([r.error_s for r in readings]) * 1e3, 4),
            "max": C.rnd(max(r.error_s for r in readings) * 1e3, 4),
        },
        "bounded": sum(abs(r.offset_s) <= r.error_s for r in readings),
        "n": n,
    }


def _sshd_cpu_s(lab: SshLab) -> float:
    """CPU of the client host's sshd processes (the listener and every session), seconds."""
    total = 0.0
    for pid in lab.hosts["load"].pids():
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
                total += C.process_cpu_s(pid) or 0.0
        except OSError:
            continue
    return total


def one_run(
    lab: SshLab, cfg: dict[str, Any], tmp: Path, remote: bool, index: int, key: str = "client", repeats: int = 1
) -> dict[str, Any]:
    client = f'{key}_host = "load"' if remote else ""
    toml = tmp / f"run-{index}.toml"
    text = EXPERIMENT.format(client=client, ssh=lab.hosts["load"].ssh, repeats=repeats, **cfg)
    toml.write_text(text, encoding="utf-8")
    results = tmp / f"run-{index}"
    sshd_before, started = _sshd_cpu_s(lab), time.monotonic()
    C.cli("run", str(toml), "-o", str(results))
    wall, sshd = time.monotonic() - started, _sshd_cpu_s(lab) - sshd_before
    cells = json.loads(C.cli("export", str(results)))["cells"]
    if any(c["status"] != "ok" for c in cells):
        raise C.BenchError(f"run {index}: {[c['error'] for c in cells]}")
    cell = cells[0]
    window = cell["summary"]["total_time_s"]
    return {
        "remote": remote,
        "qps": cell["summary"]["qps"],
        "bytes_per_txn": (cell["client"] or {}).get("bytes_per_txn"),
        "rtt_ms": (cell["client"] or {}).get("rtt_ms"),
        "harness_cores": cell["resources"]["harness_cpu_s"] / window,
        "client_host_sshd_cores": sshd / wall if remote else None,
        "other_cpu_cores": cell["resources"].get("other_cpu_cores"),
        "wall_s": round(wall, 3),
        "cells": len(cells),
        "perflab_host_cores": ((cell["resources"].get("perflab_host_cpu") or {}).get("load") or {}).get("cores"),
    }


def qps(lab: SshLab, cfg: dict[str, Any], tmp: Path, key: str = "client") -> list[dict[str, Any]]:
    rows = []
    (tmp / key).mkdir(exist_ok=True)
    for i in range(cfg["runs"]):
        order = (False, True) if i % 2 == 0 else (True, False)  # alternate: a drift falls on both alike
        rows += [one_run(lab, cfg, tmp / key, remote, 2 * i + j, key) for j, remote in enumerate(order)]
    return rows


def served(lab: SshLab, cfg: dict[str, Any], tmp: Path) -> list[dict[str, Any]]:
    """Runs of 1 and of 3 cells with the server here and on the host, alternating."""
    rows = []
    (tmp / "server").mkdir(exist_ok=True)
    for i in range(cfg["runs"]):
        order = (False, True) if i % 2 == 0 else (True, False)
        for j, remote in enumerate(order):
            for k, repeats in enumerate((1, 3)):
                rows.append(one_run(lab, cfg, tmp / "server", remote, 4 * i + 2 * j + k, "server", repeats))
    return rows


def server_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A server on the host against a local one: QPS ratio, and the remote control's seconds per cell."""
    per_cell: dict[bool, list[float]] = {False: [], True: []}  # (3 cells - 1 cell) / 2, each pair of runs
    for one, three in zip(rows[::2], rows[1::2], strict=True):
        per_cell[one["remote"]].append((three["wall_s"] - one["wall_s"]) / 2)
    local, remote = [r for r in rows if not r["remote"]], [r for r in rows if r["remote"]]
    pairs = [r["qps"] / lq["qps"] for lq, r in zip(local, remote, strict=True)]
    extra = [r - lq for lq, r in zip(per_cell[False], per_cell[True], strict=True)]
    return {
        "qps_local": C.rnd(C.mean([r["qps"] for r in local]), 1),
        "qps_remote": C.rnd(C.mean([r["qps"] for r in remote]), 1),
        "ratio_remote_to_local": C.rnd(C.mean(pairs), 4),
        "ratio_ci95": C.ci95(pairs),
        "cell_overhead_local_s": C.rnd(C.mean(per_cell[False]), 3),
        "cell_overhead_remote_s": C.rnd(C.mean(per_cell[True]), 3),
        "remote_control_per_cell_s": C.rnd(C.mean(extra), 3),
        "remote_control_per_cell_ci95": C.ci95(extra),
        "perflab_host_cores_max": C.rnd(max(r["perflab_host_cores"] or 0 for r in remote), 4),
        "other_cpu_cores": C.other_cpu_cores([{"resources": {"other_cpu_cores": r["other_cpu_cores"]}} for r in rows]),
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    local = [r["qps"] for r in rows if not r["remote"]]
    remote = [r["qps"] for r in rows if r["remote"]]
    pairs = [rq / lq for lq, rq in zip(local, remote, strict=True)]
    return {
        "qps_local": C.rnd(C.mean(local), 1),
        "qps_remote": C.rnd(C.mean(remote), 1),
        "ratio_remote_to_local": C.rnd(C.mean(pairs), 4),
        "ratio_ci95": C.ci95(pairs),
        "bytes_per_txn": C.rnd(C.mean([r["bytes_per_txn"] for r in rows if r["remote"]]), 1),
        "rtt_ms": C.rnd(C.mean([r["rtt_ms"] for r in rows if r["remote"]]), 4),
        "harness_cores_max": C.rnd(max(r["harness_cores"] for r in rows), 4),
        "client_host_sshd_cores_max": C.rnd(max(r["client_host_sshd_cores"] for r in rows if r["remote"]), 4),
        "other_cpu_cores": C.other_cpu_cores([{"resources": {"other_cpu_cores": r["other_cpu_cores"]}} for r in rows]),
    }


def report(cfg: dict[str, Any], found: dict[str, Any], quick: bool) -> None:
    ctl, clk, q = found["control"], found["clock"], found["qps"]
    C.say(C.table(["remote control", "seconds"], [
        ["open a host for a run (connect, run dir, clock, fingerprint)", ctl["run_open_s"]],
        ["exec round trip (mean / max)", f"{ctl['exec_round_trip']['mean_s']} / {ctl['exec_round_trip']['max_s']}"],
        ["a cell's own operations (mean / max)", f"{ctl['cell_control']['mean_s']} / {ctl['cell_control']['max_s']}"],
        ["remove the host's run dir at the end", ctl["run_close_s"]],
    ]))  # fmt: skip
    C.say(f"clock: |offset| mean {clk['abs_offset_ms']['mean']} ms, max {clk['abs_offset_ms']['max']} ms; "
          f"error_s mean {clk['error_ms']['mean']} ms; offset within error_s in {clk['bounded']}/{clk['n']}")  # fmt: skip
    C.say(
        f"QPS: local {q['qps_local']:,.0f}, client in a namespace {q['qps_remote']:,.0f}, ratio "
        f"{q['ratio_remote_to_local']} CI {q['ratio_ci95']}; {q['bytes_per_txn']} bytes/txn, rtt {q['rtt_ms']} ms"
    )
    C.say(
        f"perflab's CPU: this machine {C.pct(q['harness_cores_max'])} of a core (max), client host's sshd "
        f"{C.pct(q['client_host_sshd_cores_max'])}; other_cpu_cores {q['other_cpu_cores']}"
    )
    srv = found["server"]
    C.say(
        f"server in a namespace (server_host, client here): QPS local {srv['qps_local']:,.0f}, there "
        f"{srv['qps_remote']:,.0f}, ratio {srv['ratio_remote_to_local']} CI {srv['ratio_ci95']}; a cell's share "
        f"of the run {srv['cell_overhead_local_s']} s here, {srv['cell_overhead_remote_s']} s there: remote control "
        f"{srv['remote_control_per_cell_s']} s per cell CI {srv['remote_control_per_cell_ci95']}; "
        f"perflab's CPU there {C.pct(srv['perflab_host_cores_max'])} of a core (max); other_cpu_cores {srv['other_cpu_cores']}"
    )
    if quick:
        C.say("(quick mode: short windows, few runs; a smoke test, not the figures to quote)")
    C.final_json({"bench": "remote_cost", "quick": quick, "settings": cfg, **found})


def long_run(lab: SshLab, cfg: dict[str, Any], tmp: Path, key: str) -> dict[str, Any]:
    """One run of `cfg["long_cells"]` cells with the server (key "server") or the client ("client") on the
    host: perflab's own CPU there over the run, over each cell and over each window."""
    (tmp / "long").mkdir(exist_ok=True)
    text = EXPERIMENT.format(client=f'{key}_host = "load"', ssh=lab.hosts["load"].ssh, repeats=cfg["long_cells"], **cfg)
    toml = tmp / "long" / f"{key}.toml"
    toml.write_text(text, encoding="utf-8")
    results = tmp / "long" / key
    started = time.monotonic()
    C.cli("run", str(toml), "-o", str(results))
    wall = time.monotonic() - started
    exported = json.loads(C.cli("export", str(results)))
    cells = exported["cells"]
    if any(c["status"] != "ok" for c in cells):
        raise C.BenchError(f"long run ({key}): {[c['error'] for c in cells]}")
    run = exported["hosts"]["hosts"]["load"]["perflab_cpu"]
    window = [c["resources"]["perflab_host_cpu"]["load"] for c in cells]
    whole = [c["resources"]["perflab_host_cpu_cell"]["load"] for c in cells]
    outside = [c["cpu_s"] - w["cpu_s"] for c, w in zip(whole, window, strict=True)]
    return {
        "where": key,
        "cells": len(cells),
        "wall_s": round(wall, 1),
        "run": run,  # meta hosts.load.perflab_cpu
        "window_cores_mean": C.rnd(C.mean([w["cores"] for w in window]), 5),
        "window_cores_max": C.rnd(max(w["cores"] for w in window), 5),
        "window_cpu_s_mean": C.rnd(C.mean([w["cpu_s"] for w in window]), 3),
        "cell_cpu_s_mean": C.rnd(C.mean([c["cpu_s"] for c in whole]), 3),
        "cell_wall_s_mean": C.rnd(C.mean([c["wall_s"] for c in whole]), 2),
        "cell_cores_mean": C.rnd(C.mean([c["cores"] for c in whole]), 5),
        "outside_window_cpu_s_mean": C.rnd(C.mean(outside), 3),
        "measured_cpu_s": run["measured_cpu_s"],
        "qps_mean": C.rnd(C.mean([c["summary"]["qps"] for c in cells]), 1),
        "other_cpu_cores": C.other_cpu_cores(cells),
    }


def long_report(found: list[dict[str, Any]], quick: bool) -> None:
    rows = []
    for r in found:
        run = r["run"]
        rows.append([
            f"{r['where']} on the host ({r['cells']} cells, {r['wall_s']:.0f} s)",
            f"{run['cpu_s']} s = {C.pct(run['cores'])} ({run['measured_cpu_s']} s measured)",
            f"{r['cell_cpu_s_mean']} s = {C.pct(r['cell_cores_mean'])}",
            f"{r['window_cpu_s_mean']} s = {C.pct(r['window_cores_mean'])} (max {C.pct(r['window_cores_max'])})",
            f"{r['outside_window_cpu_s_mean']} s",
            f"{r['other_cpu_cores']['mean']} / {r['other_cpu_cores']['max']}",
        ])  # fmt: skip
    headers = ["run", "over the run", "per cell", "per window", "outside the window", "other_cpu_cores"]
    C.say(C.table(headers, rows))
    if quick:
        C.say("(quick mode: short windows, few cells; a smoke test, not the figures to quote)")
    C.final_json({"bench": "remote_cost", "part": "long", "quick": quick, "long": found})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: few samples, 3 s windows")
    parser.add_argument("--long", action="store_true", help="only perflab's own CPU on the host over longer runs")
    args = parser.parse_args()
    cfg = settings(args.quick) | {"long_cells": 2 if args.quick else 8}
    if os.geteuid() != 0:
        raise SystemExit("error: root is needed (network namespaces, sshd)")

    def run() -> None:
        with tempfile.TemporaryDirectory(prefix="plbench-remote-") as tmp, ssh_hosts(Path(tmp), ["load"]) as lab:
            os.environ[CONFIG_ENV] = str(lab.config)  # this process and the perflab runs it starts
            if args.long:
                long_report([long_run(lab, cfg, Path(tmp), key) for key in ("server", "client")], args.quick)
                return
            found = {"control": control(lab, Path(tmp), cfg["n"]), "clock": clock_error(lab, Path(tmp), cfg["n"])}
            rows = qps(lab, cfg, Path(tmp))
            found["qps"], found["runs"] = summary(rows), rows
            server_rows = served(lab, cfg, Path(tmp))
            found["server"], found["server_runs"] = server_summary(server_rows), server_rows
        report(cfg, found, args.quick)

    C.main_guard(run)


if __name__ == "__main__":
    main()
