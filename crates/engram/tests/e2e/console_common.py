"""What every console browser suite shares: the server's address, screenshots, axe-core on
each page, signing in and out, and a Chromium launched as the tests need it (Debian's, since
Playwright's own download is not reachable)."""

import os
import sys
from contextlib import contextmanager

from playwright.sync_api import expect, sync_playwright

BASE = os.environ["ENGRAM_BASE"]
SHOTS = os.environ["SCREENSHOTS"]
AXE = open(os.environ["AXE_JS"], encoding="utf-8").read()

expect.set_options(timeout=30_000)
alerts = []
page_errors = []


def step(name):
    print(f"- {name}", flush=True)


def shot(page, name):
    page.screenshot(path=os.path.join(SHOTS, f"{name}.png"), full_page=True)


def accessible(page, name):
    """axe-core on the page as it is: no serious or critical violation."""
    page.evaluate(AXE)
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    bad = [v for v in result["violations"] if v["impact"] in ("serious", "critical")]
    if bad:
        lines = [f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}" for v in bad]
        raise AssertionError(f"axe on {name}:\n" + "\n".join(lines))


def visit(page, name):
    shot(page, name)
    accessible(page, name)


def sign_in(page, key):
    page.goto(f"{BASE}/console")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Databases", exact=True)).to_be_visible()


def sign_out(page):
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()



@contextmanager
def console_page():
    """A page of a fresh headless Chromium; fails the suite if any alert opens (user content
    must never run script) or a script of the page throws."""
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage"],
        )
        # bypass_csp lets the test inject axe-core; the console's own scripts never need it.
        context = browser.new_context(bypass_csp=True, viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()) if d.type == "alert" else d.accept())
        page.on("pageerror", lambda e: page_errors.append(str(e)))
        yield page
        assert not alerts, f"user content ran script: {alerts}"
        assert not page_errors, f"script errors: {page_errors}"
        browser.close()


def run(main):
    """Runs a suite's `main`, saying on stderr why it failed (the Rust test prints both streams)."""
    try:
        main()
    except Exception as err:  # noqa: BLE001 - reported, then raised again
        print(f"FAILED: {err}", file=sys.stderr)
        raise
