#!/usr/bin/env python3
"""Peak resident memory of `engram serve` indexing the largest item the budgets allow.

The item is a plain-text file of `budgets.text_bytes` (8 MiB by default; real SciFact sentences,
repeated in a shuffled order), uploaded as a file through `POST /context/ingest` as a user
would. Two runs on one fresh server: the item alone, then four such items from four
organizations sent at once. The server's resident memory (VmRSS) is sampled every 50 ms from
/proc while the items index; VmHWM (the kernel's own peak) is read at the end of each run.

    make build
    python3 scripts/bench_item_memory.py            # about 10 minutes on two cores
    python3 scripts/bench_item_memory.py --bytes 1048576   # a smaller item, a quick look

With --record the report goes into BENCHMARKS.md as its newest entry, as `engram bench ... --record`
writes them.
"""

import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from bench_scale_out import call  # one JSON call helper for the scripts' benches

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "target", "release", "engram")


def upload(base, key, database, name, content):
    boundary = uuid.uuid4().hex
    head = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"database\"\r\n\r\n{database}\r\n"
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\n"
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    body = head + content + f"\r\n--{boundary}--\r\n".encode()
    answer = call(
        "POST", f"{base}/context/ingest", key, body, f"multipart/form-data; boundary={boundary}"
    )
    results = answer.get("data", answer)["results"]
    if results[0].get("error"):
        sys.exit(f"refused: {results[0]}")
    return results[0]["id"]


def text_of(corpus, size, seed):
    """`size` bytes of SciFact sentences in a shuffled order (whole sentences, then cut)."""
    sentences = []
    with open(corpus) as f:
        for line in f:
            doc = json.loads(line)
            sentences.extend(s.strip() + "." for s in doc["text"].split(". ") if s.strip())
    rng = random.Random(seed)
    out, length = [], 0
    while length < size:
        rng.shuffle(sentences)
        for s in sentences:
            out.append(s)
            length += len(s.encode()) + 1
            if length >= size:
                break
    data = " ".join(out).encode()[:size]
    return data.decode("utf-8", "ignore").encode()


def memory(pid):
    """VmRSS and VmHWM of the process, in MiB."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", 0.0), fields.get("VmHWM", 0.0)


def reset_peak(pid):
    """Resets VmHWM (Linux 4.0+: writing 5 to clear_refs), so each run reads its own peak."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def wait_items(base, pending, sample, timeout=3600):
    """Polls until every (key, database, id) is terminal; its states."""
    states = {}
    deadline = time.time() + timeout
    while pending and time.time() < deadline:
        for entry in list(pending):
            key, database, item = entry
            answer = call("GET", f"{base}/context/status?database={database}&ids={item}", key)
            status = {s["id"]: s for s in answer["data"]["statuses"]}
            state = status.get(item, {}).get("indexing_status")
            if state in ("completed", "errored"):
                states[item] = status[item]
                pending.remove(entry)
        sample()
        time.sleep(0.5)
    if pending:
        sys.exit(f"items still indexing after {timeout} s: {pending}")
    return states


REPORT = []
MARKER = "<!-- records: newest first; engram --record inserts below this line -->"


def report(line):
    print(line)
    REPORT.append(line)


def record(command):
    """Inserts the report under BENCHMARKS.md's marker, in the entries' shape."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip() or "unknown"
    model = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
        "unknown",
    )
    entry = (
        f"## {datetime.date.today().isoformat()} · bench item memory · {commit}\n\n"
        f"Machine: {os.cpu_count()} cores, {model}.\n\n```sh\n{command}\n```\n\n"
        "```text\n" + "\n".join(REPORT) + "\n```\n"
    )
    path = os.path.join(ROOT, "BENCHMARKS.md")
    history = open(path).read()
    at = history.index(MARKER) + len(MARKER)
    rest = history[at:].lstrip("\n")
    with open(path + ".recording", "w") as f:
        f.write(f"{history[:at]}\n\n{entry}\n{rest}")
    os.replace(path + ".recording", path)
    print(f"recorded in {path}", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--bytes", type=int, default=8 * 1024 * 1024, help="item size (budgets.text_bytes)")
    parser.add_argument("--corpus", default=os.path.join(ROOT, "..", "shared", "eval", "scifact", "corpus.jsonl"))
    parser.add_argument("--port", type=int, default=18480)
    parser.add_argument("--at-once", type=int, default=4)
    parser.add_argument("--record", action="store_true", help="insert the report into BENCHMARKS.md")
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="engram-item-memory-")
    env = dict(os.environ)
    env.update({
        "ENGRAM_DATA_DIR": data_dir,
        "ENGRAM_LISTEN": f"127.0.0.1:{args.port}",
        "ENGRAM_RATE_LIMIT__ENABLED": "false",
        "ENGRAM_EMBEDDING__CACHE_DIR": os.path.join(ROOT, ".cache"),
        "ENGRAM_BUDGETS__TEXT_BYTES": str(max(args.bytes, 1024)),
    })
    orgs = [f"org{n}" for n in range(args.at_once + 1)]
    keys = {}
    for org in orgs:
        out = subprocess.run(
            [BINARY, "keys", "create", "--data-dir", data_dir, "--org", org],
            env=env, check=True, capture_output=True, text=True,
        ).stdout.strip().splitlines()
        keys[org] = out[-1].strip()
    server = subprocess.Popen(
        [BINARY, "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        server.stdout.readline()
        base = f"http://127.0.0.1:{args.port}"
        for org in orgs:
            call("POST", f"{base}/databases", keys[org], {"database": "big"})
        for org in orgs:
            status = f"{base}/databases/status?database=big"
            while not call("GET", status, keys[org])["data"]["infra"]["ready_for_ingestion"]:
                time.sleep(0.2)
        idle, _ = memory(server.pid)
        report(f"engram serve, idle with {len(orgs)} databases: {idle:.0f} MiB resident")
        texts = [text_of(args.corpus, args.bytes, seed) for seed in range(args.at_once)]
        results = []
        for label, senders in (("alone", orgs[:1]), (f"{args.at_once} at once", orgs[1:])):
            reset = reset_peak(server.pid)
            peak = {"rss": memory(server.pid)[0]}
            stop = threading.Event()

            def sample():
                peak["rss"] = max(peak["rss"], memory(server.pid)[0])

            def sampler():
                while not stop.is_set():
                    sample()
                    time.sleep(0.05)

            thread = threading.Thread(target=sampler, daemon=True)
            thread.start()
            started = time.time()
            pending = []
            for n, org in enumerate(senders):
                item = upload(base, keys[org], "big", f"largest-{n}.txt", texts[n % len(texts)])
                pending.append((keys[org], "big", item))
            states = wait_items(base, pending, sample)
            took = time.time() - started
            stop.set()
            thread.join()
            hwm = memory(server.pid)[1] if reset else float("nan")
            outcome = {s["indexing_status"] for s in states.values()}
            report(
                f"{label}: {len(senders)} item(s) of {args.bytes} bytes, {', '.join(sorted(outcome))} "
                f"in {took:.0f} s; peak resident {peak['rss']:.0f} MiB (VmHWM {hwm:.0f} MiB), "
                f"{peak['rss'] - idle:.0f} MiB over idle"
            )
            results.append((label, peak["rss"], hwm))
    finally:
        server.terminate()
        server.wait(timeout=30)
    if args.record:
        record("python3 scripts/bench_item_memory.py " + " ".join(sys.argv[1:]).replace("--record", "").strip())
    return results


if __name__ == "__main__":
    main()
