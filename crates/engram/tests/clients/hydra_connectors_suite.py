"""The hosted service's official Python client (PyPI hydradb-sdk), unchanged, driving engram's
connectors: the catalog, every method of its `connectors` client (create, list, get, update,
delete, discovery before and after creating, configure, resources, pause, resume, status, sync)
and the credential vault, against a folder on this machine (ENGRAM_FOLDER, under the server's
folder roots) and an RSS feed served here by a real HTTP server behind a bearer token.

Run by the end-to-end test `clients::official_python_client_drives_connectors`, which starts the
server and passes ENGRAM_URL, ENGRAM_KEY, ENGRAM_OTHER_KEY and ENGRAM_FOLDER. Every step asserts
what came back.
"""

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from suite import eventually, raises, step
from hydra_db import HydraDB

URL = os.environ["ENGRAM_URL"]
client = HydraDB(base_url=URL, token=os.environ["ENGRAM_KEY"], timeout=30)
other = HydraDB(base_url=URL, token=os.environ["ENGRAM_OTHER_KEY"], timeout=30)
FOLDER = os.environ["ENGRAM_FOLDER"]
TOKEN = {"value": "feed-token-1"}

FEED = """<?xml version="1.0"?><rss version="2.0"><channel><title>Ops notes</title>
<link>https://example.com</link><description>notes</description>
<item><guid>n1</guid><title>Backups</title><description>Backups run nightly at 02:00 UTC.</description></item>
<item><guid>n2</guid><title>On-call</title><description>The on-call rotation changes on Mondays.</description></item>
</channel></rss>"""


