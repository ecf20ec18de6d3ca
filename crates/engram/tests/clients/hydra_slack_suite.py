"""The hosted service's official Python client (PyPI hydradb-sdk), unchanged, driving a connector
of a hosted-SaaS provider: `slack`, on the Slack fake the Rust test serves (a public channel with a
thread and a message, a private channel with a message, both with the bot in them, and a channel
the bot is not in). Through the client's `connectors` methods: create, discover (the channels),
configure, sync now, status (the documents counted), pause, resume and delete.

Run by the end-to-end test `clients::official_python_client_drives_a_slack_connector`, which starts
the server and the fake and passes ENGRAM_URL, ENGRAM_KEY, SLACK_API_URL and SLACK_TOKEN. Every
step asserts what came back.
"""

import os

from suite import eventually, raises, step
from hydra_db import HydraDB

client = HydraDB(base_url=os.environ["ENGRAM_URL"], token=os.environ["ENGRAM_KEY"], timeout=30)
CREDENTIALS = {"token": os.environ["SLACK_TOKEN"], "api_url": os.environ["SLACK_API_URL"]}


def code_of(body):
    return body.get("error", {}).get("code") if isinstance(body, dict) else body.error.code


def after_run(connector_id, before):
    """The connector's status once a run after the first `before` has ended."""

    def done():
        status = client.connectors.status(connector_id)
        ended = [r for r in status.runs if r["state"] in ("succeeded", "failed")]
        return status if len(ended) > before and status.sync_status == "idle" else None

    return eventually(f"a sync of {connector_id}", done, limit=30)


step("a database for the workspace")
client.databases.create(database="chat")
eventually("the database", lambda: client.databases.status(database="chat").data.infra.ready_for_ingestion)

step("create a slack connector")
slack = client.connectors.create(provider="slack", database="chat", name="Workspace", credentials=CREDENTIALS)
assert slack.provider == "slack" and slack.database == "chat" and slack.lifecycle == "pending_setup", slack
assert CREDENTIALS["token"] not in slack.json(), "credentials never come back"
assert client.connectors.get(slack.connector_id).name == "Workspace"

step("discover the channels the bot is in")
found = client.connectors.discover(slack.connector_id)
channels = sorted((r.name, r.id) for r in found.resources)
assert [name for name, _ in channels] == ["#general", "#leads"], found
assert all(rid.startswith("channel:") for _, rid in channels), found
assert CREDENTIALS["token"] not in found.json()

step("configure both channels: the first sync runs")
configured = client.connectors.configure(
    slack.connector_id, resources=[{"resource_id": rid, "name": name} for name, rid in channels]
)
assert configured.configured == 2, configured
status = after_run(slack.connector_id, 0)
assert status.status == "healthy" and status.lifecycle == "active" and status.error is None, status
assert status.runs[0]["added"] == 3, "a thread and a message in #general, a message in #leads"
counted = {r.display_name: r.last_row_count for r in status.resources}
assert counted == {"#general": 2, "#leads": 1}, status
assert all(r.status == "ok" for r in status.resources), status
assert client.context.list(database="chat").data.total == 3

step("sync now: nothing changed")
run = client.connectors.sync(slack.connector_id)
assert run.run_id and run.connector_id == slack.connector_id, run
status = after_run(slack.connector_id, 1)
assert status.runs[0]["run_id"] == run.run_id, status
assert (status.runs[0]["added"], status.runs[0]["updated"], status.runs[0]["deleted"]) == (0, 0, 0), status

step("pause, resume")
paused = client.connectors.pause(slack.connector_id)
assert paused.paused is True and paused.paused_at, paused
assert client.connectors.status(slack.connector_id).status == "paused"
assert code_of(raises(409, lambda: client.connectors.sync(slack.connector_id))) == "CONNECTOR_PAUSED"
resumed = client.connectors.resume(slack.connector_id)
assert resumed.paused is False and resumed.paused_at is None, resumed
assert client.connectors.sync(slack.connector_id).run_id
after_run(slack.connector_id, 2)

step("delete")
deleted = client.connectors.delete(slack.connector_id)
assert deleted.deleted is True and deleted.connector_id == slack.connector_id, deleted
raises(404, lambda: client.connectors.get(slack.connector_id))
assert client.connectors.list().connectors == []
assert client.context.list(database="chat").data.total == 3, "synced items stay"

print("hydra slack suite: all steps passed", flush=True)
