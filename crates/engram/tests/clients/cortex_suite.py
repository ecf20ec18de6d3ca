"""The hosted service's legacy Python client (PyPI usecortex-ai, pinned in scripts/setup.sh),
unchanged, against a running engram's legacy routes: tenants, upload (files, app sources with
their old field names, memories), verify, list, fetch, recall, delete, and raw-embedding
databases, and `recall.qna` (answered by the real local model when ENGRAM_QNA=model, else
refused naming `[llm]`). Not driven: `key` (keys are made with `engram keys create`), `fetch.graph_relations_by_source_id` (the knowledge graph) and
`metrics` (with the metrics endpoint).

Run by the end-to-end test `clients::legacy_python_client_works_unchanged` with ENGRAM_URL,
ENGRAM_KEY, ENGRAM_OTHER_KEY (another organization) and ENGRAM_QNA. Every step asserts what
came back.
"""

import json
import os
import time

import httpx
from suite import eventually, raises, step
from usecortex_ai import CortexAI

URL = os.environ["ENGRAM_URL"]
client = CortexAI(base_url=URL, token=os.environ["ENGRAM_KEY"], timeout=30)
other = CortexAI(base_url=URL, token=os.environ["ENGRAM_OTHER_KEY"], timeout=30)


def code_of(body):
    return body["detail"]["error_code"]


step("tenants: create, ready, sub-tenants")
created = client.tenant.create(
    tenant_id="legacy",
    tenant_metadata_schema=[{"name": "team", "data_type": "VARCHAR", "enable_match": True}],
)
assert created.tenant_id == "legacy" and created.status == "accepted", created
eventually("the tenant to be ready", lambda: client.tenant.get_infra_status(tenant_id="legacy").infra)
status = client.tenant.get_infra_status(tenant_id="legacy")
assert status.tenant_id == "legacy", status
assert client.tenant.get_sub_tenant_ids(tenant_id="legacy").sub_tenant_ids == ["legacy"]
assert code_of(raises(404, lambda: other.tenant.get_infra_status(tenant_id="legacy"))) in ("TENANT_NOT_FOUND", "DATABASE_NOT_FOUND")

step("upload: files with file_metadata, app sources with their old names")
uploaded = client.upload.knowledge(
    tenant_id="legacy",
    files=[("reactor.md", b"# Reactor\n\nThe gamma reactor is cooled by helium gas.\n", "text/markdown")],
    file_metadata=json.dumps([{"file_id": "reactor", "tenant_metadata": {"team": "ops"}}]),
    app_sources=json.dumps({
        "id": "note-1",
        "title": "Pump note",
        "content": {"text": "The feed pump of the gamma reactor is replaced every spring."},
        "tenant_metadata": {"team": "maintenance"},
        "document_metadata": {"author": "lee"},
    }),
)
assert uploaded.success_count == 2, uploaded
assert {r.source_id for r in uploaded.results} == {"reactor", "note-1"}, uploaded.results
raw = httpx.post(
    f"{URL}/ingestion/upload_knowledge",
    headers={"Authorization": f"Bearer {os.environ['ENGRAM_KEY']}"},
    data={"tenant_id": "legacy", "app_sources": json.dumps({"id": "note-2", "content": {"text": "x"}})},
    files={"unused": ("", b"")},
)
assert raw.status_code == 202 and raw.headers.get("deprecation") == "true", (raw, raw.headers)
assert "app_sources" in raw.headers.get("warning", ""), raw.headers

step("upload: verify processing")
def done(ids):
    statuses = client.upload.verify_processing(tenant_id="legacy", file_ids=ids).statuses
    return all(s.indexing_status == "completed" for s in statuses) and statuses
statuses = eventually("indexing", lambda: done(["reactor", "note-1", "note-2"]))
assert [s.file_id for s in statuses] == ["reactor", "note-1", "note-2"], statuses
single = client.upload.verify_processing(tenant_id="legacy", file_id="reactor").statuses
assert [s.file_id for s in single] == ["reactor"], single

