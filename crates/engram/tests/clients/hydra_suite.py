"""The hosted service's official Python client (PyPI hydradb-sdk, pinned in scripts/setup.sh),
unchanged, against a running engram: every method of its databases, context, query, webhooks
(but the Supabase connector hook, which comes with connectors) and feedback clients, and its
helpers.

Run by the end-to-end test `clients::official_python_client_works_unchanged`, which starts the
server and passes ENGRAM_URL, ENGRAM_KEY (organization A), ENGRAM_OTHER_KEY (organization B) and
ENGRAM_DOCX (a Word file). Every step asserts what came back, not only that nothing was raised.
"""

import base64
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from suite import eventually, raises, step
from hydra_db import HydraDB
from hydra_db.helpers import build_string, verify_webhook_signature

URL = os.environ["ENGRAM_URL"]
client = HydraDB(base_url=URL, token=os.environ["ENGRAM_KEY"], timeout=30)
other = HydraDB(base_url=URL, token=os.environ["ENGRAM_OTHER_KEY"], timeout=30)
DOCX = open(os.environ["ENGRAM_DOCX"], "rb").read()


def code_of(body):
    if isinstance(body, dict):
        return body.get("error", {}).get("code")
    return body.error.code


# A webhook receiver on loopback that records every delivery; `fail` makes it answer 500.
received = []
receiver_state = {"fail": False}


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if receiver_state["fail"]:
            self.send_response(500)
            self.end_headers()
            return
        received.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
threading.Thread(target=receiver.serve_forever, daemon=True).start()
HOOK = f"http://127.0.0.1:{receiver.server_address[1]}/hook"


def deliveries_for(doc_id):
    return [(h, b) for h, b in received if json.loads(b).get("id") == doc_id]


step("databases: create, duplicate, list, status")
created = client.databases.create(
    database="clients",
    database_metadata_schema=[{"name": "team", "data_type": "VARCHAR", "enable_match": True}],
)
assert created.data.database == "clients" and created.data.status == "accepted", created
assert code_of(raises(409, lambda: client.databases.create(database="clients"))) == "DATABASE_ALREADY_EXISTS"
client.databases.create(database="spare")
eventually(
    "the database to be ready",
    lambda: client.databases.status(database="clients").data.infra.ready_for_ingestion,
)
listed = client.databases.list().data
assert sorted(listed.databases) == ["clients", "spare"], listed
assert client.databases.collections(database="clients").data.collections == ["clients"]
assert other.databases.list().data.databases == [], "another organization sees none of them"
assert code_of(raises(404, lambda: other.databases.status(database="clients"))) == "DATABASE_NOT_FOUND"

step("databases: metadata schema")
added = client.databases.update_metadata_schema(
    database="clients", add_fields=[{"name": "tier", "data_type": "INT64"}]
)
assert added.added_fields == ["tier"] and added.database == "clients", added
schema = client.databases.get_metadata_schema(database="clients").data
assert [f.name for f in schema.fields] == ["team", "tier"], schema
raises(422, lambda: client.databases.update_metadata_schema(
    database="clients", add_fields=[{"name": "tier", "data_type": "INT64"}]))

step("databases: instructions")
instructions = client.databases.update_instructions(
    database="clients",
    custom_instructions="Keep product names exact.",
    collections={"people": "Dates matter.", "drafts": "Ignore drafts."},
)
assert instructions.custom_instructions == "Keep product names exact.", instructions
client.databases.update_instructions(database="clients", collections={"drafts": None})
instructions = client.databases.get_instructions(database="clients")
assert instructions.collections == {"people": "Dates matter."}, instructions
assert instructions.custom_instructions == "Keep product names exact."
raises(400, lambda: client.databases.update_instructions(database="clients", custom_instructions="x" * 4001))
raises(400, lambda: client.databases.update_instructions(database="clients", collections={"bad name!": "x"}))
assert code_of(raises(404, lambda: other.databases.get_instructions(database="clients"))) == "DATABASE_NOT_FOUND"

step("webhooks: register with a generated secret")
assert client.webhooks.get().data.registered is False
registered = client.webhooks.register(
    url=HOOK, event_types=["indexing.status_changed"], generate_signing_secret=True
).data
secret = registered.signing_secret
assert secret and registered.url == HOOK, registered
state = client.webhooks.get().data
assert state.registered and state.signing_secret_configured and state.url == HOOK, state

