"""TPC-C through go-tpc behind perflab's Workload interface (workloads/__init__.py): what a
go-tpc experiment file may hold, go-tpc's checks against this machine, its dataset (`go-tpc tpcc
prepare` as tpcc@127.0.0.1) and a cell's command. The command line and the parser of its output
are gotpc.py's; docs/workloads.md says what is measured.

    from perflab import workloads
    workloads.get("go-tpc").prepare_argv(spec, server)   # [.../go-tpc, "tpcc", "prepare", ...]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from perflab.errors import ToolMissingError
from perflab.workloads import Workload, gotpc
from perflab.workloads.gotpc import DATABASE, RESERVED, TESTS, USER, VERSION, WAREHOUSE_BYTES
from perflab.workloads.sysbench_output import Summary


class GoTpc(Workload):
    name = "go-tpc"
    database = DATABASE
    throughput = "new-order transactions per minute (NOPM; go-tpc prints it as tpmC)"
    metric = "NOPM"
    interleaved_refusal = "go-tpc's transactions are not counted per turn (sysbench's are)"
    rate_refusal = (
        "go-tpc v1.0.12 has no rate control: its workers loop as fast as they can (--wait adds TPC-C's "
        "keying and think time, a closed loop still); use sysbench or pgbench for a fixed rate"
    )
    stamps_lines = True  # its reports carry no time, and a second without a transaction prints nothing
    connects_by_tcp = True  # --host/--port only
    dataset_size = ("workload.warehouses", "fewer warehouses")

    def check_test(self, test: str) -> str:
        from perflab.spec.fields import fail

        if test not in TESTS:
            raise fail(f"a go-tpc test perflab runs ({', '.join(TESTS)})", 'test = "tpcc"')
        return test

    def file_problems(self, spec: Any, kind: Any) -> list[Any]:
        from perflab.errors import Problem

        problems = []
        if not kind.mysql_protocol:
            problems.append(
                Problem(
                    "workload.tool",
                    f"a server go-tpc {VERSION} can drive (MySQL's protocol)",
                    f'"go-tpc" on {kind.title}',
                    f"go-tpc {VERSION}, the version perflab installs, "
                    "has no driver for it; use pgbench (tpcb-like) on PostgreSQL",
                )
            )
        if spec.workload.warehouses is None:
            problems.append(
                Problem(
                    "workload.warehouses",
                    "the number of TPC-C warehouses",
                    "none",
                    "warehouses = 4 (about 100 MiB each)",
                )
            )
        if "test" not in spec.workload.model_fields_set:
            problems.append(
                Problem(
                    "workload.test", 'test = "tpcc"', "none (sysbench's oltp_read_only is the default)", 'test = "tpcc"'
                )
            )
        for key in sorted(spec.dataset.model_fields_set & {"tables", "table_size", "scale"}):
            problems.append(
                Problem(
                    f"dataset.{key}",
                    "no [dataset] with go-tpc",
                    key,
                    "its dataset is [workload] warehouses = N (go-tpc tpcc prepare)",
                )
            )
        return problems + self._reserved(spec) + self._unsupported(spec)

    @staticmethod
    def _unsupported(spec: Any) -> list[Any]:
        """What needs sysbench: PGO training runs it; client variants load into its libmariadb."""
        from perflab.errors import Problem

        found = [
            Problem(
                f"builds.{name}.pgo",
                "no pgo with go-tpc (its training runs sysbench)",
                "true",
                "train on a sysbench experiment, or leave pgo out",
            )
            for name, build in spec.builds.items()
            if build.pgo
        ]
        for axis, labels in spec.variants.items():
            for label, variant in labels.items():
                for key in ("client_preload", "client_library"):
                    if getattr(variant, key):
                        found.append(
                            Problem(
                                f"variants.{axis}.{label}.{key}",
                                f"no {key} with go-tpc",
                                key,
                                "go-tpc is a static Go binary: nothing is preloaded into it",
                            )
                        )
        return found

    def _reserved(self, spec: Any) -> list[Any]:
        from perflab.errors import Problem

        places = [("workload.options", spec.workload.options)] + [
            (f"variants.{axis}.{label}.workload_options", v.workload_options)
            for axis, labels in spec.variants.items()
            for label, v in labels.items()
        ]
        return [
            Problem(
                f"{where}.{key}",
                f"no {key} (perflab sets it)",
                key,
                "use workload.warehouses, workload.threads and experiment.duration",
            )
            for where, options in places
            for key in options
            if key.replace("-", "_").lower() in RESERVED
        ]

    def tool_problems(self) -> list[Any]:
        from perflab.errors import Problem

        try:
            gotpc.go_tpc_binary()
        except ToolMissingError as exc:
            return [Problem("(tool) go-tpc", f"go-tpc {VERSION} installed", "missing", exc.hint)]
        return []

    def spec_problems(self, exp: Any) -> list[Any]:
        import difflib

        from perflab.errors import Problem

        known = gotpc.known_options()
        problems = []
        for where, options in [("workload.options", exp.file.workload.options)] + [
            (f"variants.{a}.{label}.workload_options", v.workload_options)
            for a, labels in exp.file.variants.items()
            for label, v in labels.items()
        ]:
            for key in options:
                if key.replace("-", "_") not in known:
                    close = difflib.get_close_matches(key.replace("-", "_"), sorted(known), n=3)
                    hint = f"did you mean {', '.join(close)}?" if close else "see `go-tpc tpcc run --help`"
                    problems.append(Problem(f"{where}.{key}", "an option of go-tpc tpcc run", "unknown option", hint))
        return problems

    def dataset_estimate(self, exp: Any) -> int:
        return (exp.file.workload.warehouses or 1) * WAREHOUSE_BYTES

    def setup_sql(self) -> str:
        return f"CREATE USER IF NOT EXISTS '{USER}'@'127.0.0.1'; GRANT ALL ON *.* TO '{USER}'@'127.0.0.1'"

    def prepare_argv(self, spec: Any, server: Any) -> list[str]:
        """go-tpc loads a warehouse's 10 districts in parallel: one thread per CPU, up to 10 a
        warehouse. Without its consistency checks (TPC-C clause 3.3.2, `--no-check`): they only
        read the rows just generated, and took 77 of the 80 s of a warehouse's prepare here."""
        warehouses = spec.workload.warehouses or 1
        threads = min(10 * warehouses, os.cpu_count() or 1)
        options = {"no_check": True}
        return gotpc.argv("prepare", port=server.port, warehouses=warehouses, threads=threads, options=options)

    def run_argv(
        self, spec: Any, cell: Any, server: Any, seconds: int, checkpoint: int | None, jobs: int | None = None
    ) -> list[str]:
        options = {**spec.workload.options, **cell.workload_options}
        return gotpc.argv(
            "run",
            port=server.port,
            warehouses=spec.workload.warehouses or 1,
            threads=cell.threads,
            seconds=seconds,
            options=options,
        )

    def read_output(self, out: Path, code: int, warmup: int) -> tuple[Summary, list[dict[str, Any]]]:
        return gotpc.read_output(out, code, warmup)

    def effective_options(self, runner: Any, argv_used: list[str]) -> dict[str, str]:
        """Every --key=value perflab passed (go-tpc's defaults stand for the rest)."""
        return {
            a[2:].split("=", 1)[0].replace("-", "_"): a.split("=", 1)[1]
            for a in argv_used
            if a.startswith("--") and "=" in a
        }


GO_TPC = GoTpc()