step("memories: add with old names, recall preferences, delete")
added = client.upload.add_memory(
    tenant_id="legacy",
    sub_tenant_id="user-ana",
    memories=[
        {"source_id": "pref-1", "text": "Ana prefers tea over coffee in the morning.",
         "tenant_metadata": json.dumps({"team": "ops"})},
        {"source_id": "pref-2", "user_assistant_pairs": [{"user": "I ride a bike to work", "assistant": "Noted."}]},
    ],
)
assert added.success_count == 2 and [r.source_id for r in added.results] == ["pref-1", "pref-2"], added
eventually("memories", lambda: all(
    s.indexing_status == "completed"
    for s in client.upload.verify_processing(tenant_id="legacy", sub_tenant_id="user-ana", file_ids=["pref-1", "pref-2"]).statuses
))
prefs = client.recall.recall_preferences(tenant_id="legacy", sub_tenant_id="user-ana", query="what does ana drink in the morning?")
assert prefs.chunks[0].source_id == "pref-1", prefs.chunks
assert prefs.chunks[0].tenant_metadata == {"team": "ops"}, prefs.chunks[0]
memories = client.fetch.list_data(tenant_id="legacy", sub_tenant_id="user-ana", kind="memories")
assert {m.memory_id for m in memories.user_memories} == {"pref-1", "pref-2"}, memories
gone = client.upload.delete_memory(tenant_id="legacy", sub_tenant_id="user-ana", memory_id="pref-2")
assert gone.success and gone.user_memory_deleted, gone

step("list, recall, boolean recall")
listed = client.fetch.list_data(tenant_id="legacy", source_ids=["note-1"])
assert [s.id for s in listed.sources] == ["note-1"], listed
assert listed.sources[0].tenant_metadata == {"team": "maintenance"}, listed.sources[0]
assert listed.sources[0].document_metadata == {"author": "lee"}, listed.sources[0]
recall = client.recall.full_recall(tenant_id="legacy", query="how is the gamma reactor cooled?")
assert recall.chunks[0].source_id == "reactor", recall.chunks
filtered = client.recall.full_recall(tenant_id="legacy", query="gamma reactor", metadata_filters={"team": "maintenance"})
assert [c.source_id for c in filtered.chunks] == ["note-1"], filtered.chunks
boolean = client.recall.boolean_recall(tenant_id="legacy", query="feed pump", operator="and")
assert [c.source_id for c in boolean.chunks] == ["note-1"], boolean.chunks

step("qna: an answer from the retrieved chunks, or 403 naming [llm] without a model")
if os.environ.get("ENGRAM_QNA") == "model":
    answer = client.recall.qna(tenant_id="legacy", question="How is the gamma reactor cooled?", max_chunks=3)
    assert answer.success and answer.answer.strip(), answer
    assert answer.chunks and answer.chunks[0].source_id == "reactor", answer.chunks
    assert answer.model_used == "smollm2-135m-instruct", answer
    assert answer.timing["total_ms"] >= answer.timing["retrieval_ms"] >= 0, answer
else:
    body = raises(403, lambda: client.recall.qna(tenant_id="legacy", question="How is the gamma reactor cooled?"))
    assert code_of(body) == "FORBIDDEN" and "[llm]" in body["detail"]["message"], body

step("fetch content: text, link, both")
both = client.fetch.content(tenant_id="legacy", source_id="reactor")
assert "helium" in both.content and both.presigned_url, both
assert httpx.get(both.presigned_url).content.startswith(b"# Reactor"), "the download"
only_url = client.fetch.content(tenant_id="legacy", source_id="reactor", mode="url", expiry_seconds=60)
assert only_url.content is None and only_url.presigned_url, only_url
only_text = client.fetch.content(tenant_id="legacy", source_id="note-1", mode="content")
assert only_text.content.startswith("The feed pump") and only_text.presigned_url is None, only_text
assert code_of(raises(404, lambda: client.fetch.content(tenant_id="legacy", source_id="missing"))) == "SOURCE_NOT_FOUND"
raises(400, lambda: client.fetch.content(tenant_id="legacy", source_id="reactor", mode="everything"))