step("context: ingest app knowledge, a file and memories")
app_knowledge = [
    {
        "id": "k1",
        "title": "Thorium reactors",
        "content": {"text": "The alpha reactor runs on thorium and needs no enrichment."},
        "metadata": {"team": "ops", "tier": 1},
    },
    {
        "id": "k2",
        "title": "Salt cooling",
        "content": {"text": "The beta reactor is cooled by molten fluoride salt."},
        "metadata": {"team": "research"},
        "additional_metadata": {"owner": "kim"},
    },
]
ingested = client.context.ingest(
    database="clients", type="knowledge", app_knowledge=json.dumps(app_knowledge)
).data
assert ingested.success_count == 2 and [r.id for r in ingested.results] == ["k1", "k2"], ingested
doc = client.context.ingest(
    database="clients",
    type="knowledge",
    documents=[("report.docx", DOCX, "application/vnd.openxmlformats-officedocument.wordprocessingml.document")],
    document_metadata=json.dumps([{"id": "report", "metadata": {"team": "ops"}}]),
).data
assert [r.id for r in doc.results] == ["report"] and doc.results[0].filename == "report.docx", doc
memories = [
    {"id": "m1", "text": "I moved to Lisbon in March and I love green tea.", "user_name": "ana", "infer": True},
    {
        "id": "m2",
        "user_assistant_pairs": [{"user": "What is my sister's name?", "assistant": "Your sister is Rita."}],
        "user_name": "ana",
    },
]
mem = client.context.ingest(
    database="clients", collection="people", type="memory", memories=json.dumps(memories)
)
assert mem.data.success_count == 2 and mem.meta.collection == "people", mem

step("context: a client's own graph, relations and subgraph")
graph_payload = {"k9": {
    "entities": {"w": {"name": "Nora Vance", "type": "PERSON"}, "n": {"name": "Pump Manual"}},
    "relations": [
        {"source": "w", "target": "n", "predicate": "wrote", "context": "Nora Vance wrote the pump manual."},
        {"source": "w", "target": "x", "predicate": "reads"},
    ],
}}
graphed = client.context.ingest(
    database="clients", type="knowledge", graph_payload=json.dumps(graph_payload),
    app_knowledge=json.dumps([{
        "id": "k9", "content": {"text": "Nora Vance wrote the pump manual."}, "relations": {"ids": ["k1"]},
    }]),
)
item = graphed.data.results[0]
assert item.relations_created == 1 and "`x` names no entity" in item.relations_error, graphed
eventually("k9 to be indexed", lambda: client.context.status(database="clients", id="k9").data.statuses[0].indexing_status == "completed")
relations = client.context.relations(database="clients", id="k9").data
assert [(r.source.name, r.target.name) for r in relations.relations] == [("nora vance", "pump manual")], relations
evidence = relations.relations[0].relations[0]
assert evidence.canonical_predicate == "WROTE" and relations.is_truncated is False, relations
sub = client.context.subgraph(database="clients", id="k9", depth=1).data
assert sub.seed_source_id == "k9" and [s.source_id for s in sub.sources] == ["k9", "k1"], sub
assert sub.sources[1].depth == 1 and sub.sources[1].discovered_via == "k9", sub
assert [(r.source.entity_id, r.target.entity_id) for r in sub.relations] == [("k9", "k1")], sub
assert any(r.source.name == "nora vance" for r in sub.auxiliary_relations), sub
assert client.context.subgraph(database="clients", id="missing").data.sources == []
listed_raw = httpx.post(
    f"{URL}/context/list", json={"database": "clients", "colection": "typo"},
    headers={"Authorization": f"Bearer {os.environ['ENGRAM_KEY']}"},
).json()
assert listed_raw["meta"]["ignored_parameters"] == [{"parameter": "colection", "reason": "not a field of this route"}], listed_raw["meta"]
client.context.delete(database="clients", ids=["k9"])

