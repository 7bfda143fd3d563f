#!/usr/bin/env python3
"""Re-record the profiler outputs in tests/data/profiles/ and their expected results.

    python3 tests/data/regen_profiles.py              # start a server, record, write expected.json
    python3 tests/data/regen_profiles.py --json-only  # recompute expected.json from the recordings

Recording starts one mariadbd through perflab's own classes on a throw-away datadir under
/dev/shm (2 tables x 5000 rows) and, against it:
  - `perf script -F tid,ip,sym,dso --pid PID` text of perf recordings made by PerfRecorder
    (99 Hz, fp) over 3 s of sysbench, twice for ORDER BY-only and twice for DISTINCT-only
    range queries (perf_<variant>_r<N>.txt.gz, with the transactions in recordings.json);
  - one `eu-stack -m -p PID` output under load with the server's /proc/PID/maps;
  - 1 s of the resident sampler's output (pmp_sampler.txt) at 0.2 s;
  - function_starts.json: for every binary an unnamed address falls in, the start of the
    function containing it (from .eh_frame_hdr), so the tests do not depend on the
    mariadbd installed where they run.
The server is killed and the datadir removed at the end, even on failure or Ctrl-C.

expected.json is produced by perflab's own code (folding, parsing, diff): after
regenerating, read its diff before committing; the unit tests also check facts that do not
depend on it (kernel marks, no bare addresses, the hash function leading the diff).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "profiles"
sys.path.insert(0, str(HERE.parent.parent))  # the perflab checkout this file belongs to

from perflab.observers.elf import FunctionStarts  # noqa: E402
from perflab.observers.perf import PerfRecorder  # noqa: E402
from perflab.places.proc import Child, clean_env, guarded  # noqa: E402
from perflab.workloads import sysbench, sysbench_output  # noqa: E402
from perflab.servers.mariadb.datadir import install_datadir  # noqa: E402
from perflab.servers.mysqld import Mysqld  # noqa: E402

TABLES, TABLE_SIZE, SECONDS, THREADS = 2, 5000, 3, 2
BASE = {
    "range_size": 1000,
    "point_selects": 0,
    "simple_ranges": 0,
    "sum_ranges": 0,
    "distinct_ranges": 0,
    "order_ranges": 0,
    "rand_type": "uniform",
}
VARIANTS = {"order": {"order_ranges": 1}, "distinct": {"distinct_ranges": 1}}
REPEATS = 2


def sysbench_run(server: Mysqld, options: dict[str, Any], seconds: int, out: Path) -> Child:
    argv = sysbench.argv(
        "oltp_read_only",
        "run",
        socket=server.socket,
        tables=TABLES,
        table_size=TABLE_SIZE,
        threads=THREADS,
        seconds=seconds,
        options=options,
    )
    with out.open("w", encoding="utf-8") as sink:
        return Child(argv, env=clean_env(), stdout=sink)


def record(workdir: Path) -> dict[str, Any]:
    meta: dict[str, Any] = {"perf": {}}
    datadir = workdir / "data"
    install_datadir(datadir)
    with Mysqld(workdir / "run", datadir, {"innodb_buffer_pool_size": "256M"}) as server:
        server.sql("CREATE DATABASE IF NOT EXISTS sbtest")
        subprocess.run(
            guarded(
                sysbench.argv(
                    "oltp_read_only", "prepare", socket=server.socket, tables=TABLES, table_size=TABLE_SIZE, threads=1
                )
            ),
            env=clean_env(),
            check=True,
            capture_output=True,
            timeout=300,
        )
        for repeat in range(1, REPEATS + 1):
            for name, options in VARIANTS.items():
                log = workdir / "sysbench.txt"
                with sysbench_run(server, {**BASE, **options}, SECONDS, log) as child:
                    time.sleep(0.5)  # connections made, as in a cell's window after warm-up
                    with PerfRecorder(server.pid, workdir, frequency=99) as rec:
                        child.wait(SECONDS + 60)
                text = subprocess.run(
                    guarded(rec.script_argv()), capture_output=True, text=True, check=True, timeout=300
                ).stdout
                key = f"perf_{name}_r{repeat}"
                with gzip.open(OUT / f"{key}.txt.gz", "wt", encoding="utf-8") as f:
                    f.write(text)
                summary = sysbench_output.parse_summary(log.read_text(encoding="utf-8"))
                assert summary is not None, log.read_text()
                meta["perf"][key] = {
                    "variant": name,
                    "repeat": repeat,
                    "frequency_hz": 99,
                    "seconds": rec.seconds,
                    "window_s": SECONDS,
                    "transactions": summary.transactions,
                }
        with sysbench_run(server, {**BASE, "distinct_ranges": 1}, 4, workdir / "sb2.txt") as child:
            time.sleep(1)
            maps = Path(f"/proc/{server.pid}/maps").read_text(encoding="utf-8")
            eu = subprocess.run(
                guarded(["eu-stack", "-m", "-p", str(server.pid)]),
                capture_output=True,
                text=True,
                check=False,
                timeout=60,
            )
            sampler = OUT / "pmp_sampler.txt"
            proc = Child(
                [sys.executable, "-m", "perflab.observers.pmp_sampler", str(server.pid), "0.2", str(sampler)],
                cwd=HERE.parent.parent,
            )
            with proc:
                time.sleep(1.0)
                proc.terminate(grace=10)
            child.wait(60)
        (OUT / "eu_stack.txt").write_text(eu.stdout, encoding="utf-8")
        (OUT / "maps.txt").write_text(maps, encoding="utf-8")
    meta["function_starts"] = function_starts(maps)
    return meta


def function_starts(maps: str) -> dict[str, list[int]]:
    """For each unnamed address of the recordings, its function's start (by binary path)."""
    from perflab.observers.pmp import ModuleMap  # noqa: PLC0415

    wanted: dict[str, set[int]] = {}
    for path in sorted(OUT.glob("perf_*.txt.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                m = re.match(r"\s+([0-9a-f]+) \[unknown\] \((/[^)]+)\)$", line)
                if m:
                    wanted.setdefault(m.group(2), set()).add(int(m.group(1), 16))
    bases = ModuleMap(maps).bases
    for line in (OUT / "eu_stack.txt").read_text(encoding="utf-8").splitlines():
        m = re.match(r"#\d+\s+0x([0-9a-f]+) - (/\S+)$", line)
        if m and m.group(2) in bases:
            wanted.setdefault(m.group(2), set()).add(int(m.group(1), 16) - bases[m.group(2)])
    out = {}
    for path, addrs in sorted(wanted.items()):
        starts = FunctionStarts.load(path)
        out[path] = sorted({s for a in addrs if (s := starts.start_of(a)) is not None})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json-only", action="store_true", help="recompute expected.json, record nothing")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    if not args.json_only:
        workdir = Path(tempfile.mkdtemp(prefix="perflab-regen-", dir="/dev/shm"))
        try:
            meta = record(workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        (OUT / "recordings.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    sys.path.insert(0, str(HERE.parent))
    from unit.profile_golden import expected  # noqa: PLC0415 - the tests' own computation

    (OUT / "expected.json").write_text(json.dumps(expected(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
