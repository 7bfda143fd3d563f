"""The HTML report of the recorded tiny results: self-contained, escaped, the same findings as
the terminal report, and a profiles section only when the results have profiles."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from markupsafe import escape

from perflab.report import html, model, profiles
from perflab.store.results import Results

DATA = Path(__file__).resolve().parent.parent / "data" / "report"
FLAME = """<svg xmlns="http://www.w3.org/2000/svg" width="100" height="20"><script>
function zoom(e) { e.target.setAttribute("data-zoomed", "yes"); }</script>
<rect id="frame" width="100" height="20" onclick="zoom(evt)"/><text y="15">main &amp; "friends"</text></svg>"""


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    copy = tmp_path / "tiny"
    shutil.copytree(DATA / "tiny", copy)
    return copy


def render(directory: Path) -> tuple[model.ReportModel, str]:
    with Results(directory) as results:
        m = model.build(results)
    return m, html.render(m)


def test_self_contained(tiny: Path):
    _, page = render(tiny)
    assert "<script" not in page and "<link" not in page and "<img" not in page
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {
        "http://www.w3.org/2000/svg"
    }  # a namespace, never fetched
    assert (
        page.count('class="chart"') == 1 + 1 + 1 + 1 + 2 * 2
    )  # qps-threads, ratio, latency, rss, 2 variants x 2 series
    assert 'id="profiles"' not in page


def test_findings_are_those_of_the_terminal_report(tiny: Path):
    m, page = render(tiny)
    assert m.findings
    for f in m.findings:
        assert str(escape(f.text)) in page


def test_user_text_is_escaped(tiny: Path):
    with Results(tiny) as results:
        results.set_meta(spec_text='</pre><script>alert("spec")</script>')
    _, page = render(tiny)
    assert "<script>" not in page
    assert "&lt;script&gt;" in page


def test_profiles_section_through_the_extension_point(tiny: Path, monkeypatch: pytest.MonkeyPatch):
    fake = profiles.Profiles(
        top={"allocator=glibc": [profiles.FunctionRow("my_hash_sort_simple", 10.2, 14.0, 3.1)]},
        pair=("allocator=glibc", "allocator=jemalloc"),
        diff=[profiles.DiffRow("mprotect", 0.4, 2.9)],
        flames=[profiles.FlameGraph("allocator=glibc, 2 threads", FLAME)],
    )
    monkeypatch.setattr(profiles, "load", lambda directory, cells, groups: fake)
    _, page = render(tiny)
    assert 'id="profiles"' in page and "my_hash_sort_simple" in page and "+2.500" in page
    (frame,) = re.findall(r"<iframe[^>]*>", page)
    assert 'sandbox="allow-scripts"' in frame and "<svg" not in frame and "&lt;svg" in frame
    assert "<script" not in page.replace(frame, "")


def test_profiles_load_is_none_without_profiles(tiny: Path):
    assert profiles.load(tiny, []) is None


def test_markdown_profiles_section_through_the_extension_point(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from perflab.report import markdown

    fake = profiles.Profiles(
        top={"allocator=glibc": [profiles.FunctionRow("alloc_root", 5.0, 9.0)]},
        flames=[profiles.FlameGraph("glibc", FLAME, differential=True)],
    )
    monkeypatch.setattr(profiles, "load", lambda directory, cells, groups: fake)
    with Results(tiny) as results:
        m = model.build(results)
    text = markdown.render(m, tmp_path / "r_files", "r_files")
    assert "## Profiles" in text and "| alloc_root | 5.0 | 9.0 | - |" in text
    assert "[Differential flame graph: glibc](r_files/flame-0-glibc.svg)" in text
    assert (tmp_path / "r_files" / "flame-0-glibc.svg").read_text(encoding="utf-8") == FLAME


def test_noise_table_beside_the_verdicts_as_in_the_export(tiny: Path):
    from perflab.report import export

    m, page = render(tiny)
    verdicts, findings = page.index('id="verdicts"'), page.index('id="findings"')
    assert verdicts < page.index('id="noise"') < findings
    table = page[page.index('<table class="noise">') : page.index("</table>", page.index('<table class="noise">'))]
    assert table.count("<tr>") == 1 + 3  # header, window, restarts, drift
    with Results(tiny) as results:
        doc = export.document(results)
    assert doc["variance"] == m.noise.to_dict()
    window = doc["variance"]["components"][0]
    assert f"{window['sd']:.1%}" in table and m.noise.advice[1:] in page
