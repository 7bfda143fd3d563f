"""What the HTML and Markdown reports show, computed once from a results directory.

Input: an open Results. Output: a ReportModel holding the analysis as `perflab compare` and
`perflab export` compute it (groups, comparisons for qps and p95, findings), the header facts,
one colour per variant, and per-cell series for the charts. The renderers only format it.

    model = build(results)        # model.comparisons[0].ratio == export's comparisons[0]["ratio"]
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perflab.analyze import compare, phase_explain, status_diff, summary, txn_types, variance
from perflab.analyze.compare import Comparison
from perflab.analyze.rate import fixed_rate, rate_line
from perflab.analyze.summary import Group
from perflab.report import colors, findings, io_findings, profiles
from perflab.units import format_bytes, format_duration
from perflab.variants import variant_key
from perflab.store.results import server_facts

HOST_FACTS = (
    "hostname",
    "kernel",
    "cpu_model",
    "cores",
    "glibc",
    "mariadbd",
    "postgres",
    "sysbench",
    "pgbench",
    "go-tpc",
    "python",
    "perflab",
)


@dataclass
class ReportModel:
    directory: Path
    meta: dict[str, Any]
    cells: list[dict[str, Any]]
    groups: list[Group]
    comparisons: list[Comparison]  # metric qps then p95, as the export's `comparisons`
    axes: dict[str, list[str]]
    baseline: dict[str, str]
    colors: dict[str, str]  # variant key -> colour, the same in every chart and table
    findings: list[findings.Finding]
    intervals: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # cell id -> per-second rows
    rss: dict[int, list[tuple[float, int]]] = field(default_factory=dict)
    profiles: profiles.Profiles | None = None
    noise: variance.Decomposition | None = None  # where the QPS variance comes from
    explanations: list[phase_explain.Explanation] = field(default_factory=list)  # stalls, unsettled warm-ups

    @property
    def name(self) -> str:
        return str(self.experiment.get("name", self.directory.name))

    @property
    def experiment(self) -> dict[str, Any]:
        return self.meta.get("experiment") or {}

    @property
    def metric(self) -> str:
        """What the tables call the throughput: QPS, or the workload's own figure (go-tpc: NOPM)."""
        return str((self.meta.get("throughput") or {}).get("metric") or "QPS")

    @property
    def memory(self) -> str:
        """The server memory figure shown: "PSS" (PostgreSQL's processes summed) or "RSS"."""
        return str(server_facts(self.meta)["memory_figure"])

    @property
    def threads(self) -> list[int]:
        return sorted({g.threads for g in self.groups})

    @property
    def variants(self) -> list[dict[str, str]]:
        return list({g.key: g.variant for g in self.groups}.values())

    @property
    def latency_metric(self) -> str:
        """The latency percentile the tables judge: p99 from the intended start at a fixed rate, else p95."""
        return "p99" if fixed_rate(self.meta) else "p95"

    @property
    def rate_line(self) -> str:
        """A fixed-rate run's line under its tables (analyze/rate.py); "" for a closed loop."""
        return rate_line(self.meta, self.cells) if fixed_rate(self.meta) else ""

    def comparison(self, group: Group, metric: str) -> Comparison | None:
        for c in self.comparisons:
            if c.kind == "variant" and c.metric == metric and c.threads == group.threads and c.variant == group.variant:
                return c
        return None

    def status_differences(self) -> list[tuple[Group, list[dict[str, Any]]]]:
        """[observe] status: per variant and thread count, the server's counters that differ most
        per transaction from the baseline's (analyze/status_diff.py); [] without status."""
        return status_diff.by_group(self.groups)

    def transaction_types(self) -> list[tuple[Group, list[Any]]]:
        """go-tpc: per variant and thread count, each TPC-C transaction type's rate and latency
        (analyze/txn_types.py); [] for another tool."""
        return txn_types.by_group(self.groups)

    def failed(self) -> list[dict[str, Any]]:
        return [c for c in self.cells if c["status"] != "ok"]

    def rounds(self) -> str:
        """The matrix's third factor: `3 repeats` when fixed; otherwise the rounds run and why they
        stopped (meta.adaptive), e.g. `5 rounds (until a verdict: every comparison has a verdict)`."""
        repeats = self.experiment.get("repeats")
        if isinstance(repeats, int):
            return plural(repeats, "repeat")
        adaptive = self.meta.get("adaptive") or {}
        rounds = adaptive.get("rounds") or max((c["repeat"] for c in self.cells), default=0)
        verdict = adaptive.get("stop") == "verdict" if adaptive else repeats is None
        rule = "until a verdict" if verdict else "until the target interval"
        stopped = adaptive.get("stop_reason") or "running"
        return f"{plural(rounds, 'round')} ({rule}: {stopped})"

    def facts(self) -> list[tuple[str, str]]:
        """The header: what ran, where, when, how long."""
        exp, meta = self.experiment, self.meta
        wl = exp.get("workload") or {}
        axes = " × ".join(f"{a} ({len(v)})" for a, v in self.axes.items()) or "1 variant"
        warm = exp.get("warmup", 0)
        window = f"{format_duration(exp.get('duration', 0))} after " + (
            f"auto warm-up (window from {format_duration(exp.get('max_warmup', 10))})"
            if warm == "auto"
            else f"{format_duration(warm)} warm-up"
        )
        ok = sum(1 for c in self.cells if c["status"] == "ok")
        ds = exp.get("dataset") or {}
        return [
            (
                "matrix",
                (
                    f"{axes} × threads ({len(wl.get('threads') or self.threads)}) × {self.rounds()} = "
                    f"{meta.get('cell_count') or len(self.cells)} cells; stored {len(self.cells)}: {ok} ok, "
                    f"{len(self.cells) - ok} failed"
                ),
            ),
            (
                "workload",
                f"{wl.get('tool', 'sysbench')} {wl.get('test', '?')}, threads {', '.join(map(str, wl.get('threads', [])))}",
            ),
            (
                "dataset",
                (
                    f"pgbench scale {ds['scale']}"
                    if ds.get("scale")
                    else f"{plural(ds.get('tables', 0), 'table')} × {ds.get('table_size', '?')} rows"
                )
                + (f" ({format_bytes((meta.get('dataset') or {}).get('data_bytes'))})" if meta.get("dataset") else ""),
            ),
            ("window", window + f", pin={exp.get('pin')}" + design_phrase(exp)),
            *([("storage", io_findings.storage_phrase(meta))] if io_findings.storage_phrase(meta) else []),
            ("started", str(meta.get("started_at") or "?")),
            ("took", _took(meta.get("started_at"), meta.get("ended_at"))),
            ("status", str(meta.get("status") or "?")),
            ("results", str(self.directory)),
        ]

    def host_facts(self) -> list[tuple[str, str]]:
        host = self.meta.get("host") or {}
        mem = host.get("memory_bytes")
        return [(k, str(host.get(k))) for k in HOST_FACTS if host.get(k) is not None] + (
            [("memory", format_bytes(mem))] if mem else []
        )

    def build_facts(self) -> list[tuple[str, str]]:
        """Each server binary the cells ran: its version, kind, sha256 and compiler (or why it failed)."""
        return build_facts(self.meta, self.cells)


