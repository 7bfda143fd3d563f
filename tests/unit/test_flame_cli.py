"""`perflab flame` and the report's flame graphs, with inferno and without it.

inferno-flamegraph is the one tool `make setup` may skip (no Rust toolchain: see
docs/profiles.md). These tests never skip: where inferno is installed they check the SVGs it
draws; where it is not, they check that `perflab flame` fails with exit 3 and the message that
says what to do, that the formats that need no inferno still work, and that the HTML report
still shows the profile tables."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from perflab.errors import EXIT_ENVIRONMENT, EXIT_USAGE
from perflab.store import folded
from perflab.store.results import Results
from tests.conftest import inferno_path, perflab
from tests.unit.test_exports import build_matrix

STACKS = {
    "2M": Counter({"start_thread;do_command;filesort;my_malloc": 40, "start_thread;do_command;sort_buffer": 60}),
    "32M": Counter(
        {"start_thread;do_command;filesort;my_malloc;mmap_[k]": 90, "start_thread;do_command;sort_buffer": 60}
    ),
}


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two-axis matrix of test_exports with a perf profile stored for every cell."""
    directory = build_matrix(tmp_path_factory.mktemp("flame") / "matrix")
    with Results(directory) as results:
        for cell in results.cells():
            stacks = STACKS[cell["variant"]["sort_buffer"]]
            txn = cell["summary"]["transactions"]
            path = folded.write(folded.base(directory, cell["id"], "perf"), stacks, {"transactions": txn})
            results.commit_profile(
                {
                    "cell_id": cell["id"],
                    "source": "perf",
                    "phase": "measured",
                    "path": str(path.relative_to(directory)),
                    "samples": sum(stacks.values()),
                    "seconds": 2.0,
                    "transactions": txn,
                    "window_transactions": txn,
                    "frequency_hz": 99.0,
                    "call_graph": "fp",
                    "quality": {"notes": []},
                    "top": [],
                }
            )
    return directory


def test_flame_svg_or_the_clear_error(profiled: Path, tmp_path: Path):
    svg, delta = tmp_path / "b.svg", tmp_path / "delta.svg"
    plain = perflab("flame", str(profiled), "allocator=glibc,sort_buffer=32M", "-o", str(svg))
    diff = perflab("flame", str(profiled), "glibc,2M", "glibc,32M", "-o", str(delta))  # A, then B
    if inferno_path() is not None:
        assert plain.returncode == 0 and diff.returncode == 0, plain.stderr + diff.stderr
        assert "<svg" in svg.read_text() and "mmap" in svg.read_text()
        assert "<svg" in delta.read_text() and "my_malloc" in delta.read_text()
    else:
        for done in (plain, diff):
            assert done.returncode == EXIT_ENVIRONMENT, done.stderr
            assert "inferno-flamegraph not found" in done.stderr and "Traceback" not in done.stderr
            assert "make setup" in done.stderr and "--format speedscope" in done.stderr
        assert not svg.exists() and not delta.exists()


def test_formats_without_inferno_always_work(profiled: Path, tmp_path: Path):
    scope, text = tmp_path / "s.json", tmp_path / "f.folded"
    assert perflab("flame", str(profiled), "jemalloc,32M", "-o", str(scope), "--format", "speedscope").returncode == 0
    assert perflab("flame", str(profiled), "jemalloc,32M", "-o", str(text), "--format", "folded").returncode == 0
    assert "mmap_[k]" in text.read_text() and '"sampled"' in scope.read_text()


def test_html_report_profiles_with_or_without_flame_graphs(profiled: Path, tmp_path: Path):
    report = tmp_path / "r.html"
    done = perflab("report", str(profiled), "--html", "-o", str(report))
    assert done.returncode == 0, done.stderr
    html = report.read_text(encoding="utf-8")
    assert 'id="profiles"' in html and "my_malloc" in html  # the tables need no inferno
    flames = html.count('class="flame"')
    if inferno_path() is not None:
        assert flames >= 3 and "no flame graphs" not in html
    else:
        assert flames == 0 and "inferno-flamegraph not found: no flame graphs; run `make setup`" in html


def test_one_selector_syntax_and_the_old_spellings_still_work(profiled: Path, tmp_path: Path):
    """profile DIR A, flame DIR A B (A the baseline, as in diff); the old spellings give the same
    output with one `deprecated:` line naming the new one (issue 38)."""
    new, old = tmp_path / "new.folded", tmp_path / "old.folded"
    done_new = perflab("flame", str(profiled), "glibc,2M", "glibc,32M", "--format", "folded", "-o", str(new))
    done_old = perflab("flame", str(profiled), "glibc,32M", "--diff", "glibc,2M", "--format", "folded", "-o", str(old))
    assert done_new.returncode == 0 and done_old.returncode == 0, done_new.stderr + done_old.stderr
    assert new.read_text() == old.read_text() and "my_malloc" in new.read_text()
    assert "deprecated" not in done_new.stderr
    assert "deprecated: --diff glibc,2M; write perflab flame DIR glibc,2M glibc,32M" in " ".join(done_old.stderr.split())
    profile_new = perflab("profile", str(profiled), "glibc,32M", "--format", "json")
    profile_old = perflab("profile", str(profiled), "--variant", "glibc,32M", "--format", "json")
    assert profile_new.returncode == 0 and profile_old.returncode == 0, profile_new.stderr + profile_old.stderr
    assert json.loads(profile_new.stdout) == json.loads(profile_old.stdout) != []
    assert "deprecated: --variant SELECTOR" in profile_old.stderr and "deprecated" not in profile_new.stderr
    clash = perflab("profile", str(profiled), "glibc,2M", "--variant", "glibc,32M")
    assert clash.returncode == EXIT_USAGE and "two selectors" in clash.stderr
    cell = perflab("flame", str(profiled), "--cell", "0", "--format", "folded", "-o", str(tmp_path / "c.folded"))
    assert cell.returncode == 0, cell.stderr
    nothing = perflab("flame", str(profiled), "--format", "folded", "-o", str(tmp_path / "n.folded"))
    assert nothing.returncode == EXIT_USAGE and "--cell N" in nothing.stderr