step("context: status until completed")
ids = ["k1", "k2", "report"]
eventually(
    "knowledge to be indexed",
    lambda: all(
        s.indexing_status == "completed"
        for s in client.context.status(database="clients", ids=ids).data.statuses
    ),
)
eventually(
    "memories to be indexed",
    lambda: all(
        s.indexing_status == "completed"
        for s in client.context.status(database="clients", collection="people", ids=["m1", "m2"]).data.statuses
    ),
)
assert code_of(raises(404, lambda: client.context.status(database="clients", id="missing"))) == "FILE_NOT_FOUND"

step("webhooks: signed deliveries the helper verifies")
eventually("a completed delivery for k1", lambda: any(
    json.loads(b)["status"] == "completed" for _, b in deliveries_for("k1")))
for headers, body in received:
    signature = headers.get("x-service-signature")
    assert verify_webhook_signature(secret, body, signature), (headers, body)
    assert not verify_webhook_signature("wrong-secret-0000", body, signature)
history = client.webhooks.list_deliveries(limit=100).data
assert history.count >= 3 and history.deliveries, history
first = history.deliveries[0]
# The newest delivery may still be pending (or waiting on a retry) when it is listed.
one = eventually("the newest delivery delivered", lambda: (
    (d := client.webhooks.get_delivery(first.delivery_id).data).status == "delivered" and d))
assert one.delivery_id == first.delivery_id and one.status == "delivered", one
assert code_of(raises(404, lambda: client.webhooks.get_delivery("dlv_unknown"))) == "DELIVERY_NOT_FOUND"
before = len(received)
tested = client.webhooks.test().data
assert tested.delivered is True or tested.status_code == 200, tested
eventually("the test delivery", lambda: len(received) > before)

step("webhooks: a failed delivery retried by hand")
receiver_state["fail"] = True
client.context.ingest(
    database="clients", type="knowledge",
    app_knowledge=json.dumps([{"id": "k3", "title": "Spare", "content": {"text": "A spare note about pumps."}}]),
)
failed = eventually("a permanently failed delivery", lambda: [
    d for d in client.webhooks.list_deliveries(status="permanently_failed").data.deliveries if d.doc_id == "k3"
])
receiver_state["fail"] = False
retried = client.webhooks.retry_delivery(failed[0].delivery_id).data
assert retried.delivery_id == failed[0].delivery_id, retried
eventually("the retried delivery", lambda: deliveries_for("k3"))

step("webhooks: own secret, then none")
client.webhooks.set_signing_secret(signing_secret="an-own-secret-of-20c")
before = len(received)
client.webhooks.test()
headers, body = eventually("a delivery signed with the own secret", lambda: received[before:] and received[-1])
assert verify_webhook_signature("an-own-secret-of-20c", body, headers.get("x-service-signature"))
client.webhooks.clear_signing_secret()
assert client.webhooks.get().data.signing_secret_configured is False

step("context: list sources and memories")
sources = client.context.list(database="clients").data
assert sources.total == 4 and {s.id for s in sources.sources} == {"k1", "k2", "k3", "report"}, sources
assert all(s.database == "clients" and s.collection == "clients" for s in sources.sources)
only = client.context.list(database="clients", ids=["k2"]).data
assert [s.id for s in only.sources] == ["k2"] and only.sources[0].additional_metadata == {"owner": "kim"}
paged = client.context.list(database="clients", page=2, page_size=3).data
assert paged.pagination.page == 2 and len(paged.sources) == 1, paged
people = client.context.list(database="clients", collection="people", type="memory").data
assert {m.memory_id for m in people.user_memories} == {"m1", "m2"}, people
inferred = {m.memory_id: m.inferred_content for m in people.user_memories}
assert inferred == {"m1": "ana lives in Lisbon. ana likes green tea.", "m2": ""}, people
seen_memory = client.context.inspect(database="clients", collection="people", id="m1").data
assert seen_memory.inferred_content == inferred["m1"], seen_memory