step("delete knowledge, monitor")
deleted = client.data.delete(tenant_id="legacy", ids=["note-2", "missing"])
assert deleted.deleted_count == 1, deleted
stats = client.tenant.monitor(tenant_id="legacy")
assert stats.tenant_id == "legacy", stats

step("raw embeddings: a database of its own dimension")
client.tenant.create(tenant_id="vectors", is_embeddings_tenant=True, embeddings_dimension=4)
eventually("the vectors tenant", lambda: client.tenant.get_infra_status(tenant_id="vectors").infra)
inserted = client.embeddings.insert(
    tenant_id="vectors",
    embeddings=[
        {"source_id": "doc-a", "metadata": {"lang": "en"}, "embeddings": [
            {"chunk_id": "a-0", "embedding": [1.0, 0.0, 0.0, 0.0]},
            {"chunk_id": "a-1", "embedding": [0.9, 0.1, 0.0, 0.0]},
        ]},
        {"source_id": "doc-b", "embeddings": [{"chunk_id": "b-0", "embedding": [0.0, 1.0, 0.0, 0.0]}]},
    ],
)
assert inserted.insert_count == 3 and inserted.ids == ["a-0", "a-1", "b-0"], inserted
again = client.embeddings.insert(
    tenant_id="vectors", embeddings=[{"source_id": "doc-a", "embeddings": [{"chunk_id": "a-0", "embedding": [0, 0, 1, 0]}]}]
)
assert again.insert_count == 0, "without upsert an existing chunk id is kept"
found = client.embeddings.search(
    tenant_id="vectors", sub_tenant_id="vectors", query_embedding=[1.0, 0.05, 0.0, 0.0], limit=2,
    output_fields=["chunk_id", "source_id", "metadata", "embedding"],
)
assert [r.embedding.chunk_id for r in found] == ["a-0", "a-1"], found
assert abs(found[0].score - 0.99875) < 1e-3 and found[0].embedding.embedding == [1.0, 0.0, 0.0, 0.0], found[0]
assert found[0].metadata == {"lang": "en"}, found[0]
scoped = client.embeddings.search(
    tenant_id="vectors", sub_tenant_id="vectors", query_embedding=[1, 0, 0, 0], filter_expr='source_id == "doc-b"'
)
assert [r.source_id for r in scoped] == ["doc-b"], scoped
raises(400, lambda: client.embeddings.search(
    tenant_id="vectors", sub_tenant_id="vectors", query_embedding=[1, 0, 0, 0], filter_expr="age > 3"))
raises(422, lambda: client.embeddings.search(tenant_id="vectors", sub_tenant_id="vectors", query_embedding=[1, 0, 0]))
raises(422, lambda: client.embeddings.insert(
    tenant_id="vectors", embeddings=[{"source_id": "x", "embeddings": [{"chunk_id": "x", "embedding": [1, 2]}]}]))
raises(400, lambda: client.embeddings.insert(
    tenant_id="legacy", embeddings=[{"source_id": "x", "embeddings": [{"chunk_id": "x", "embedding": [1, 2, 3, 4]}]}]))
by_source = client.embeddings.filter(tenant_id="vectors", sub_tenant_id="vectors", source_id="doc-a")
assert [r.embedding.chunk_id for r in by_source] == ["a-0", "a-1"], by_source
removed = client.embeddings.delete(tenant_id="vectors", sub_tenant_id="vectors", chunk_ids=["a-1", "b-0"])
assert removed.delete_count == 2, removed
left = client.embeddings.filter(tenant_id="vectors", sub_tenant_id="vectors", chunk_ids=["a-0", "a-1", "b-0"])
assert [r.embedding.chunk_id for r in left] == ["a-0"], left
assert code_of(raises(404, lambda: other.embeddings.filter(tenant_id="vectors", sub_tenant_id="vectors", source_id="doc-a"))) in ("TENANT_NOT_FOUND", "DATABASE_NOT_FOUND")

step("tenants: delete")
assert client.tenant.delete_tenant(tenant_id="vectors").tenant_id == "vectors"
assert client.tenant.delete_tenant(tenant_id="legacy").tenant_id == "legacy"

print("cortex suite: all steps passed", flush=True)
