"""Servers from other Debian suites (issue 34): their start time, MySQL's restart-to-restart noise
against MariaDB's, and the cost of a private root itself (docs/builds.md, "Measured here").

Three perflab runs, as a user runs them, each on this checkout:
  1. sequential, --repeats R: MySQL 9.7 (sid), MariaDB 11.8 (sid) and the installed MariaDB 10.11,
     oltp_read_only at 2 threads, each cell a fresh server on a fresh copy of its dataset. Per
     server: the start time (resources.server_start_s: spawned to accepting connections) and the
     CV of QPS across its cells (the restart-to-restart noise), with a 95% interval on the CV.
  2. interleaved, --rounds R: the installed mariadbd through the system's loader ({}) against
     the same binary through a private root of bookworm's own libc6 ({ glibc = "bookworm" }: the
     same C library version, only the loader and the library path differ): the ratio with
     perflab's own interval is the cost of running from a root. sid's C library rides along.
  3. sequential, --repeats R: PostgreSQL 15 (installed) and 18 (sid): start times.
other_cpu_cores (mean and max over each run's cells) is printed with every figure: a busy
machine's figures are not this machine's.

Run: python3 bench/suite_servers.py [--repeats 6] [--rounds 8] [--duration 10s]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import _common as C

EXPERIMENT = """
[experiment]
name = "{name}"
design = "{design}"
warmup = "3s"
duration = "{duration}"
repeats = {repeats}
{server}

[dataset]
tables = 2
table_size = 20000

[workload]
test = "oltp_read_only"
threads = [2]
"""

MYSQL_MARIADB = """
[builds.mysql97]
package = "mysql-server-core"
suite = "sid"
[builds.m118]
package = "mariadb-server-core"
suite = "sid"
[variants.server]
mysql97 = { build = "mysql97" }
mariadb1011 = {}
mariadb118 = { build = "m118" }
"""

ROOT_COST = """
[variants.libc]
system = {}
bookworm_root = { glibc = "bookworm" }
sid = { glibc = "sid" }
"""

POSTGRESQL = """
[builds.pg18]
package = "postgresql-18"
suite = "sid"
[variants.server]
pg15 = {}
pg18 = { build = "pg18" }
"""


def run(work: Path, name: str, design: str, body: str, duration: str, repeats: int, server: str = "") -> dict:
    text = EXPERIMENT.format(name=name, design=design, duration=duration, repeats=repeats, server=server) + body
    spec = work / f"{name}.toml"
    spec.write_text(text, encoding="utf-8")
    C.say(f"running {name} ({design}) ...")
    C.cli("run", str(spec), "-o", str(work / name))
    return json.loads(C.cli("export", str(work / name)))


def cv_interval(values: list[float]) -> tuple[float, float] | None:
    """95% interval of a CV from the chi-square interval of the variance (normal data)."""
    from scipy.stats import chi2

    n, cv = len(values), C.cv(values)
    if cv is None or n < 3:
        return None
    df = n - 1
    return cv * math.sqrt(df / chi2.ppf(0.975, df)), cv * math.sqrt(df / chi2.ppf(0.025, df))


def per_server(doc: dict, axis: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for label in sorted({c["variant"][axis] for c in doc["cells"]}):
        cells = [c for c in doc["cells"] if c["variant"][axis] == label and c["status"] == "ok"]
        qps = [c["summary"]["qps"] for c in cells]
        starts = [c["resources"]["server_start_s"] for c in cells]
        low_high = cv_interval(qps)
        out[label] = {
            "n": len(cells),
            "version": cells[0]["build"]["version"].split()[0] if cells else None,
            "qps_mean": round(C.mean(qps)) if qps else None,
            "cv": C.rnd(C.cv(qps)),
            "cv_ci": [C.rnd(x) for x in low_high] if low_high else None,
            "start_s_mean": C.rnd(C.mean(starts), 3) if starts else None,
            "start_s_range": [min(starts), max(starts)] if starts else None,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--duration", default="10s")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="plbench-suites-"))
    result: dict[str, Any] = {}
    try:
        doc = run(work, "mysql-mariadb", "sequential", MYSQL_MARIADB, args.duration, args.repeats)
        result["servers"] = {
            "per_server": per_server(doc, "server"),
            "other_cpu_cores": C.other_cpu_cores(doc["cells"]),
        }
        doc = run(work, "root-cost", "interleaved", ROOT_COST, args.duration, args.rounds)
        comparisons = [c for c in doc["comparisons"] if c["metric"] == "qps"]
        result["root_cost"] = {
            "comparisons": [
                {
                    k: c.get(k)
                    for k in ("baseline", "variant", "ratio", "ci_low", "ci_high", "verdict", "pairs", "method")
                }
                for c in comparisons
            ],
            "other_cpu_cores": C.other_cpu_cores(doc["cells"]),
        }
        doc = run(work, "postgresql", "sequential", POSTGRESQL, args.duration, args.repeats, 'server = "postgresql"')
        result["postgresql"] = {
            "per_server": per_server(doc, "server"),
            "other_cpu_cores": C.other_cpu_cores(doc["cells"]),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for part in ("servers", "postgresql"):
        rows = [[label, r["version"], r["n"], r["qps_mean"], C.pct(r["cv"]),
                 "-" if not r["cv_ci"] else f"{C.pct(r['cv_ci'][0])}-{C.pct(r['cv_ci'][1])}",
                 r["start_s_mean"], r["start_s_range"]] for label, r in result[part]["per_server"].items()]  # fmt: skip
        C.say(C.table(["server", "version", "n", "QPS", "CV", "CV 95%", "start s", "start range"], rows))
        C.say(f"other_cpu_cores: {result[part]['other_cpu_cores']}")
    for c in result["root_cost"]["comparisons"]:
        C.say(
            f"{c['variant']} / {c['baseline']}: {c['ratio']} [{c['ci_low']}, {c['ci_high']}] {c['verdict']} ({c['method']}, {c['pairs']} pairs)"
        )
    C.say(f"other_cpu_cores: {result['root_cost']['other_cpu_cores']}")
    C.final_json(result)


if __name__ == "__main__":
    main()