class Feed(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.headers.get("Authorization") != f"Bearer {TOKEN['value']}":
            self.send_response(401)
            self.end_headers()
            return
        body = FEED.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/rss+xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


feed_server = ThreadingHTTPServer(("127.0.0.1", 0), Feed)
threading.Thread(target=feed_server.serve_forever, daemon=True).start()
FEED_URL = f"http://127.0.0.1:{feed_server.server_address[1]}/ops.xml"


def code_of(body):
    return body.get("error", {}).get("code") if isinstance(body, dict) else body.error.code


def finished_runs(status):
    return [r for r in status.runs if r["state"] in ("succeeded", "failed")]


def after_run(connector_id, before):
    """The connector's status once a run after the first `before` has ended."""

    def done():
        status = client.connectors.status(connector_id)
        return status if len(finished_runs(status)) > before and status.sync_status == "idle" else None

    return eventually(f"a sync of {connector_id}", done)


step("databases for synced data")
client.databases.create(database="synced")
eventually("the database", lambda: client.databases.status(database="synced").data.infra.ready_for_ingestion)

step("catalog and providers")
catalog = client.catalog()
assert [c.provider for c in catalog.connectors] == ["folder", "rss", "web", "postgres", "git", "webdav", "s3", "imap", "github", "linear", "notion", "confluence", "jira", "slack", "google_drive", "gmail"], catalog
assert all(c.supported for c in catalog.connectors)
providers = client.list_providers()
assert {p.provider for p in providers.providers} == {"folder", "rss", "web", "postgres", "git", "webdav", "s3", "imap", "github", "linear", "notion", "confluence", "jira", "slack", "google_drive", "gmail"}, providers
described = client.list_providers(id="rss")
assert described.provider == "rss" and described.credential_schema["type"] == "object", described
assert any(f["filter_key"] == "additional_metadata.feed_url" for f in described.filterable_fields)
raises(404, lambda: client.list_providers(id="nope"))

step("discovery before creating, then create, get, list")
preview = client.connectors.discover_preview(provider="rss", credentials={"token": "feed-token-1", "feeds": [FEED_URL]})
assert preview.provider == "rss" and [r.id for r in preview.resources] == [FEED_URL], preview
assert preview.resources[0].name == "Ops notes" and preview.has_more is False
assert code_of(raises(422, lambda: client.connectors.discover_preview(provider="rss", credentials={"tokn": "x"}))) == "VALIDATION_ERROR"
assert code_of(raises(400, lambda: client.connectors.create(provider="nope", database="synced"))) == "INVALID_PARAMETERS"
feed = client.connectors.create(
    provider="rss", database="synced", collection="ops", name="Ops feed",
    credentials={"token": "feed-token-1", "feeds": [FEED_URL]},
    provider_account_scope="ops", sync_interval_seconds=600, custom_instructions="Summaries only.",
)
assert feed.provider == "rss" and feed.database == "synced" and feed.tenant_id == "synced", feed
assert feed.collection == "ops" and feed.sync_interval_seconds == 600 and feed.lifecycle == "pending_setup", feed
assert "feed-token-1" not in feed.json(), "credentials never come back"
folder = client.connectors.create(provider="folder", tenant_id="synced", name="Runbooks")
assert folder.database == "synced" and folder.sync_interval_seconds == 3600, folder
got = client.connectors.get(feed.connector_id)
assert got.connector_id == feed.connector_id and got.name == "Ops feed" and got.custom_instructions == "Summaries only."
listed = client.connectors.list()
assert {c.connector_id for c in listed.connectors} == {feed.connector_id, folder.connector_id}, listed
assert [c.connector_id for c in client.connectors.list(provider="folder").connectors] == [folder.connector_id]
assert listed.connector_limit.count == 2
assert other.connectors.list().connectors == []
raises(404, lambda: other.connectors.get(feed.connector_id))

step("update: interval bounds, instructions")
updated = client.connectors.update(feed.connector_id, sync_interval_seconds=120, custom_instructions="")
assert updated.sync_interval_seconds == 120 and updated.custom_instructions_updated is True, updated
assert updated.min_sync_interval_seconds == 60 and updated.max_sync_interval_seconds == 604800, updated
assert code_of(raises(400, lambda: client.connectors.update(feed.connector_id, sync_interval_seconds=5))) == "INVALID_PARAMETERS"
assert client.connectors.update(feed.connector_id, sync_interval_seconds=0).sync_interval_seconds == 3600

step("discover and configure: the first sync runs")
found = client.connectors.discover(folder.connector_id)
assert FOLDER in [r.id for r in found.resources], found
configured = client.connectors.configure(
    folder.connector_id,
    resources=[{"resource_id": FOLDER, "name": "Runbooks", "additional_metadata": {"kind": "runbook"}}],
)
assert configured.configured == 1 and configured.backfill is True, configured
status = after_run(folder.connector_id, 0)
assert status.status == "healthy" and status.lifecycle == "active", status
assert status.resources[0].status == "ok" and status.resources[0].last_row_count == 2, status
assert status.error is None
resources = client.connectors.list_resources(folder.connector_id).resources
assert [r.resource_id for r in resources] == [FOLDER] and resources[0].provider_cursor, resources
assert resources[0].additional_metadata == {"kind": "runbook"}

step("resources: create one with an access rule, sync by hand, query as principals")
made = client.connectors.create_resource(
    feed.connector_id, resource_id=FEED_URL, display_name="Ops", metadata={}, acl=["ops@example.com"],
)
assert made.resource_id == FEED_URL and made.display_name == "Ops" and made.acl == ["ops@example.com"], made
raises(400, lambda: client.connectors.update_resource_acl(feed.connector_id, FEED_URL, request={}))
status = after_run(feed.connector_id, 0)
assert status.runs[0]["added"] == 2, status
run = client.connectors.sync(feed.connector_id)
assert run.run_id and run.workflow_id == run.run_id, run
status = after_run(feed.connector_id, 1)
assert status.runs[0]["run_id"] == run.run_id and status.runs[0]["added"] == 0, status

step("what was synced is found, filtered by connector and by who may read it")
eventually("the entries indexed", lambda: all(
    s.indexing_status == "completed"
    for s in client.context.status(database="synced", collection="ops",
                                   ids=[x.id for x in client.context.list(database="synced", collection="ops").data.sources]).data.statuses
))
ask = dict(database="synced", collection="ops", query="when do backups run?",
           metadata_filters={"additional_metadata": {"connector_id": feed.connector_id}})
hit = client.query(**ask, acl=["ops@example.com"]).data.chunks[0]
assert "02:00" in hit.chunk_content, hit
assert hit.additional_metadata["provider"] == "rss" and hit.additional_metadata["connector_id"] == feed.connector_id, hit
assert hit.additional_metadata["acl"] == ["ops@example.com"], hit
assert client.query(**ask, acl=["eve@example.com"]).data.chunks == []
ruled = client.connectors.update_resource_acl(feed.connector_id, FEED_URL, request={"acl": ["__public__", "x@example.com"]})
assert ruled["acl"] == ["__public__"], ruled
status = after_run(feed.connector_id, 2)
assert status.runs[0]["updated"] == 2, status
eventually("public to everyone", lambda: client.query(**ask, acl=["eve@example.com"]).data.chunks)

step("credential vault: names, reveal, update")
vault = client.connectors.list_connector_credentials()
assert vault.count == 1 and vault.credentials[0].connector_id == feed.connector_id, vault
assert sorted(vault.credentials[0].fields) == ["feeds", "token"] and "feed-token-1" not in vault.json()
revealed = client.connectors.reveal_a_connector_credential_value(feed.connector_id, field="token")
assert revealed.value == "feed-token-1" and revealed.provider == "rss", revealed
raises(404, lambda: other.connectors.reveal_a_connector_credential_value(feed.connector_id, field="token"))
raises(403, lambda: client.connectors.rotate_a_connectors_stored_o_auth_refresh_token_internal_use_only(
    feed.connector_id, request={"refresh_token": "x"}))

step("revoked credentials: reconnect, then fixed through the vault")
TOKEN["value"] = "feed-token-2"
client.connectors.sync(feed.connector_id)
status = after_run(feed.connector_id, 3)
assert status.lifecycle == "reconnect" and status.status == "failed" and status.error.action, status
assert client.connectors.get(feed.connector_id).needs_reauth is True
assert client.connectors.update_connector_credentials(feed.connector_id, credentials={"token": "feed-token-2"}).updated
status = after_run(feed.connector_id, 4)
assert status.lifecycle == "active" and status.status == "healthy", status
assert client.connectors.reveal_a_connector_credential_value(feed.connector_id, field="token").value == "feed-token-2"

step("pause, resume, delete a resource, delete connectors")
paused = client.connectors.pause(feed.connector_id)
assert paused.paused is True and paused.paused_at, paused
assert code_of(raises(409, lambda: client.connectors.sync(feed.connector_id))) == "CONNECTOR_PAUSED"
assert client.connectors.status(feed.connector_id).status == "paused"
resumed = client.connectors.resume(feed.connector_id)
assert resumed.paused is False and resumed.paused_at is None, resumed
gone = client.connectors.delete_resource(feed.connector_id, FEED_URL)
assert gone.deleted is True and gone.resource_id == FEED_URL, gone
assert client.connectors.list_resources(feed.connector_id).resources == []
for connector in (feed, folder):
    deleted = client.connectors.delete(connector.connector_id)
    assert deleted.deleted is True and deleted.connector_id == connector.connector_id, deleted
raises(404, lambda: client.connectors.get(feed.connector_id))
assert client.connectors.list().connectors == []
assert client.context.list(database="synced", collection="ops").data.total == 2, "synced items stay"

print("hydra connectors suite: all steps passed", flush=True)
