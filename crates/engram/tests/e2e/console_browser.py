"""The console in a real browser: Debian's Chromium, headless, driven by Playwright.

Run by `console::the_console_works_in_a_real_browser` against a server it started, with:
ENGRAM_BASE, ENGRAM_KEY (organization acme), ENGRAM_OTHER_KEY (organization globex),
ENGRAM_RESTRICTED_KEY (acme, database `reports` only, read only), AXE_JS (axe-core),
FIXTURES (real files made by real tools), SCREENSHOTS (where each page's picture goes).

Every flow a newcomer takes, from the sign-in page on, without reading any docs; axe-core on
every page (no serious or critical violation); no page may run script from user content.
"""

import json
import os
import time

from console_common import run, BASE, accessible, console_page, expect, shot, sign_in, sign_out, step, visit

FIXTURES = os.environ["FIXTURES"]
HOSTILE = "<img src=x onerror=alert(1)>"

def create_database(page, name):
    page.goto(f"{BASE}/console/databases")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name=name, exact=True)).to_be_visible()
    # Provisioning takes a moment: the page says so until it is ready.
    deadline = time.time() + 60
    while "ready" not in page.locator("dl.facts dd").first.inner_text():
        assert time.time() < deadline, f"{name} never became ready"
        time.sleep(0.5)
        page.reload()


