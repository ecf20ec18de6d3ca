#!/usr/bin/env python3
"""Indexing throughput of one engram instance beside two instances on one PostgreSQL.

Each instance is a real `engram serve` process pinned to a core of its own (`taskset`), as
instances on separate machines would be; the second run adds one instance on the other core.
The same items (SciFact passages of --words words) go in through the first instance; the clock
stops when every item is `completed`. Reports items/s, the ratio, and the CPU time each engram
process and the PostgreSQL server spent per item (from /proc), so the scaling can be argued from
CPU time too. Run it beside a throwaway server:

    make build
    scripts/with-postgres.sh python3 scripts/bench_scale_out.py --items 600
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system CPU seconds of one process and its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def postgres_cpu_seconds():
    """CPU seconds of every PostgreSQL server process on the machine."""
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "postgres":
                    continue
            total += cpu_seconds(pid)
        except OSError:
            pass
    return total


def psql(url, sql):
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql, url], check=True)


def call(method, url, key, body=None, content_type="application/json"):
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        request.add_header("Content-Type", content_type)
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read() or b"{}")


def form(fields):
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        )
    parts.append(f"--{boundary}--\r\n")
    return "".join(parts).encode(), f"multipart/form-data; boundary={boundary}"


def passages(corpus, count, words):
    out = []
    with open(corpus) as f:
        for line in f:
            tokens = json.loads(line)["text"].split()
            for start in range(0, len(tokens) - words + 1, words):
                out.append(" ".join(tokens[start : start + words]))
                if len(out) == count:
                    return out
    sys.exit(f"the corpus gives only {len(out)} passages")


class Instance:
    def __init__(self, binary, url, core, env):
        self.dir = tempfile.mkdtemp(prefix="engram-scale-")
        self.process = subprocess.Popen(
            ["taskset", "-c", str(core), binary, "serve", "--listen", "127.0.0.1:0",
             "--data-dir", self.dir, "--storage-url", url],
            stdout=subprocess.PIPE, env=env,
        )
        line = self.process.stdout.readline().decode().strip()
        assert line.startswith("engram listening on "), line
        self.base = line.removeprefix("engram listening on ")

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)


def run(args, instances, texts):
    server = os.environ["E2E_POSTGRES_URL"]
    name = f"scale_{instances}_{os.getpid()}"
    psql(f"{server}/postgres", f"CREATE DATABASE {name}")
    url = f"{server}/{name}"
    env = dict(os.environ, RUST_LOG="warn", ENGRAM_RATE_LIMIT__ENABLED="false",
               ENGRAM_EMBEDDING__SESSIONS="1", ENGRAM_EMBEDDING__THREADS="1",
               ENGRAM_PIPELINE__WORKERS="2",
               # One organization here: its share must not cap the workers of both instances.
               ENGRAM_PIPELINE__ORG_SHARE="8")
    running = [Instance(args.binary, url, core, env) for core in range(instances)]
    try:
        key = subprocess.run(
            [args.binary, "keys", "create", "--org", "bench", "--storage-url", url],
            check=True, capture_output=True, env=env, text=True,
        ).stdout.strip().splitlines()[-1]
        first = running[0].base
        call("POST", f"{first}/databases", key, {"database": "scale"})
        while not call("GET", f"{first}/databases/status?database=scale", key)["data"]["infra"][
            "ready_for_ingestion"
        ]:
            time.sleep(0.05)
        cpu0 = [cpu_seconds(i.process.pid) for i in running]
        pg0 = postgres_cpu_seconds()
        started = time.monotonic()
        ids = []
        for at in range(0, len(texts), args.per_request):
            batch = [
                {"id": f"p{n}", "title": "Passage", "type": "page", "content": {"text": text}}
                for n, text in enumerate(texts[at : at + args.per_request], start=at)
            ]
            ids += [item["id"] for item in batch]
            body, kind = form({"type": "knowledge", "database": "scale",
                               "app_knowledge": json.dumps(batch)})
            call("POST", f"{first}/context/ingest", key, body, kind)
        remaining = set(ids)
        while remaining:
            time.sleep(0.2)
            probe = sorted(remaining)[:100]
            answer = call("GET", f"{first}/context/status?database=scale&ids={','.join(probe)}", key)
            for status in answer["data"]["statuses"]:
                if status["indexing_status"] == "errored":
                    sys.exit(f"{status['id']} errored: {status}")
                if status["indexing_status"] == "completed":
                    remaining.discard(status["id"])
        elapsed = time.monotonic() - started
        cpu = [cpu_seconds(i.process.pid) - c for i, c in zip(running, cpu0)]
        pg = postgres_cpu_seconds() - pg0
        return elapsed, cpu, pg
    finally:
        for instance in running:
            instance.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default="target/release/engram")
    parser.add_argument("--corpus", default="../shared/eval/scifact/corpus.jsonl")
    parser.add_argument("--items", type=int, default=600)
    parser.add_argument("--words", type=int, default=70)
    parser.add_argument("--per-request", type=int, default=100)
    args = parser.parse_args()
    texts = passages(args.corpus, args.items, args.words)
    results = {}
    for instances in (1, 2):
        elapsed, cpu, pg = run(args, instances, texts)
        results[instances] = elapsed
        per_item = ", ".join(f"{c / len(texts) * 1000:.1f}" for c in cpu)
        print(f"{instances} instance(s), one core each: {len(texts)} items in {elapsed:.1f} s "
              f"= {len(texts) / elapsed:.1f} items/s; engram CPU ms/item per instance: {per_item}; "
              f"PostgreSQL CPU ms/item: {pg / len(texts) * 1000:.1f}", flush=True)
    print(f"two instances / one: {results[1] / results[2]:.2f}x the rate")


if __name__ == "__main__":
    main()
