"""The progress bar of `perflab run`, `calibrate` and `build`: a Scheduler listener (events such as
`cell_start`, `cell_end`, `build_step`) drawn on stderr, refreshed once a second.

    with ProgressBar() as progress:
        Scheduler(exp, results, listener=progress).run()
"""

from __future__ import annotations

from typing import Any, Self

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from perflab.cli.console import err


class ProgressBar:
    """Progress bar listener: current cell, done/total, elapsed, remaining. Refreshes once a
    second so the harness takes almost no CPU from the measurement."""

    def __init__(self) -> None:
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=err,
            refresh_per_second=1,
            transient=False,
        )
        self.task = self.bar.add_task("preparing dataset", total=None)

    def __enter__(self) -> Self:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        if event == "prepare_start" and data.get("build") is not None:
            build = data["build"]
            self.bar.update(self.task, total=None, description=escape(f"preparing the {build.format} dataset"))
        elif event == "prepare_end":
            snap, build = data["snapshot"], data.get("build")
            which = f" for {build.format} (by {build.version})" if build is not None else ""
            self.bar.console.print(
                escape(f"dataset{which} prepared in {snap.prepare_s:.1f}s ({snap.data_bytes / 2**20:.0f} MiB)"),
                highlight=False,
            )
        elif event == "build_start":
            self.bar.update(self.task, total=None, description=escape(f"build {data['name']}: {data['status']}"))
        elif event == "build_step":
            self.bar.update(
                self.task, total=100, completed=0, description=escape(f"build {data['name']}: {data['step']}")
            )
        elif event == "build_progress":
            self.bar.update(self.task, completed=round(data["fraction"] * 100))
        elif event == "build_end":
            build = data["build"]
            if isinstance(build, Exception):
                self.bar.console.print(
                    f"[red]build {escape(data['name'])} failed:[/] {escape(str(build))}", highlight=False
                )
            elif build is None:  # a C library for [variants] glibc
                self.bar.console.print(f"build {escape(data['name'])}: {escape(data['said'])}", highlight=False)
            else:
                where = f"{build.version} ({build.kind}, sha256 {build.sha256[:12]})"
                self.bar.console.print(f"build {escape(data['name'])}: {escape(where)}", highlight=False)
                had = build.extra.get("debug_symbols") or ""
                if (build.recipe or {}).get("debug_symbols") and had.startswith("none"):  # asked for, not had
                    why = had.removeprefix("none: ")
                    self.bar.console.print(
                        f"[yellow]warning:[/] build {escape(data['name'])} runs without debug symbols: {escape(why)}",
                        highlight=False,
                    )
        elif event == "cell_start":
            cell, group = data["cell"], data.get("group")
            what = f"cell {cell.order + 1}: {cell.key}"
            if group:  # design = "interleaved": the round's cells of one thread count take turns
                first, last = group[0].order + 1, group[-1].order + 1
                what = f"cells {first}-{last} interleaved: round {cell.repeat}, t{cell.threads}"
            self.bar.update(self.task, total=data["total"], description=escape(what))
        elif event == "cell_end":
            row = data["row"]
            if row["status"] != "ok":
                first = (row["error"] or "?").splitlines()[0]
                self.bar.console.print(f"[red]cell {row['id']} failed:[/] {escape(first)}", highlight=False)
            self.bar.advance(self.task)
