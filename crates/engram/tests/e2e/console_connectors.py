"""The connectors pages in a real browser: Debian's Chromium, headless, driven by Playwright.

Run by `console_connectors::the_connectors_pages_work_in_a_real_browser` against a server it
started (private addresses allowed, for the local feed server), with: ENGRAM_BASE, ENGRAM_KEY
(organization acme, database `news` ready), ENGRAM_OTHER_KEY (organization globex, which has a
connector of its own, OTHER_CONNECTOR), FEED_URL and FEED_TOKEN (an RSS feed of two entries
behind a bearer token), AXE_JS, SCREENSHOTS.

The catalog, the create form generated from rss's credential schema (with a preview of what the
feed offers), discovery and the choice of the feed, the first run and a sync now completing, the
synced items in their database, pause and resume; axe-core on every page; another
organization's connector out of reach both ways.
"""

import os

from console_common import run, BASE, console_page, expect, sign_in, sign_out, step, visit

KEY = os.environ["ENGRAM_KEY"]
OTHER_KEY = os.environ["ENGRAM_OTHER_KEY"]
OTHER_CONNECTOR = os.environ["OTHER_CONNECTOR"]
FEED_URL = os.environ["FEED_URL"]
FEED_TOKEN = os.environ["FEED_TOKEN"]
SYNC_WAIT = 120_000


def main():
    with console_page() as page:
        step("the catalog, from the top navigation")
        sign_in(page, KEY)
        page.get_by_role("navigation", name="Console").get_by_role("link", name="Connectors").click()
        expect(page.get_by_role("heading", name="Connectors", exact=True)).to_be_visible()
        expect(page.get_by_role("table", name="Providers")).to_contain_text("rss")
        expect(page.get_by_text("Globex wire")).to_have_count(0)
        visit(page, "01-catalog")

        step("the create form, generated from rss's credential schema")
        page.get_by_role("link", name="Connect rss").click()
        expect(page.get_by_role("heading", name="Connect rss")).to_be_visible()
        visit(page, "02-new-rss")
        token = page.get_by_label("Token")
        assert token.get_attribute("type") == "password", "a secret is typed unseen"
        assert page.get_by_label("Password").get_attribute("type") == "password"
        page.get_by_label("Name", exact=True).fill("Engineering blog")
        page.get_by_label("Database").select_option("news")
        token.fill(FEED_TOKEN)
        page.get_by_label("Feeds").fill(FEED_URL)
        page.get_by_role("button", name="Preview resources").click()
        expect(page.get_by_role("table", name="Resources the source offers")).to_contain_text("eng feed")
        visit(page, "03-preview")
        page.get_by_role("button", name="Create connector").click()
        expect(page.get_by_role("heading", name="Engineering blog", exact=True)).to_be_visible()
        connector_url = page.url
        assert FEED_TOKEN not in page.content(), "the stored token is never shown"

        step("discovery with the stored credentials; the feed is chosen and syncs")
        expect(page.get_by_label("eng feed")).to_be_visible()
        visit(page, "04-connector-discovered")
        page.get_by_label("eng feed").check()
        page.get_by_role("button", name="Sync selected resources").click()
        runs = page.get_by_role("table", name="Latest runs")
        # The page follows the run by itself until it ends.
        expect(runs.locator("[data-state=succeeded]")).to_have_count(1, timeout=SYNC_WAIT)
        resources = page.get_by_role("table", name="Resources", exact=True)
        expect(resources).to_contain_text("eng feed")
        expect(resources.locator("[data-state=ok]")).to_have_count(1, timeout=SYNC_WAIT)
        expect(page.locator("#live [data-state=healthy]")).to_be_visible()
        visit(page, "05-synced")

        step("sync now: a second run completes")
        page.get_by_role("button", name="Sync now").click()
        expect(runs.locator("tbody tr")).to_have_count(2, timeout=SYNC_WAIT)
        expect(runs.locator("[data-state=succeeded]")).to_have_count(2, timeout=SYNC_WAIT)
        expect(runs.locator("tbody tr").first).to_contain_text("manual")

        step("the synced items in their database")
        page.get_by_role("link", name="news", exact=True).first.click()
        expect(page.get_by_role("heading", name="news", exact=True)).to_be_visible()
        expect(page.get_by_role("link", name="Release 4.2")).to_be_visible(timeout=SYNC_WAIT)
        expect(page.get_by_role("link", name="Postmortem")).to_be_visible()
        visit(page, "06-items")

        step("pause and resume")
        page.goto(connector_url)
        page.get_by_role("button", name="Pause").click()
        expect(page.get_by_role("button", name="Resume")).to_be_visible()
        expect(page.get_by_role("button", name="Sync now")).to_have_count(0)
        expect(page.locator("#live [data-state=paused]").first).to_be_visible()
        visit(page, "07-paused")
        page.get_by_role("button", name="Resume").click()
        expect(page.get_by_role("button", name="Sync now")).to_be_visible()
        expect(page.locator("#live [data-state=paused]")).to_have_count(0)

        step("the list shows the connector and its health; not another organization's")
        page.goto(f"{BASE}/console/connectors")
        listed = page.get_by_role("table", name="Connectors", exact=True)
        expect(listed.get_by_role("link", name="Engineering blog")).to_be_visible()
        expect(listed).not_to_contain_text("Globex wire")
        visit(page, "08-connectors")
        page.goto(f"{BASE}/console/connectors/{OTHER_CONNECTOR}")
        expect(page.get_by_role("alert")).to_contain_text("CONNECTOR_NOT_FOUND")
        expect(page.get_by_text("Globex wire")).to_have_count(0)
        visit(page, "09-other-organization")

        step("the other organization sees its own connector, not this one")
        sign_out(page)
        sign_in(page, OTHER_KEY)
        page.goto(f"{BASE}/console/connectors")
        expect(page.get_by_role("link", name="Globex wire")).to_be_visible()
        expect(page.get_by_text("Engineering blog")).to_have_count(0)
        page.goto(connector_url)
        expect(page.get_by_role("alert")).to_contain_text("CONNECTOR_NOT_FOUND")
        expect(page.get_by_text("eng feed")).to_have_count(0)

    print("connectors browser suite: ok")


if __name__ == "__main__":
    run(main)