step("context: chunks of a source, and by id")
chunks = client.context.chunks(database="clients", id="k1").data
assert len(chunks.chunks) == 1 and "thorium" in chunks.chunks[0].chunk_content, chunks
chunk_id = chunks.chunks[0].chunk_uuid
by_id = client.context.chunks(database="clients", chunk_ids=[chunk_id, "nope"]).data
assert [c.source_id for c in by_id.chunks] == ["k1"] and by_id.missing_chunk_ids == ["nope"], by_id
assert code_of(raises(404, lambda: client.context.chunks(database="clients", id="missing"))) == "SOURCE_NOT_FOUND"
noted = httpx.get(
    f"{URL}/context/status", params={"database": "clients", "ids": "k1", "idz": "k2"},
    headers={"Authorization": f"Bearer {os.environ['ENGRAM_KEY']}"},
).json()["meta"]
assert noted["ignored_parameters"] == [{"parameter": "idz", "reason": "not a parameter of this route"}], noted

step("query: hybrid, filters, memories, the helper")
answer = client.query(database="clients", query="which reactor runs on thorium?")
assert answer.data.chunks[0].id == "k1", answer.data.chunks
assert json.loads(answer.data.chunks[0].layout) == {}
assert answer.meta.request_id.startswith("req_")
text = build_string(answer.data)
assert "thorium" in text and "Thorium reactors" in text, text
filtered = client.query(database="clients", query="reactor", metadata_filters={"team": "research"})
assert [c.id for c in filtered.data.chunks] == ["k2"], filtered.data.chunks
recalled = client.query(database="clients", collection="people", type="memory", query="which city did ana move to?")
assert recalled.data.chunks and recalled.data.chunks[0].id == "m1", recalled.data.chunks
assert code_of(raises(404, lambda: client.query(database="nowhere", query="x"))) == "DATABASE_NOT_FOUND"
assert answer.data.llm_prompt and "Thorium reactors" in answer.data.llm_prompt

step("query: ids, titles, neighbouring chunks, response formats, ignored parameters")
scoped = client.query(database="clients", query="reactor", ids=["k2"])
assert [c.id for c in scoped.data.chunks] == ["k2"], scoped.data.chunks
titled = client.query(database="clients", query="reactor", titles=["THORIUM reactors", "nope"])
assert [c.id for c in titled.data.chunks] == ["k1"], titled.data.chunks
both = client.query(database="clients", query="reactor", ids=["k2"], titles=["Thorium reactors"])
assert both.data.chunks == [], "ids and titles are ANDed"
manual = "\n\n".join(
    f"Section {i}. " + f"Pump {i} must be inspected every {i + 2} weeks by the duty engineer. " * 25
    for i in range(8)
)
client.context.ingest(
    database="clients", type="knowledge",
    app_knowledge=json.dumps([{"id": "manual", "title": "Pump manual", "content": {"text": manual}}]),
)
eventually("the manual", lambda: client.context.status(database="clients", ids=["manual"]).data.statuses[0].indexing_status == "completed")
manual_chunks = client.context.chunks(database="clients", id="manual").data.chunks
assert len(manual_chunks) >= 3, len(manual_chunks)
near = client.query(database="clients", query="pump 4 inspected weeks", ids=["manual"], max_results=1, num_related_chunks=1)
hit = near.data.chunks[0]
position = [c.chunk_uuid for c in manual_chunks].index(hit.chunk_uuid)
expected = [c.chunk_uuid for c in manual_chunks[max(0, position - 1):position + 2] if c.chunk_uuid != hit.chunk_uuid]
assert hit.extra_context_ids == expected, (hit.extra_context_ids, expected)
assert set(near.data.additional_context) == set(expected), near.data.additional_context
structured = client.query(database="clients", query="thorium", response_format="structured")
assert structured.data.llm_prompt is None and structured.data.chunks[0].id == "k1"
raw = httpx.post(
    f"{URL}/query",
    json={"database": "clients", "query": "thorium", "response_format": "markdown", "not_a_field": 1},
    headers={"Authorization": f"Bearer {os.environ['ENGRAM_KEY']}"},
).json()
assert raw["data"].startswith("# Context") and "Thorium reactors" in raw["data"], raw
assert {"parameter": "not_a_field", "reason": "not a field of this route"} in raw["meta"]["ignored_parameters"]
odd = client.query(database="clients", query="thorium", temporal_now="2023-01-01", code_search=True)
ignored = {p["parameter"] for p in odd.meta.ignored_parameters}
assert ignored == {"temporal_now", "code_search"}, odd.meta
raises(400, lambda: client.query(database="clients", query="x", num_related_chunks=11))