def main():
    with console_page() as page:
        step("sign-in page, a wrong key, then the right one")
        page.goto(f"{BASE}/console")
        visit(page, "01-sign-in")
        page.get_by_label("API key").fill("egk_0000.wrong")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_contain_text("not valid")
        sign_in(page, os.environ["ENGRAM_KEY"])
        stored = page.evaluate("() => JSON.stringify(localStorage) + JSON.stringify(sessionStorage) + document.cookie")
        assert os.environ["ENGRAM_KEY"].split(".")[1] not in stored, "the key is not kept in the page"

        step("a refused form says why, in place")
        page.get_by_label("Name", exact=True).fill("no spaces allowed")
        page.evaluate("() => document.getElementById('name').removeAttribute('pattern')")
        page.get_by_role("button", name="Create").click()
        expect(page.locator("#create-result [role=alert]")).to_contain_text("INVALID")

        step("create two databases")
        create_database(page, "console-demo")
        visit(page, "02-database")
        create_database(page, "reports")
        page.goto(f"{BASE}/console/databases")
        expect(page.get_by_role("link", name="console-demo")).to_be_visible()
        visit(page, "03-databases")

        step("upload a PDF, a spreadsheet and app content, and watch them complete")
        page.get_by_role("link", name="console-demo").click()
        page.get_by_label("Files").set_input_files([
            os.path.join(FIXTURES, "REPAIR-2022-INV-001_multipage.pdf"),
            os.path.join(FIXTURES, "test.xlsx"),
        ])
        page.get_by_label("App content").fill(json.dumps([
            {"id": "founders", "title": HOSTILE,
             "content": {"text": "Alice Johnson founded Acme Robotics in Berlin in 2019. "
                                 "Acme Robotics builds warehouse robots."}},
        ]))
        page.get_by_role("button", name="Upload").click()
        expect(page.locator("#upload-result")).to_contain_text("3 accepted")
        assert page.locator("#upload-progress").evaluate("b => b.value") == 100
        page.reload()
        rows = page.locator("#items tbody tr")
        expect(rows).to_have_count(3)
        # The list refreshes itself until every item is indexed.
        expect(page.locator("#items .badge.completed")).to_have_count(3, timeout=240_000)
        expect(page.get_by_role("link", name=HOSTILE)).to_be_visible()
        visit(page, "04-items")
        page.goto(f"{BASE}/console/databases")
        demo = page.get_by_role("row").filter(has=page.get_by_role("link", name="console-demo"))
        expect(demo).to_contain_text("KiB")  # the size its chunks' text and vectors take
        page.goto(f"{BASE}/console/databases/console-demo")

        step("an item: its chunks with their pages")
        page.get_by_role("link", name="REPAIR-2022-INV-001_multipage.pdf").click()
        expect(page.locator("li.chunk").first).to_be_visible()
        expect(page.locator("li.chunk .layout").first).to_contain_text("page")
        history = page.locator("table.history")
        for state in ("queued", "processing", "completed"):
            expect(history).to_contain_text(state)
        visit(page, "05-item-pdf")
        page.go_back()
        page.get_by_role("link", name="test.xlsx").click()
        expect(page.locator("li.chunk").first).to_be_visible()
        expect(page.locator("li.chunk .layout").first).to_contain_text("sheet")
        visit(page, "06-item-sheet")

        step("search: highlights, scores, meta and the graph")
        page.goto(f"{BASE}/console/databases/console-demo/search")
        page.get_by_label("Query").fill("who founded Acme Robotics")
        page.get_by_label("Mode").select_option("fast")
        page.get_by_role("button", name="Search").click()
        first = page.locator("li.result").first
        expect(first).to_be_visible()
        expect(first.locator("mark").first).to_be_visible()
        expect(first.locator("table.scores")).to_contain_text("keyword")
        expect(page.locator("dl.meta")).to_contain_text("fast")
        graph = page.locator("#graph canvas")
        expect(graph.first).to_be_visible()
        visit(page, "07-search")
        # The picture README shows: the first screen of a search.
        page.screenshot(path=os.path.join(os.environ["SCREENSHOTS"], "readme-search.png"))

        step("the graph explorer: an entity's neighbourhood, its evidence, its chunk")
        page.goto(f"{BASE}/console/databases/console-demo/graph")
        page.get_by_label("Entity").fill("Acme Robotics")
        page.get_by_role("button", name="Explore").click()
        expect(page.locator("#graph canvas").first).to_be_visible()
        evidence = page.get_by_role("link", name="Alice Johnson founded Acme Robotics in Berlin in 2019.").first
        expect(evidence).to_be_visible()
        visit(page, "08-graph")
        evidence.click()
        expect(page.locator("li.chunk:target")).to_contain_text("Alice Johnson founded Acme Robotics")

        step("memories by user, with what inference made of them and what superseded what")
        page.goto(f"{BASE}/console/databases/minds/memories")
        page.get_by_label("Collection (user)").select_option("ana")
        page.get_by_role("button", name="Show").click()
        expect(page.locator("table").first).to_contain_text("Ana lives in Porto.")
        superseded = page.locator("tr.superseded")
        expect(superseded).to_contain_text("Ana lives in Lisbon.")
        expect(superseded).to_contain_text("Ana lives in Porto.")
        visit(page, "09-memories")

        step("delete an item")
        page.goto(f"{BASE}/console/databases/console-demo")
        page.get_by_role("link", name="test.xlsx").click()
        page.get_by_role("button", name="Delete item").click()
        expect(page.get_by_role("heading", name="console-demo", exact=True)).to_be_visible()
        expect(page.locator("#items tbody tr")).to_have_count(2)

        step("another organization's key sees none of it")
        sign_out(page)
        sign_in(page, os.environ["ENGRAM_OTHER_KEY"])
        expect(page.get_by_role("link", name="console-demo")).to_have_count(0)
        page.goto(f"{BASE}/console/databases/console-demo")
        expect(page.get_by_role("alert")).to_contain_text("DATABASE_NOT_FOUND")
        visit(page, "10-other-organization")
        sign_out(page)

        step("a key restricted to one database sees only that one")
        sign_in(page, os.environ["ENGRAM_RESTRICTED_KEY"])
        expect(page.get_by_role("link", name="reports")).to_be_visible()
        expect(page.get_by_role("link", name="console-demo")).to_have_count(0)
        expect(page.get_by_role("heading", name="Create a database")).to_have_count(0)
        visit(page, "11-restricted")

        step("a session ends with its tab: a tab opened on its own starts at the sign-in page")
        alone = page.context.new_page()
        alone.goto(f"{BASE}/console/databases")
        expect(alone.get_by_role("heading", name="Sign in")).to_be_visible()
        alone.close()
        page.reload()
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()

    print("browser suite: ok")


if __name__ == "__main__":
    run(main)
