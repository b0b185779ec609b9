"""Per-call time of the everyday calls against `tokenizers`' own, in one process, interleaved.

    python benchmarks/api_latency.py --tokenizers gpt2,roberta-base,bert-base-uncased

Each case pairs a numbatok call with the `tokenizers` call a user would make instead (`encode` for
`encode` and for `tok(text)`, `encode_batch` for `encode_batch` and `encode_ragged`), checks that
their ids agree, then times them in turns: 7 rounds of a few hundred calls each, the median per
call of each round, the median over rounds. The ratio (numbatok / tokenizers, lower is faster) is
the median of the rounds' ratios: this machine's speed drifts within minutes, a ratio within one
round much less. Texts: one short sentence, one short German sentence (a row that is not ASCII
takes a normalizer's char map), one ~500-byte paragraph of big.txt, 64 and 4,096 paragraphs;
decoded: the sentence's ids and those of 64 paragraphs' first 60 characters.
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import find_corpus  # noqa: E402


def _median_call(f, n):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def cases(tok, ref, docs):
    short = "Hello, world! This is a short sentence."
    german = "Grüße aus Zürich: das Café ist schön."
    para = next(d for d in docs if 400 < len(d) < 600)
    batch = docs[100:164]
    large = docs[:4096]
    ids = ref.encode(short).ids
    some = [e.ids for e in ref.encode_batch([d[:60] for d in batch])]
    return [
        ("encode, a short sentence", lambda: tok.encode(short), lambda: ref.encode(short),
         lambda a, b: a.ids == b.ids and a.offsets == b.offsets),
        ("encode, a German sentence", lambda: tok.encode(german), lambda: ref.encode(german),
         lambda a, b: a.ids == b.ids and a.offsets == b.offsets),
        ("encode, a paragraph", lambda: tok.encode(para), lambda: ref.encode(para),
         lambda a, b: a.ids == b.ids and a.offsets == b.offsets),
        ("encode_batch, 64 paragraphs", lambda: tok.encode_batch(batch), lambda: ref.encode_batch(batch),
         lambda a, b: [e.ids for e in a] == [e.ids for e in b]),
        ("encode_batch, 4,096 paragraphs", lambda: tok.encode_batch(large), lambda: ref.encode_batch(large),
         lambda a, b: [e.ids for e in a] == [e.ids for e in b]),
        ("encode_ragged, one sentence", lambda: tok.encode_ragged([short]), lambda: ref.encode_batch([short]),
         lambda a, b: a.to_list() == [e.ids for e in b]),
        ("tok(text), a short sentence", lambda: tok(short), lambda: ref.encode(short),
         lambda a, b: a["input_ids"] == b.ids),
        ("decode, a short sentence", lambda: tok.decode(ids), lambda: ref.decode(ids), lambda a, b: a == b),
        ("decode_batch, 64 sentences", lambda: tok.decode_batch(some), lambda: ref.decode_batch(some),
         lambda a, b: a == b),
    ]


def run(name, corpus, rounds):
    import numbatok
    import tokenizers
    tok = numbatok.Tokenizer.from_pretrained(name, device="cpu")
    ref = tokenizers.Tokenizer.from_file(numbatok.tokenizer.resolve_path(name))
    with open(os.path.join(corpus, "big.txt"), encoding="utf-8") as f:
        docs = [d for d in f.read().split("\n\n") if d.strip()]
    rows = []
    for label, ours, theirs, same in cases(tok, ref, docs):
        if not same(ours(), theirs()):
            raise SystemExit(f"{name}: {label}: numbatok and tokenizers differ")
        n = 3 if "4,096" in label else 30 if "64" in label else 300
        for _ in range(3):
            ours(), theirs()
        a, b = [], []
        for _ in range(rounds):
            a.append(_median_call(ours, n))
            b.append(_median_call(theirs, n))
        a, b = np.array(a), np.array(b)
        rows.append((name, label, np.median(a) * 1e6, np.median(b) * 1e6, float(np.median(a / b))))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizers", default="gpt2")
    ap.add_argument("--corpus", default=None, help="folder holding big.txt")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    corpus = find_corpus(args.corpus)
    print("| tokenizer | call | numbatok (us) | tokenizers (us) | numbatok / tokenizers |")
    print("|---|---|---|---|---|")
    for name in args.tokenizers.split(","):
        for row in run(name, corpus, args.rounds):
            print("| %s | %s | %.1f | %.1f | %.2f |" % row, flush=True)


if __name__ == "__main__":
    main()
