#!/usr/bin/env python3
"""Writes HippoRAG's HotpotQA-100 in the layout `engram eval multihop` reads, a second
multi-hop set beside MuSiQue-100 (the graph lane's constants are checked on both):

    hotpotqa_eval_set.py QUESTIONS CORPUS OUT_DIR
    engram eval multihop OUT_DIR --graph --modes fast,thinking

QUESTIONS and CORPUS are `data/hotpotqa_train.json` and `data/hotpotqa_train_corpus.json` of
HippoRAG's first release (OSU-NLP-Group/HippoRAG, MIT; git blobs 7dbdf068 and 30c554d7):
100 questions (78 bridge, 22 comparison) and their 994 paragraphs. The questions and paragraphs
are HotpotQA's (CC BY-SA 4.0, Yang et al. 2018). A paragraph is supporting when one of its
sentences is among the question's supporting facts.
"""

import json
import pathlib
import sys


def main() -> None:
    questions_path, corpus_path, out = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    questions = json.loads(pathlib.Path(questions_path).read_text())
    corpus = json.loads(pathlib.Path(corpus_path).read_text())
    out.mkdir(parents=True, exist_ok=True)
    passages = [{"title": title, "text": "".join(sentences)} for title, sentences in corpus.items()]
    converted = []
    for q in questions:
        supporting = {title for title, _ in q["supporting_facts"]}
        converted.append(
            {
                "question": q["question"],
                "type": q["type"],
                "paragraphs": [
                    {
                        "title": title,
                        "paragraph_text": "".join(sentences),
                        "is_supporting": title in supporting,
                    }
                    for title, sentences in q["context"]
                ],
            }
        )
    (out / "musique_train.json").write_text(json.dumps(converted))
    (out / "musique_train_corpus.json").write_text(json.dumps(passages))
    print(f"{len(converted)} questions, {len(passages)} passages in {out}")


if __name__ == "__main__":
    main()
