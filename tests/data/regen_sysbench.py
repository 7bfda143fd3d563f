#!/usr/bin/env python3
"""Re-record the sysbench outputs in tests/data/sysbench/ and their expected parse results.

    python3 tests/data/regen_sysbench.py              # start a server, record, write JSON
    python3 tests/data/regen_sysbench.py --json-only  # re-parse the existing recordings

Recording starts one mariadbd through perflab's own classes (install_datadir, MariaDB,
proc) on a throw-away datadir under /dev/shm, prepares a tiny dataset (1 table x 1000
rows), runs sysbench the way the scheduler does (perflab's sysbench.argv, stdout and
stderr into one stream) and kills the server and removes the datadir at the end, even on
failure or Ctrl-C.

Each recording NAME.txt gets NAME.json next to it: how it was recorded ("recorded_with":
test, threads, time, options, exit code) and what perflab's parsers return for it. The
JSON is produced by the parsers themselves, so after regenerating, read the diff against
the .txt before committing: the unit tests also check facts that do not depend on them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "sysbench"
sys.path.insert(0, str(HERE.parent.parent))  # the perflab checkout this file belongs to

from perflab.places.proc import clean_env, guarded  # noqa: E402
from perflab.workloads import sysbench, sysbench_output  # noqa: E402
from perflab.servers.mariadb.datadir import install_datadir  # noqa: E402
from perflab.servers.mysqld import Mysqld  # noqa: E402

TABLES, TABLE_SIZE = 1, 1000
ORDER_BY_ONLY = {
    "range_size": 100,
    "point_selects": 0,
    "simple_ranges": 0,
    "sum_ranges": 0,
    "distinct_ranges": 0,
    "order_ranges": 1,
}

# name -> (sysbench test, threads, seconds, checkpoint, workload options); every one is a `run`.
# The checkpoint run is what the scheduler does: warm-up, --report-checkpoints, measured window.
RUNS: dict[str, tuple[str, int, int, int | None, dict[str, Any]]] = {
    "oltp_read_only_t2": ("oltp_read_only", 2, 3, None, {}),
    "order_by_only_t2": ("oltp_read_only", 2, 2, None, ORDER_BY_ONLY),
    "oltp_read_only_t2_checkpoint": ("oltp_read_only", 2, 4, 2, {}),
}
# recorded against a socket nobody listens on: sysbench fails to connect
FAILED_RUN = "failed_wrong_socket"
HELP = {"help_general": ["--help"], "help_oltp_read_only": ["oltp_read_only", "help"]}


def run_sysbench(argv: list[str]) -> tuple[int, str]:
    """Run like the scheduler does: stdout and stderr interleaved in one stream."""
    done = subprocess.run(
        guarded(argv),
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        check=False,
        start_new_session=True,
    )
    return done.returncode, done.stdout


def record(workdir: Path) -> dict[str, dict[str, Any]]:
    """Write every NAME.txt; return NAME -> recorded_with."""
    meta: dict[str, dict[str, Any]] = {}
    datadir = workdir / "data"
    install_datadir(datadir)
    with Mysqld(workdir / "run", datadir, {}) as server:
        server.sql("CREATE DATABASE IF NOT EXISTS sbtest")
        code, text = run_sysbench(
            sysbench.argv(
                "oltp_read_only", "prepare", socket=server.socket, tables=TABLES, table_size=TABLE_SIZE, threads=1
            )
        )
        if code != 0:
            raise SystemExit(f"sysbench prepare failed ({code}):\n{text}")
        for name, (test, threads, seconds, checkpoint, options) in RUNS.items():
            argv = sysbench.argv(
                test,
                "run",
                socket=server.socket,
                tables=TABLES,
                table_size=TABLE_SIZE,
                threads=threads,
                seconds=seconds,
                checkpoint=checkpoint,
                options=options,
            )
            code, text = run_sysbench(argv)
            if code != 0:
                raise SystemExit(f"{name}: sysbench exited {code}:\n{text}")
            (OUT / f"{name}.txt").write_text(text, encoding="utf-8")
            meta[name] = {
                "test": test,
                "threads": threads,
                "time": seconds,
                "checkpoint": checkpoint,
                "options": options,
                "exit_code": code,
            }
        server.stop(clean=True)
    # the server is gone: its socket path now refuses connections
    argv = sysbench.argv(
        "oltp_read_only",
        "run",
        socket=workdir / "no-such.sock",
        tables=TABLES,
        table_size=TABLE_SIZE,
        threads=2,
        seconds=2,
    )
    code, text = run_sysbench(argv)
    if code == 0:
        raise SystemExit(f"{FAILED_RUN}: sysbench unexpectedly succeeded:\n{text}")
    # the socket path is a random temp dir: keep the recording stable across regenerations
    text = text.replace(str(workdir), "/dev/shm/perflab-regen")
    (OUT / f"{FAILED_RUN}.txt").write_text(text, encoding="utf-8")
    meta[FAILED_RUN] = {
        "test": "oltp_read_only",
        "threads": 2,
        "time": 2,
        "checkpoint": None,
        "options": {},
        "exit_code": code,
    }
    for name, args in HELP.items():
        done = subprocess.run(
            [sysbench.sysbench_binary(), *args], capture_output=True, text=True, check=False, timeout=60
        )
        if done.returncode != 0:
            raise SystemExit(f"sysbench {' '.join(args)} exited {done.returncode}")
        (OUT / f"{name}.txt").write_text(done.stdout, encoding="utf-8")  # as known_options() reads it
        meta[name] = {"args": args, "exit_code": done.returncode}
    return meta


def expected(name: str, text: str) -> dict[str, Any]:
    if name in HELP:
        return {"options": sysbench.parse_options_help(text)}
    summary = sysbench_output.parse_summary(text)
    return {
        "intervals": [dataclasses.asdict(iv) for iv in sysbench_output.parse_intervals(text)],
        "histogram": [list(row) for row in sysbench_output.parse_histogram(text)],
        "summary": summary.to_dict() if summary else None,
    }


def write_json(meta: dict[str, dict[str, Any]]) -> None:
    for name, recorded_with in meta.items():
        text = (OUT / f"{name}.txt").read_text(encoding="utf-8")
        doc = {"recorded_with": recorded_with, "sysbench": sysbench.version(), **expected(name, text)}
        (OUT / f"{name}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {OUT / name}.txt/.json")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json-only", action="store_true", help="re-parse the existing .txt files, record nothing")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    if args.json_only:
        meta = {p.stem: json.loads(p.read_text(encoding="utf-8"))["recorded_with"] for p in sorted(OUT.glob("*.json"))}
    else:
        workdir = Path(tempfile.mkdtemp(prefix="perflab-regen-", dir="/dev/shm"))
        try:
            meta = record(workdir)  # MariaDB's context manager kills the server on any exit
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    write_json(meta)


if __name__ == "__main__":
    main()