def build_facts(meta: dict[str, Any], cells: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """("old", "10.11.18-MariaDB-0+deb12u1, package, sha256 17310a09..., compiler unknown (stripped)")."""
    named = dict(meta.get("builds") or {})
    if not named:
        return []
    installed = next((c["build"] for c in cells if c.get("build") and c["build"].get("name") is None), None)
    rows = [("installed", installed)] if installed else []
    rows += list(named.items())
    facts = []
    for name, build in rows:
        if "error" in build:
            facts.append((name, "failed: " + build["error"].splitlines()[0]))
            continue
        version = build["version"].split(" for ")[0]
        compiler = build.get("compiler") or "compiler unknown (.comment stripped)"
        source = build.get("compiler_source") or ""
        if build.get("compiler") and source.startswith(("dbgsym", "buildinfo")):  # not the binary's own .comment
            compiler += f" (from its {source.split(':')[0]})"
        took = f", built in {format_duration(build['build_s'])}" if build.get("kind") == "source" else ""
        sha = f", sha256 {build['sha256'][:12]}" if build.get("sha256") else ""
        facts.append((name, f"{version}, {build['kind']}{sha}, {compiler}{took}"))
    return facts


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _took(start: str | None, end: str | None) -> str:
    if end is None:
        return "(still running, or killed)"
    try:
        seconds = (dt.datetime.fromisoformat(str(end)) - dt.datetime.fromisoformat(str(start))).total_seconds()
    except ValueError:
        return "?"
    return format_duration(seconds)


def build(results: Any, baselines: list[str] | None = None, series: bool = True) -> ReportModel:
    meta, cells = summary.load(results)
    axes = (meta.get("experiment") or {}).get("axes") or {}
    base = compare.baseline_variant(axes, baselines or [])
    memory, fixed = server_facts(meta)["memory_figure"], fixed_rate(meta)
    groups = summary.groups(cells, base if axes else None, axes, memory=memory, fixed_rate=fixed)
    comparisons = compare.verdicts(meta, cells, baselines).comparisons  # host speed, sequential looks
    # the file's order (groups), not the run's: randomized rounds would shuffle the colours
    variants = list({variant_key(v): v for v in [g.variant for g in groups] + [c["variant"] for c in cells]}.values())
    model = ReportModel(
        Path(results.dir),
        meta,
        cells,
        groups,
        comparisons,
        axes,
        base,
        colors.variant_colors(variants),
        findings.collect(groups, cells, meta, comparisons),
        profiles=profiles.load(Path(results.dir), cells, groups),
        explanations=phase_explain.explain(results),
    )
    if series:
        for cell in cells:
            if cell["status"] == "ok":
                model.intervals[cell["id"]] = results.intervals(cell["id"])
                model.rss[cell["id"]] = results.rss_samples(cell["id"])
    model.noise = variance.load(results, cells)
    return model


def design_phrase(exp: dict[str, Any]) -> str:
    """ ", interleaved in 1 s turns" for a run of that design (docs/experiment.md), else ""."""
    if exp.get("design") != "interleaved":
        return ""
    return f", interleaved in {exp.get('slice') or 1:g} s turns (latency of the requests within a turn)"
