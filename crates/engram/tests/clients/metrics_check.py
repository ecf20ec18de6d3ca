"""GET /metrics read by the Prometheus project's own text parser (prometheus-client): the main
listener with the metrics token, the separate listener without one. Run by the end-to-end test
`clients::metrics_parse_with_the_prometheus_parser` after it indexed an item and ran a query."""

import os
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

URL, TOKEN, LISTENER = os.environ["ENGRAM_URL"], os.environ["METRICS_TOKEN"], os.environ["METRICS_URL"]


class Reply:
    def __init__(self, status, headers, text):
        self.status_code, self.headers, self.text = status, headers, text


def get(url, headers=None):
    """A GET with the standard library (prometheus-client needs nothing else)."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return Reply(response.status, {k.lower(): v for k, v in response.headers.items()}, response.read().decode())
    except urllib.error.HTTPError as err:
        return Reply(err.code, {}, err.read().decode())


def families(text):
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(family, name=None):
    return [s for s in family.samples if name is None or s.name == name]


main = get(f"{URL}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
assert main.status_code == 200 and main.headers["content-type"].startswith("text/plain"), main
assert get(f"{URL}/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
assert get(f"{URL}/metrics").status_code == 401
separate = get(f"{LISTENER}/metrics")
assert separate.status_code == 200, separate

for text in (main.text, separate.text):
    found = families(text)
    requests = samples(found["engram_http_requests"], "engram_http_requests_total")
    assert any(s.labels == {"route": "/query", "method": "POST", "status": "200"} and s.value >= 1 for s in requests), requests
    assert any(s.labels["route"] == "/databases/status" for s in requests), requests
    latency = found["engram_http_request_duration_seconds"]
    assert latency.type == "histogram", latency.type
    assert any(s.name.endswith("_bucket") and s.labels.get("le") == "+Inf" for s in latency.samples)
    items = {s.labels["state"]: s.value for s in samples(found["engram_items"])}
    assert items.get("completed", 0) >= 2, items
    chunks = samples(found["engram_chunks"])
    assert chunks and all(s.labels["database_id"].startswith("db_") for s in chunks), chunks
    indexed = {s.labels["outcome"]: s.value for s in samples(found["engram_items_indexed"], "engram_items_indexed_total")}
    assert indexed.get("completed", 0) >= 2, indexed
    assert found["engram_embed_batch_seconds"].type == "histogram"
    # Bounded labels: no item id, no key; routes are templates.
    key_prefix = os.environ["ENGRAM_KEY"].split(".")[0]
    for family in found.values():
        for sample in family.samples:
            for name, value in sample.labels.items():
                assert "metrics-a" not in value and "metrics-b" not in value, sample
                assert key_prefix not in value, sample
                if name == "route":
                    assert value.startswith("/") or value == "unmatched", sample
print("metrics check: passed", flush=True)
