#!/usr/bin/env python3
"""Re-shoot docs/report.png, the README's picture, from a real run's HTML report.

    perflab run examples/quick.toml -o /tmp/quick --history off   # make demo's run (~2 min)
    python3 tests/data/regen_screenshot.py /tmp/quick

Renders `perflab report DIR --html` and photographs its top (1280 x 990, as a browser window
opens it) in Debian's chromium through Playwright, as tests/integration/test_report_browser.py
drives it. Then say in README.md and docs/results.md what the picture shows (the run, its date,
its verdict), and look at it: the screenshot is only as current as the run behind it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CHROMIUM = "/usr/bin/chromium"


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="perflab-shot-") as tmp:
        page_file = Path(tmp) / "report.html"
        subprocess.run(
            [sys.executable, "-m", "perflab", "report", sys.argv[1], "--html", "-o", str(page_file)], cwd=ROOT, check=True
        )
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
            page = browser.new_context(viewport={"width": 1280, "height": 990}).new_page()
            page.goto(page_file.as_uri())
            page.wait_for_load_state("load")
            page.screenshot(path=str(ROOT / "docs" / "report.png"))
            browser.close()
    print(f"wrote {ROOT / 'docs' / 'report.png'}")


if __name__ == "__main__":
    main()