step("query: temporal reasoning")
dated = [
    {"id": "t1", "text": "I went to the pottery workshop yesterday with my cousin.", "user_name": "ana",
     "timestamp": "2023-07-15T10:00:00Z"},
    {"id": "t2", "text": "Pottery is a calm hobby and the workshop is near the station.", "user_name": "ana",
     "timestamp": "2023-06-01"},
    {"id": "t3", "text": "In August 2023 I started learning the cello.", "user_name": "ana",
     "timestamp": "2023-09-02"},
]
client.context.ingest(database="clients", collection="diary", type="memory", memories=json.dumps(dated))
eventually("dated memories", lambda: all(
    s.indexing_status == "completed"
    for s in client.context.status(database="clients", collection="diary", ids=["t1", "t2", "t3"]).data.statuses))
when = client.query(database="clients", collection="diary", type="memory", temporal_reasoning=True,
                    query="When did ana go to the pottery workshop?")
assert when.data.temporal_filter.mode == "when" and when.data.temporal_filter.applied, when.data.temporal_filter
assert when.data.chunks[0].id == "t1", when.data.chunks
facts = [f for f in when.data.temporal_facts if f.source_id == "t1"]
assert [f.evidence_phrase for f in facts] == ["yesterday"], when.data.temporal_facts
raw_when = httpx.post(
    f"{URL}/query",
    json={"database": "clients", "collection": "diary", "type": "memory", "temporal_reasoning": True,
          "query": "When did ana go to the pottery workshop?"},
    headers={"Authorization": f"Bearer {os.environ['ENGRAM_KEY']}"},
).json()["data"]
fact = next(f for f in raw_when["temporal_facts"] if f["source_id"] == "t1")
assert fact["evidence_phrase"] == "yesterday" and fact["start_date"] == "2023-07-14", fact
assert fact["anchor_date"] == "2023-07-15" and fact["date_precision"] == "day", fact
assert '"yesterday" = 2023-07-14' in raw_when["llm_prompt"], raw_when["llm_prompt"]
ranged = client.query(database="clients", collection="diary", type="memory", temporal_reasoning=True,
                      temporal_now="2023-09-10", query="what did ana start last month?")
assert ranged.data.temporal_filter.mode == "range", ranged.data.temporal_filter
assert ranged.data.chunks[0].id == "t3", ranged.data.chunks
plain = client.query(database="clients", collection="diary", type="memory", query="When did ana go to the pottery workshop?")
assert plain.data.temporal_facts is None and plain.data.temporal_filter is None
raises(400, lambda: client.query(database="clients", query="x", temporal_reasoning=True, temporal_now="whenever"))

step("context: inspect, download links, expiry")
seen = client.context.inspect(database="clients", id="report").data
assert seen.content_type.endswith("wordprocessingml.document"), seen.content_type
assert base64.b64decode(seen.content_base64) == DOCX and seen.size_bytes == len(DOCX)
assert seen.content.strip(), "the extracted text"
download = httpx.get(seen.presigned_url)
assert download.status_code == 200 and download.content == DOCX, download
app_seen = client.context.inspect(database="clients", id="k1").data
assert app_seen.content == app_knowledge[0]["content"]["text"] and app_seen.content_base64 is None
short = client.context.inspect(database="clients", id="k1", expiry_seconds=1).data
time.sleep(1.5)
assert httpx.get(short.presigned_url).status_code == 403, "an expired link"
assert httpx.get(seen.presigned_url + "0").status_code == 403, "a forged link"
raises(400, lambda: client.context.inspect(database="clients", id="k1", expiry_seconds=0))
assert code_of(raises(404, lambda: client.context.inspect(database="clients", id="missing"))) == "SOURCE_NOT_FOUND"
assert code_of(raises(404, lambda: other.context.inspect(database="clients", id="k1"))) == "DATABASE_NOT_FOUND"

