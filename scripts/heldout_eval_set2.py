#!/usr/bin/env python3
"""Writes a second held-out BEIR set that no constant was tuned on (beside heldout_eval_set.py's),
split the same way into a tuning half and a held-out half (the held-out half is never used for
choosing constants):

    scripts/heldout_eval_set2.py OUT --source SNAPSHOT_OR_DIR
    ./target/release/engram eval beir OUT/heldout            # the held-out half (report only)
    ./target/release/engram eval beir OUT/tune               # the half constants may be tuned on
    EVAL_DIR=OUT/peers-heldout ../shared/bench/peers/run.sh scifact

Source: the Cranfield collection (Cleverdon, Cranfield II, 1960s; the classic IR test collection:
1,400 aerodynamics abstracts, 225 questions, judgements on Cleverdon's relevance scale),
as the three files `cran.all.1400`, `cran.qry` and `cranqrel` that Glasgow's IR group distributes
with no licence attached (research use; the collection predates such terms). No package registry
ships it, nor any other small BEIR-style set (NFCorpus, ArguAna, SciDocs, ... were looked for on
PyPI, npm and Debian; the packages that load such sets download them at run time from sites
unreachable here), so the script reads a local copy, checked byte for byte against the
sha256 pins below. The pinned bytes are those of the public GitHub repository
Chetan-Prasad/IR-Lucene_Cran at commit 63a55e21 (its root holds the three files as distributed);
`--source` is either that repository's git directory (e.g. the bare snapshot the search tool's
`fetch` lays out, read with `git show COMMIT:FILE`) or any folder holding the three files. Two
other independent copies agree: cran.qry and cranqrel are the same git blobs in three unrelated
repositories, and noramtboraas/information-retrieval's cran.all.1400 parses to the same 1,400
documents (it differs only in CRLF line ends and trailing blanks).

Conversion:
- a document is one `.I` record: `_id` its number, `title` the `.T` field, `text` the `.W` field
  less its first words when they repeat the title (as they do in 1,396 of the 1,398 records);
  the author (`.A`) and citation (`.B`) fields are left out; records 471 and 995 are empty in
  the distribution and are dropped, leaving 1,398 documents (with the one judgement on 995);
- a query is one `.I` record of cran.qry: `_id` its position 1-225 (cranqrel numbers the queries
  by position, not by the `.I` labels 001-365 of cran.qry), `text` its `.W` field;
- qrels: cranqrel's Cleverdon codes 1 (complete answer) to 4 (minimum interest) all count as
  relevant (score 1); its 225 entries coded -1 (one per query, undocumented, not on Cleverdon's
  scale) are dropped. Binary, as the first held-out set: engram's scorer (exponential gain) and
  the peers' scorer (linear gain) then compute the same nDCG.
Whitespace is collapsed; the text is lowercase, as distributed, with ` .` before full stops.

Counts: 1,398 docs, 225 queries, 1,611 qrels (1-39 per query, mean 7.2); tune 112 queries /
855 qrels, heldout 113 queries / 756 qrels. Every query has a relevant doc; no duplicate ids.
Docs: title + text 25-669 words, mean 164; queries 6-46 words, mean 18 (questions). Old,
technical aerodynamics: a different domain and era from SciFact and the semanlink set.

Split: queries sorted by sha256("engram-heldout2-v1:" + query id); the first 112 (225 // 2) are
`tune`, the rest `heldout`. Deterministic, independent of file order, and stable across reruns.

Layout written under OUT (as heldout_eval_set.py's):
    all/      corpus.jsonl, queries.jsonl, qrels/test.tsv   (every query)
    tune/     corpus.jsonl (a copy of all/'s), queries.jsonl, qrels/test.tsv   (tuning half)
    heldout/  corpus.jsonl (a copy of all/'s), queries.jsonl, qrels/test.tsv   (held-out half)
    peers-tune/scifact -> ../tune, peers-heldout/scifact -> ../heldout
The peers benchmark reads EVAL_DIR/scifact/...; its labels still say SciFact. Give it its own
PEERS_WORK that reuses the venv and models, so the SciFact results stay:
    mkdir -p .cache/peers-heldout2 && ln -sfn ../peers/venv ../peers/models .cache/peers-heldout2/
    PEERS_WORK=$PWD/.cache/peers-heldout2 EVAL_DIR=$PWD/.cache/heldout2/peers-heldout \\
        ../shared/bench/peers/run.sh scifact
"""

