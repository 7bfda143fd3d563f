"""The history page opened in a real browser: headless Debian Chromium driven by Playwright (the
Python client, /usr/bin/chromium: no downloaded browser), as tests/integration/test_report_browser.py
opens the report.

A history of 16 runs with a 6% step at run 11 (results directories cloned from the recorded tiny
run: tests/unit/history_runs.py) is imported and rendered with `perflab history NAME --format html`;
the page must show it as its JSON has it: no console error, no request of any kind, a point and an
interval per run, the change point drawn and described with its cause, and the runs table equal
to `perflab history --format json`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import perflab
from tests.integration.test_report_browser import ARGS, CHROMIUM
from tests.unit.history_runs import make_run


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("history")
    rng = np.random.default_rng(5)
    dirs = []
    for night in range(16):
        level = 1000 * (0.94 if night >= 10 else 1.0) * (1 + rng.normal(0, 0.004))
        sha = "1111aaaa2222" if night < 10 else "3333bbbb4444"
        values = [float(v) for v in level * (1 + rng.normal(0, 0.01, 4))]
        dirs.append(str(make_run(tmp / f"n{night:02d}", night, values, git={"build.main": sha})))
    where = str(tmp / "history.sqlite")
    assert perflab("history", "import", *dirs, "--history", where).returncode == 0
    page = tmp / "history.html"
    done = perflab("history", "nightly", "--history", where, "--format", "html", "-o", str(page))
    assert done.returncode == 0, done.stderr
    doc = json.loads(perflab("history", "nightly", "--history", where, "--format", "json").stdout)
    return page, doc


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
    html, _ = rendered
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    problems: list[str] = []
    context.on("request", lambda r: requests.append(r.url))
    context.route("**/*", lambda route: route.continue_() if route.request.url == html.as_uri() else route.abort())
    pg = context.new_page()
    pg.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    pg.goto(html.as_uri())
    pg.wait_for_load_state("networkidle")
    yield pg, requests, problems
    pg.screenshot(path=str(tmp_path / "history.png"), full_page=True)
    context.close()


def test_no_console_errors_and_no_requests(page, rendered):
    pg, requests, problems = page
    html, _ = rendered
    assert problems == []
    assert requests == [html.as_uri()], f"the page asked for more than itself: {requests}"
    assert pg.locator("script, link[rel=stylesheet], img, iframe[src], object, embed").count() == 0


def test_every_run_its_interval_and_the_change_point_are_drawn(page, rendered):
    pg, _, _ = page
    _, doc = rendered
    (series,) = doc["series"]
    chart = pg.locator("svg.chart")
    box = chart.bounding_box()
    assert box and box["width"] > 400 and box["height"] > 100
    circles = chart.locator("circle.run")
    assert circles.count() == len(series["runs"]) == 16
    assert chart.locator("line.bar").count() == sum(1 for r in series["runs"] if r["low"] is not None)
    assert chart.locator("line.level").count() == len(series["segments"]) == 2
    change = chart.locator("line.change")
    assert change.count() == 1
    # the change point's line lies between the last run before it and the first after it
    x = change.bounding_box()["x"]
    assert circles.nth(9).bounding_box()["x"] < x < circles.nth(10).bounding_box()["x"]
    # the runs after the step are drawn lower (SVG y grows downwards)
    ys = [circles.nth(i).bounding_box()["y"] for i in range(16)]
    assert np.mean(ys[10:]) > np.mean(ys[:10]) + 5


def test_the_change_point_says_its_cause(page, rendered):
    pg, _, _ = page
    _, doc = rendered
    (c,) = doc["series"][0]["change_points"]
    text = pg.locator("p.changepoint").inner_text()
    assert f"Change at run {c['run']}" in text and "regression" in text
    assert "git.build.main: 1111aaaa2222 → 3333bbbb4444" in text
    assert f"ratio {c['ratio']:.3f}" in text
    assert f"perflab diff {c['before_run']}" in text and f"--against {c['after_run']}" in text


def test_the_runs_table_equals_the_json(page, rendered):
    pg, _, _ = page
    _, doc = rendered
    rows = pg.locator("table.runs tr")
    runs = doc["series"][0]["runs"]
    assert rows.count() == len(runs) + 1
    for i, r in enumerate(runs):
        cells = rows.nth(i + 1).locator("td")
        assert cells.nth(0).inner_text() == str(r["run"])
        assert cells.nth(2).inner_text() == f"{r['mean']:,.0f}"
        assert cells.nth(4).inner_text() == str(r["n"])
