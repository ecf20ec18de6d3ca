"""The console's webhooks and operations pages in a real browser (Debian's Chromium, headless,
driven by Playwright).

Run by `console_webhooks::the_webhooks_and_operations_pages_work_in_a_real_browser` against a
server it started (on a fast retry schedule, private addresses allowed), with: ENGRAM_BASE,
ENGRAM_KEY (organization acme, whose database `hooks` is ready), RECEIVER_URL (a webhook
receiver on loopback), CONTROL_URL (`POST /fail` makes the receiver answer 500, `POST /ok` 200),
AXE_JS, SCREENSHOTS.

Register the endpoint, send a test event, see an item's delivery succeed, make the receiver
fail, see the delivery fail and retry it, then the operations page with its plot; axe-core on
every page.
"""

import json
import os
import time
import urllib.request

from console_common import run, BASE, console_page, expect, sign_in, step, visit

RECEIVER = os.environ["RECEIVER_URL"]
CONTROL = os.environ["CONTROL_URL"]
SECRET = "browser-secret-0123456789"


def receiver(answer):
    request = urllib.request.Request(f"{CONTROL}/{answer}", data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200, response.status


def upload(page, item_id, text):
    page.goto(f"{BASE}/console/databases/hooks")
    page.get_by_label("App content").fill(json.dumps([
        {"id": item_id, "title": f"Note {item_id}", "content": {"text": text}},
    ]))
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("#upload-result")).to_contain_text("1 accepted")


def delivery_row(page, item_id):
    return page.locator("#delivery-list tbody tr", has_text=item_id)


def main():
    with console_page() as page:
        step("sign in; no endpoint yet")
        sign_in(page, os.environ["ENGRAM_KEY"])
        page.get_by_role("link", name="Webhooks").click()
        expect(page.get_by_role("heading", name="Webhooks", exact=True)).to_be_visible()
        expect(page.locator("#endpoint")).to_contain_text("No endpoint is registered")
        visit(page, "01-webhooks-empty")

        step("register the receiver, with a secret of our own")
        page.get_by_label("Endpoint URL").fill(RECEIVER)
        page.get_by_label("Set this secret").check()
        page.get_by_label("Secret (at least 16 characters").fill(SECRET)
        page.get_by_role("button", name="Register endpoint").click()
        expect(page.locator("#endpoint")).to_contain_text(RECEIVER)
        expect(page.locator("#endpoint")).to_contain_text("a signing secret is set")
        assert SECRET not in page.content(), "the secret is never shown"
        expect(page.get_by_label("Keep the current secret")).to_be_checked()
        visit(page, "02-webhooks-registered")

        step("send a test event")
        page.get_by_role("button", name="Send test event").click()
        expect(page.locator("#test-result")).to_contain_text("delivered")
        expect(page.locator("#test-result")).to_contain_text("HTTP 200")

        step("an item's event is delivered and listed")
        upload(page, "note-1", "The first note: the warehouse opens at nine.")
        page.get_by_role("link", name="Webhooks").click()
        # The history refreshes itself; the item is indexed meanwhile.
        row = delivery_row(page, "note-1")
        expect(row).to_have_attribute("data-status", "delivered", timeout=240_000)
        expect(row).to_contain_text("HTTP 200")
        expect(row.get_by_role("button", name="Retry")).to_have_count(0)
        visit(page, "03-delivered")

        step("the receiver fails: the delivery fails, with the answer shown")
        receiver("fail")
        upload(page, "note-2", "The second note: the warehouse closes at six.")
        page.get_by_role("link", name="Webhooks").click()
        failed = delivery_row(page, "note-2")
        expect(failed).to_have_attribute("data-status", "permanently_failed", timeout=240_000)
        expect(failed).to_contain_text("HTTP 500")
        expect(failed.get_by_role("button", name="Retry")).to_be_visible()
        visit(page, "04-failed")

        step("its page, and a retry once the receiver is back")
        failed.get_by_role("link").first.click()
        expect(page.locator("#delivery")).to_have_attribute("data-status", "permanently_failed")
        expect(page.locator("#delivery")).to_contain_text("HTTP 500")
        expect(page.locator("#delivery")).to_contain_text("note-2")
        visit(page, "05-delivery-failed")
        receiver("ok")
        page.get_by_role("button", name="Retry").click()
        deadline = time.time() + 60
        while page.locator("#delivery").get_attribute("data-status") != "delivered":
            assert time.time() < deadline, "the retried delivery was never delivered"
            time.sleep(0.5)
            page.reload()
        expect(page.locator("#delivery")).to_contain_text("HTTP 200")
        visit(page, "06-delivery-retried")
        page.get_by_role("link", name="← Webhooks").click()
        expect(delivery_row(page, "note-2")).to_have_attribute("data-status", "delivered")

        step("operations: the queue, the rate, the latency and the plot")
        page.get_by_role("link", name="Operations").click()
        expect(page.get_by_role("heading", name="Operations", exact=True)).to_be_visible()
        expect(page.locator("#ops-plot canvas").first).to_be_visible()
        expect(page.locator("#ops-queue")).to_contain_text("hooks")
        expect(page.locator("#ops-indexing")).to_contain_text("items completed")
        expect(page.locator("#ops-latency")).to_contain_text("Since start")
        expect(page.locator("#ops-latency")).to_contain_text("ms")
        first = page.locator("#ops-figures").get_attribute("data-t")
        # The figures refresh themselves, and the plot takes the new reading.
        expect(page.locator("#ops-figures")).not_to_have_attribute("data-t", first, timeout=20_000)
        expect(page.locator("#ops-indexing")).to_contain_text("items/min", timeout=20_000)
        series = page.evaluate("() => document.querySelectorAll('#ops-plot .u-legend tr').length")
        assert series >= 6, f"time and five series in the plot's legend, not {series}"
        visit(page, "07-operations")

    print("browser suite: ok")


if __name__ == "__main__":
    run(main)
