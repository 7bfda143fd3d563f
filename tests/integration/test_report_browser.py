"""The HTML report of a real run, opened in a real browser: headless Debian Chromium driven by
Playwright (the Python client, with Debian's /usr/bin/chromium: no downloaded browser).

One real run (tests/data/report/tiny.toml: 2 variants x 1 thread count x 3 repeats of 2 s
windows) is rendered with `perflab report DIR --html -o report.html` and checked as a reader
would see it: no console error, no network request of any kind, every chart drawn, the
comparison table's numbers equal to `perflab export`'s, a screenshot kept in the test's
tmp directory.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import perflab

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SPEC = Path(__file__).resolve().parent.parent / "data" / "report" / "tiny.toml"
REQUIRED_CHARTS = {"qps-threads", "ratio", "latency", "rss", "series-qps", "series-p95_ms"}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("report")
    out = tmp / "results"
    done = perflab("run", str(SPEC), "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    report = tmp / "report.html"
    done = perflab("report", str(out), "--html", "-o", str(report))
    assert done.returncode == 0, done.stderr
    assert f"report: {report}" in done.stdout
    exported = perflab("export", str(out))
    assert exported.returncode == 0, exported.stderr
    return report, json.loads(exported.stdout)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file() or shutil.which("chromium") is None:
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (make setup installs it)")
    try:  # in requirements.lock: missing means pytest runs outside the checkout's .venv
        from playwright import sync_api
    except ImportError:
        pytest.fail("playwright is missing: run the tests with .venv/bin/python (make setup installs it)")
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture()
def page(browser, rendered, tmp_path: Path):
    report, _ = rendered
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    requests: list[str] = []
    problems: list[str] = []
    context.on("request", lambda r: requests.append(r.url))
    context.route("**/*", lambda route: route.continue_() if route.request.url == report.as_uri() else route.abort())
    pg = context.new_page()
    pg.on(
        "console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None
    )
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    pg.goto(report.as_uri())
    pg.wait_for_load_state("networkidle")
    pg.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    yield pg, requests, problems
    shot = tmp_path / "report.png"
    pg.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    context.close()


def test_no_console_errors_and_no_requests(page, rendered):
    pg, requests, problems = page
    report, _ = rendered
    assert problems == []
    assert requests == [report.as_uri()], f"the report asked for more than itself: {requests}"
    assert pg.locator("script, link[rel=stylesheet], img, iframe[src], object, embed").count() == 0


def test_every_chart_is_drawn(page):
    pg, _, _ = page
    kinds = pg.eval_on_selector_all("svg.chart", "els => els.map(e => e.dataset.chart)")
    assert REQUIRED_CHARTS <= set(kinds), kinds
    for i in range(len(kinds)):
        chart = pg.locator("svg.chart").nth(i)
        box = chart.bounding_box()
        assert box and box["width"] > 200 and box["height"] > 100, (kinds[i], box)
        marks = chart.locator("g.series path, g.series circle, g.row rect, g.row circle, g.row path")
        assert marks.count() > 0, f"chart {kinds[i]} draws nothing"
        drawn = marks.first.bounding_box()
        assert drawn and (drawn["width"] > 0 or drawn["height"] > 0), kinds[i]
        legend = chart.locator("g.legend g.legend-item")
        assert legend.count() > 0, f"chart {kinds[i]} has no legend"
        labels = chart.locator("text").all_text_contents()
        assert len([t for t in labels if t.strip()]) >= 4, f"chart {kinds[i]} lacks labels: {labels}"


def test_comparison_table_equals_export(page, rendered):
    pg, _, _ = page
    _, exported = rendered
    variant_rows = [c for c in exported["comparisons"] if c["kind"] == "variant"]
    assert {c["metric"] for c in variant_rows} == {"qps", "p95"}
    for c in variant_rows:
        key = ",".join(f"{a}={lbl}" for a, lbl in c["variant"].items())
        row = pg.locator(f'table.verdicts tr[data-variant="{key}"][data-threads="{c["threads"]}"]')
        cell = row.locator(f'td.cmp[data-metric="{c["metric"]}"]')
        assert cell.locator("span.ratio").inner_text() == f"{c['ratio']:.3f}"
        ci = cell.locator("span.ci").inner_text()
        if c["ci_low"] is None:
            assert ci == ""
        else:
            low, high = ci.strip("[]").split("–")
            assert (float(low), float(high)) == (round(c["ci_low"], 3), round(c["ci_high"], 3))
        verdict = cell.locator("xpath=following-sibling::td[1]")
        assert verdict.locator("span").first.inner_text() == c["verdict"]
        if c["rounds_needed"] is not None:  # inconclusive: the rounds that would resolve it, beside
            assert f"+{c['rounds_needed']} round" in verdict.inner_text()
    baseline = [g for g in exported["groups"] if g["baseline"]]
    for g in baseline:
        key = ",".join(f"{a}={lbl}" for a, lbl in g["variant"].items())
        assert "baseline" in pg.locator(f'tr[data-variant="{key}"][data-threads="{g["threads"]}"]').inner_text()


def test_header_and_findings(page, rendered):
    pg, _, _ = page
    _, exported = rendered
    assert pg.locator("h1").inner_text() == exported["experiment"]["name"]
    facts = pg.locator("#run-facts").inner_text()
    assert "6 cells" in facts and "complete" in facts
    assert exported["spec"].splitlines()[0] in pg.locator("#spec pre").inner_text()
    assert pg.locator("#findings").count() == 1


def test_profiles_section_only_with_profiles(page):
    pg, _, _ = page
    # This run has no profiles, so there is no Profiles section; with real profiles the section
    # and a real inferno flame graph's zoom are tested in test_profiling.py.
    assert pg.locator("#profiles").count() == 0


FLAME = """<svg xmlns="http://www.w3.org/2000/svg" width="300" height="40"><script><![CDATA[
function zoom(e) { e.target.setAttribute("data-zoomed", "yes"); e.target.setAttribute("fill", "red"); }
]]></script><rect id="frame" width="300" height="40" fill="orange" onclick="zoom(evt)"/></svg>"""


def test_embedded_flame_graph_answers_a_click(browser, rendered, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The profiles extension point embeds a flame graph SVG with its own script (as inferno
    writes them) in a sandboxed iframe: its script runs and answers a click, offline."""
    from perflab.report import html, model, profiles
    from perflab.store.results import Results

    report, _ = rendered
    monkeypatch.setattr(
        profiles,
        "load",
        lambda directory, cells, groups: profiles.Profiles(flames=[profiles.FlameGraph("stand-in", FLAME)]),
    )
    with Results(report.parent / "results") as results:
        page_html = html.render(model.build(results))
    path = tmp_path / "with-profiles.html"
    path.write_text(page_html, encoding="utf-8")
    context = browser.new_context()
    requests: list[str] = []
    errors: list[str] = []
    context.on("request", lambda r: requests.append(r.url))
    pg = context.new_page()
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(path.as_uri())
    frame = pg.frame_locator("#profiles iframe.flame").locator("#frame")
    frame.click()
    assert frame.get_attribute("data-zoomed") == "yes"
    assert errors == [] and requests == [path.as_uri()]
    context.close()