import argparse
import hashlib
import pathlib
import re
import shutil
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from heldout_eval_set import check, clean, split_and_write, write  # noqa: E402  (the first set's helpers)

SNAPSHOT_REPO = "Chetan-Prasad/IR-Lucene_Cran"
SNAPSHOT_COMMIT = "63a55e212ea4aa503832fa31448015bf14d26113"
FILES = {
    "cran.all.1400": "73d33d7e445b884bc32332034e7bc7d07ad5089d9030ead9f1de3493da21da1d",
    "cran.qry": "99578ceb88941ef89c14faf7c63c23776a376d8fba319b990f01d0c601d8b03f",
    "cranqrel": "92e54b58dac0b980152178f350d892fae66c8a239b8a11715b835fb8d2f6bc0e",
}
EMPTY_DOCS = {"471", "995"}  # no title, no text in the distribution
SPLIT_SALT = "engram-heldout2-v1:"


def read_source(source: pathlib.Path) -> dict:
    """The three files' bytes, from a folder holding them or from the pinned commit of a git dir,
    each checked against its sha256 pin."""
    out = {}
    for name, pin in FILES.items():
        if (source / name).is_file():
            data = (source / name).read_bytes()
        else:
            got = subprocess.run(
                ["git", "--git-dir", str(source), "show", f"{SNAPSHOT_COMMIT}:{name}"],
                capture_output=True,
            )
            if got.returncode != 0:
                sys.exit(f"{source}: no {name} there, and not a git directory holding "
                         f"{SNAPSHOT_REPO} at {SNAPSHOT_COMMIT}: {got.stderr.decode().strip()}")
            data = got.stdout
        digest = hashlib.sha256(data).hexdigest()
        if digest != pin:
            sys.exit(f"{source}: {name} has sha256 {digest}, expected {pin}")
        out[name] = data.decode("ascii").replace("\r\n", "\n")
    return out


def records(text: str):
    """(label, {field letter: collapsed text}) for each `.I` record of a Cranfield file."""
    for block in re.split(r"^\.I[ \t]+", text, flags=re.M)[1:]:
        head, _, body = block.partition("\n")
        fields, current = {}, None
        for line in body.split("\n"):
            marker = re.fullmatch(r"\.([TAWB])\s*", line)
            if marker:
                current = marker.group(1)
                fields.setdefault(current, [])
            elif current:
                fields[current].append(line)
        yield head.strip(), {k: clean(" ".join(v)) for k, v in fields.items()}


def build(files: dict):
    corpus = []
    for label, f in records(files["cran.all.1400"]):
        if label in EMPTY_DOCS:
            assert not f.get("T") and not f.get("W"), f"record {label} is no longer empty"
            continue
        title, body = f.get("T", ""), f.get("W", "")
        if title and body.startswith(title):
            body = body[len(title):].strip()
        corpus.append({"_id": label, "title": title, "text": body})
    assert len(corpus) == 1398, len(corpus)

    queries = [{"_id": str(i), "text": f["W"]}
               for i, (_, f) in enumerate(records(files["cran.qry"]), start=1)]
    assert len(queries) == 225, len(queries)

    qrels = []
    for line in files["cranqrel"].split("\n"):
        if not line.strip():
            continue
        qid, did, code = line.split()
        if did in EMPTY_DOCS:  # one judgement (query 125, code 3) on an empty record
            continue
        if int(code) in (1, 2, 3, 4):
            qrels.append((qid, did))
        else:
            assert code == "-1", line
    return corpus, queries, qrels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--source", type=pathlib.Path, required=True,
                    help=f"a folder holding {', '.join(FILES)}, or the git directory of "
                         f"{SNAPSHOT_REPO} (commit {SNAPSHOT_COMMIT[:8]} is read)")
    args = ap.parse_args()
    out = args.out

    corpus, queries, qrels = build(read_source(args.source))
    check(corpus, queries, qrels)

    split_and_write(out, corpus, queries, qrels, SPLIT_SALT)


if __name__ == "__main__":
    main()
