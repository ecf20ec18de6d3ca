#!/usr/bin/env python3
"""Writes NAME.EXT.expected beside each document of a parsing corpus, from the text its project
ships for it.

    corpus_expected.py ROOT KEEP EXPECTED

ROOT: the unpacked archive; KEEP: a regular expression of document extensions (`docx|epub`);
EXPECTED: the extension of the shipped text (`txt`, `csv`), or `native` for pandoc's test
outputs: a document's Pandoc AST in Haskell's `show` form, whose words are its `Str` elements.
The text is found beside the document (`a/b.docx` -> `a/b.native`), or in a sibling folder
named after its extension (pandoc's `odt/odt/b.odt` -> `odt/native/b.native`).
"""

import pathlib
import re
import sys

STR = re.compile(r'Str\s+"((?:[^"\\]|\\.)*)"')
# Haskell string escapes: \" \\ \n, decimal code points (\8220), and \& (an empty separator).
ESCAPE = re.compile(r'\\(\d+|&|.)')


def unescape(text):
    def one(m):
        e = m.group(1)
        if e.isdigit():
            return chr(int(e))
        return {"&": "", "n": "\n", "t": "\t"}.get(e, e)

    return ESCAPE.sub(one, text)


def native_words(native):
    return " ".join(unescape(s) for s in STR.findall(native))


def shipped(doc, expected):
    beside = doc.with_suffix("." + expected)
    if beside.is_file():
        return beside
    sibling = doc.parent.parent / expected / (doc.stem + "." + expected)
    if doc.parent.name == doc.suffix[1:] and sibling.is_file():
        return sibling
    return None


def main():
    root, keep, expected = pathlib.Path(sys.argv[1]), re.compile(sys.argv[2]), sys.argv[3]
    for doc in sorted(root.rglob("*")):
        if not doc.is_file() or not keep.fullmatch(doc.suffix[1:]):
            continue
        source = shipped(doc, expected)
        if source is None:
            continue
        text = source.read_text(encoding="utf-8", errors="replace")
        if expected == "native":
            text = native_words(text)
        doc.with_name(doc.name + ".expected").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
