"""The hosted service's official Python client (PyPI hydradb-sdk), unchanged, driving a connector
of each hosted-SaaS provider on the fakes the Rust test serves: slack, github, linear, notion,
confluence, jira, google_drive and gmail. For each, through the client's `connectors` methods:
create, get, discover (the resources the fake offers), configure, the first sync (its documents
counted, listed in the database), sync now (nothing changed), status, pause (a sync refused),
resume and delete (the synced documents stay).

Run by the end-to-end test `clients::official_python_client_drives_every_hosted_provider`, which
starts the server and the fakes and passes ENGRAM_URL, ENGRAM_KEY and CASES: a JSON list of
{provider, database, credentials, resources (the ids to configure), added (the documents the
first sync adds), secrets (what must never come back)}. Every step asserts what came back.
"""

import json
import os

from suite import eventually, raises, step
from hydra_db import HydraDB

client = HydraDB(base_url=os.environ["ENGRAM_URL"], token=os.environ["ENGRAM_KEY"], timeout=30)
CASES = json.loads(os.environ["CASES"])


def code_of(body):
    return body.get("error", {}).get("code") if isinstance(body, dict) else body.error.code


def after_run(connector_id, before):
    """The connector's status once a run after the first `before` has ended."""

    def done():
        status = client.connectors.status(connector_id)
        ended = [r for r in status.runs if r["state"] in ("succeeded", "failed")]
        return status if len(ended) > before and status.sync_status == "idle" else None

    return eventually(f"a sync of {connector_id}", done, limit=30)


for case in CASES:
    provider, database, secrets = case["provider"], case["database"], case["secrets"]

    step(f"{provider}: a database, and a connector on it")
    client.databases.create(database=database)
    eventually(database, lambda: client.databases.status(database=database).data.infra.ready_for_ingestion)
    created = client.connectors.create(
        provider=provider, database=database, name=f"{provider} source", credentials=case["credentials"]
    )
    assert created.provider == provider and created.database == database, created
    assert created.lifecycle == "pending_setup", created
    assert not any(s in created.json() for s in secrets), "credentials never come back"
    connector_id = created.connector_id
    assert client.connectors.get(connector_id).name == f"{provider} source"

    step(f"{provider}: discover")
    found = client.connectors.discover(connector_id)
    offered = {r.id for r in found.resources}
    assert set(case["resources"]) <= offered, (case["resources"], offered)
    assert not any(s in found.json() for s in secrets)

    step(f"{provider}: configure; the first sync runs")
    configured = client.connectors.configure(
        connector_id, resources=[{"resource_id": rid} for rid in case["resources"]]
    )
    assert configured.configured == len(case["resources"]), configured
    status = after_run(connector_id, 0)
    assert status.status == "healthy" and status.lifecycle == "active" and status.error is None, status
    assert status.runs[0]["added"] == case["added"], (status.runs[0], case["added"])
    assert sum(r.last_row_count or 0 for r in status.resources) == case["added"], status
    assert all(r.status == "ok" for r in status.resources), status
    assert client.context.list(database=database).data.total == case["added"]

    step(f"{provider}: sync now, nothing changed")
    run = client.connectors.sync(connector_id)
    assert run.run_id and run.connector_id == connector_id, run
    status = after_run(connector_id, 1)
    assert status.runs[0]["run_id"] == run.run_id, status
    assert (status.runs[0]["added"], status.runs[0]["updated"], status.runs[0]["deleted"]) == (0, 0, 0), status

    step(f"{provider}: pause, resume, delete")
    paused = client.connectors.pause(connector_id)
    assert paused.paused is True and paused.paused_at, paused
    assert client.connectors.status(connector_id).status == "paused"
    assert code_of(raises(409, lambda: client.connectors.sync(connector_id))) == "CONNECTOR_PAUSED"
    resumed = client.connectors.resume(connector_id)
    assert resumed.paused is False and resumed.paused_at is None, resumed
    deleted = client.connectors.delete(connector_id)
    assert deleted.deleted is True and deleted.connector_id == connector_id, deleted
    raises(404, lambda: client.connectors.get(connector_id))
    assert client.context.list(database=database).data.total == case["added"], "synced items stay"

assert client.connectors.list().connectors == []
print(f"hydra hosted suite: all steps passed for {len(CASES)} providers", flush=True)