step("context: metadata edits take effect in filters at once")
edited = client.context.update_source_metadata(
    "k2", database="clients", database_metadata={"team": "ops"}, additional_metadata={"owner": None}
).data
assert edited.updated and edited.database_metadata_keys == ["team"] and edited.chunk_rows_matched == 1, edited
ops = client.query(database="clients", query="reactor", metadata_filters={"team": "ops"})
assert {"k1", "k2"} <= {c.id for c in ops.data.chunks} and "manual" not in {c.id for c in ops.data.chunks}, ops.data.chunks
assert client.context.list(database="clients", ids=["k2"]).data.sources[0].additional_metadata == {}
raises(400, lambda: client.context.update_source_metadata("k2", database="clients", document_metadata={"a": 1}))
raises(422, lambda: client.context.update_source_metadata("k2", database="clients", database_metadata={"tier": "high"}))
assert code_of(raises(404, lambda: client.context.update_source_metadata(
    "missing", database="clients", database_metadata={"team": "ops"}))) == "SOURCE_NOT_FOUND"
ruled = client.context.update_source_metadata("k2", database="clients", acl=["group:ops"]).data
assert ruled.acl_updated and ruled.additional_metadata["acl"] == ["group:ops"], ruled
assert client.context.chunks(database="clients", id="k2", acl=["eve@example.com"]).data.chunks == []
assert client.context.chunks(database="clients", id="k2", acl=["eve@example.com", "group:ops"]).data.chunks
assert client.context.update_source_metadata("k2", database="clients", acl=["__public__"]).data.acl_updated

step("feedback: recorded against the answer's request id")
feedback = client.feedback.submit(
    request_id=answer.meta.request_id,
    database="clients",
    rating="positive",
    feedback="the first hit answered it",
    ground_truth={"answer": "the alpha reactor", "source_ids": ["k1"]},
    source="agent",
    metadata={"run": "suite"},
).data
assert feedback.recorded and feedback.request_id == answer.meta.request_id, feedback
read = httpx.get(
    f"{URL}/feedback", params={"request_id": answer.meta.request_id},
    headers={"Authorization": f"Bearer {os.environ['ENGRAM_KEY']}"},
).json()["data"]["feedback"]
assert [f["feedback_id"] for f in read] == [feedback.feedback_id], read
assert read[0]["body"]["ground_truth"]["source_ids"] == ["k1"]
raises(422, lambda: client.feedback.submit(request_id=answer.meta.request_id, rating="great", feedback="x"))
raises(400, lambda: client.feedback.submit(request_id=answer.meta.request_id, collection="people", feedback="x"))

step("databases: rename keeps everything")
renamed = client.databases.rename(database="clients", new_name="clients2").data
assert renamed.database == "clients2" and renamed.old_database == "clients", renamed
again = client.query(database="clients2", query="which reactor runs on thorium?")
assert again.data.chunks[0].id == "k1"
assert code_of(raises(404, lambda: client.databases.status(database="clients"))) == "DATABASE_NOT_FOUND"
assert code_of(raises(409, lambda: client.databases.rename(database="clients2", new_name="spare"))) == "DATABASE_ALREADY_EXISTS"
raises(400, lambda: client.databases.rename(database="clients2", new_name=""))
raises(400, lambda: client.databases.rename(database="clients2", new_name="no spaces allowed"))
assert code_of(raises(404, lambda: other.databases.rename(database="clients2", new_name="mine"))) == "DATABASE_NOT_FOUND"
assert client.context.status(database="clients2", ids=["k1"]).data.statuses[0].indexing_status == "completed"

step("context: delete sources; databases: delete a collection, stats, delete")
deleted = client.context.delete(database="clients2", ids=["k3", "missing"]).data
assert deleted.deleted_count == 1 and [r.deleted for r in deleted.results] == [True, False], deleted
gone = client.databases.delete_collection(database="clients2", collection="people").data
assert gone.collection == "people" and gone.status == "deleted", gone
assert client.context.list(database="clients2", collection="people", type="memory").data.total == 0
stats = client.databases.stats(database="clients2").data
assert stats.memory_collection.row_count == 3 and stats.knowledge_collection.row_count >= 4, stats  # the diary stays
assert client.webhooks.delete().data.deleted is True
assert client.webhooks.get().data.registered is False
assert client.databases.delete(database="clients2").data.status == "deletion_scheduled"
assert client.databases.list().data.databases == ["spare"]

print("hydra suite: all steps passed", flush=True)
