#!/usr/bin/env python3
"""Compare the Rust piece machine's splits with Hugging Face `tokenizers` pre-tokenizers.

For each tokenizer in /work/shared/tokenizers (or $PROPERTOK_TOKENIZERS) whose pre-tokenizer
is made of Split(regex, Isolated), Digits and ByteLevel stages, derive the list of patterns
the piece machine takes (Digits(individual) -> \\p{N}, Digits -> \\p{N}+, ByteLevel(use_regex)
-> the GPT-2 regex), generate texts, split them with HF (the tokenizer's own pre-tokenizer,
pieces mapped back from the ByteLevel alphabet) and with `cargo run --release --example
piece_split`, and report the mismatches. Falcon's Punctuation stage is not a regex Split; it is
left out of both sides.

Not a pytest module (no `test_` prefix): run it directly.

    python3 tests/support/pretokenizer_split_check.py [--n 3000] [--seed 0] [--only llama3,gpt2]
"""

import argparse
import json
import os
import random
import subprocess
import sys
from pathlib import Path

from tokenizers import Regex, pre_tokenizers

ROOT = Path(__file__).resolve().parents[2]
TOKENIZERS = Path(os.environ.get("PROPERTOK_TOKENIZERS", "/work/shared/tokenizers"))
GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
SLUGS = [
    "gpt2", "gpt-neox", "llama3", "cl100k", "qwen2", "o200k", "deepseek-v3", "deepseek-llm",
    "deepseek-coder", "starcoder2", "refact", "command-r", "falcon", "claude-legacy",
]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_DECODER = {v: k for k, v in bytes_to_unicode().items()}


def stages_of(slug):
    """(pattern list for the machine, HF pre-tokenizer, whether pieces are ByteLevel-mapped)."""
    tj = json.loads((TOKENIZERS / slug / "tokenizer.json").read_text())
    pt = tj["pre_tokenizer"]
    parts = pt["pretokenizers"] if pt["type"] == "Sequence" else [pt]
    patterns, hf, byte_level = [], [], False
    for p in parts:
        t = p["type"]
        if t == "Split":
            assert p["behavior"] == "Isolated" and not p["invert"], p
            patterns.append(p["pattern"]["Regex"])
            hf.append(pre_tokenizers.Split(Regex(p["pattern"]["Regex"]), "isolated"))
        elif t == "Digits":
            # After ByteLevel (Falcon) Digits sees the byte alphabet, where the only numeric
            # characters standing for whole characters are the ASCII digits (the others, ²³¹¼½¾,
            # stand for continuation bytes: HF then cuts inside a character).
            digit = "[0-9]" if byte_level else r"\p{N}"
            patterns.append(digit if p["individual_digits"] else digit + "+")
            hf.append(pre_tokenizers.Digits(individual_digits=p["individual_digits"]))
        elif t == "ByteLevel":
            byte_level = True
            if p.get("use_regex", True):
                patterns.append(GPT2_REGEX)
            hf.append(pre_tokenizers.ByteLevel(add_prefix_space=False,
                                               use_regex=p.get("use_regex", True)))
        elif t == "Punctuation":
            continue  # not a regex Split: left out of both sides
        else:
            raise ValueError(f"{slug}: unsupported pre-tokenizer {t}")
    return patterns, pre_tokenizers.Sequence(hf), byte_level


def hf_split(pt, byte_level, text):
    """HF's pieces as UTF-8 byte strings (a stage after ByteLevel sees the byte alphabet, so
    with Falcon's Digits a piece can end inside a character)."""
    pieces = [p for p, _ in pt.pre_tokenize_str(text)]
    if byte_level:
        return [bytes(BYTE_DECODER[c] for c in p) for p in pieces]
    return [p.encode("utf-8") for p in pieces]


def inside_char_cut(pieces):
    """Whether a piece boundary falls inside a UTF-8 sequence."""
    return any(p and (p[0] & 0xC0) == 0x80 for p in pieces[1:])


ATOMS = {
    "space": [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n", "\u00a0", "\u3000",
              "\u2009", "\u000b", "\u000c", "\u0085", "\u2028"],
    "contraction": ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Re", "'D",
                    "\u2019s", "'x", "''", "'ſ"],
    "word": ["Hello", "world", "don", "I", "a", "ab", "THE", "café", "naïve", "Straße", "ſ",
             "ΑΒΓ", "αβγ", "привет", "Ǆǅǆ", "مرحبا", "नमस्ते", "ไทย", "ǈ", "ʰ", "Ⅻ", "x"],
    "digit": ["1", "12", "123", "1234567", "٣٤", "１２", "²", "½", "0"],
    "cjk": ["中文", "日本語", "ひらがな", "カタカナ", "한국어", "龥", "ー", "々", "〇", "ࠀ"],
    "emoji": ["😀", "👍🏽", "👨\u200d👩\u200d👧", "🇺🇸", "❤️", "\u200d"],
    "punct": [".", ",", "!", "?", "/", "//", "...", "-", "—", "(", ")", "{", "}", "\"", "'",
              "`", "$", "#", "@", "_", "：", "。", "「", "」", "<|endoftext|>", "+=", "->",
              "\\", "~", "^", "|", "«", "¿", "§", "©", "€"],
    "mark": ["e\u0301", "\u0301", "\u0308", "\u064b", "\u093f"],
    "code": ["def f(x):\n    return x+1\n", "{\"a\": 1, \"b\": [2, 3]}", "if (a && b) {\n\t}",
             "x = 'it''s'", "http://a.b/c?d=1"],
}
WEIGHTS = {"space": 5, "contraction": 3, "word": 5, "digit": 3, "cjk": 2, "emoji": 1,
           "punct": 4, "mark": 1, "code": 1}


def random_char(rng):
    """A random code point, biased to assigned ranges, sometimes rare blocks (Unicode
    version differences between Oniguruma and regex-syntax show up there)."""
    lo, hi = rng.choice([(0x20, 0x7F), (0xA0, 0x2FF), (0x300, 0x36F), (0x370, 0x52F),
                         (0x600, 0x6FF), (0x900, 0x97F), (0x1E00, 0x1FFF), (0x2000, 0x206F),
                         (0x2070, 0x2BFF), (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
                         (0xFF00, 0xFFEF), (0x10000, 0x1FFFF), (0x1F300, 0x1FAFF),
                         (0x20000, 0x2FFFF), (0x0, 0x10FFFF)])
    while True:
        c = rng.randint(lo, hi)
        if not 0xD800 <= c <= 0xDFFF:
            return chr(c)


def random_text(rng):
    kinds = list(WEIGHTS)
    weights = [WEIGHTS[k] for k in kinds]
    out = []
    for _ in range(rng.randint(0, 12)):
        if rng.random() < 0.07:
            out.append(random_char(rng))
        else:
            out.append(rng.choice(ATOMS[rng.choices(kinds, weights)[0]]))
    return "".join(out)


def machine_split(patterns, texts):
    req = json.dumps({"stages": patterns, "texts": texts})
    cmd = ["cargo", "run", "--quiet", "--release", "--example", "piece_split"]
    out = subprocess.run(cmd, input=req, capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(out.stdout)


UNICODE_CLASSES = [r"\p{L}", r"\p{N}", r"\s", r"\p{M}", r"\p{P}", r"\p{S}", r"\p{Lu}", r"\p{Ll}",
                   r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"(?i:s)", r"(?i:k)"]


def unicode_check(show):
    """Code points where Oniguruma (HF) and regex-syntax (the machine) disagree on a class:
    the two bundle different Unicode versions."""
    req = json.dumps({"classes": UNICODE_CLASSES})
    cmd = ["cargo", "run", "--quiet", "--release", "--example", "piece_split"]
    out = subprocess.run(cmd, input=req, capture_output=True, text=True, cwd=ROOT, check=True)
    ranges = json.loads(out.stdout)["ranges"]
    chars = [chr(c) for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF]
    total = 0
    for cls, rs in zip(UNICODE_CLASSES, ranges):
        ours = set()
        for lo, hi in rs:
            ours.update(range(lo, hi + 1))
        split = pre_tokenizers.Split(Regex(cls), "removed")
        kept = set()
        for k in range(0, len(chars), 50000):
            for piece, _ in split.pre_tokenize_str("".join(chars[k:k + 50000])):
                kept.update(map(ord, piece))
        onig = {ord(c) for c in chars} - kept
        diff = sorted(onig ^ ours)
        total += len(diff)
        sample = ", ".join(f"U+{c:04X}({'HF' if c in onig else 'ours'})" for c in diff[:show])
        print(f"{cls}: {len(onig)} code points in HF, {len(ours)} in regex-syntax, "
              f"{len(diff)} differ {sample}")
    # HF's Digits pre-tokenizer uses Rust's char::is_numeric (the Unicode version of the
    # compiler that built the wheel), given to the machine as \p{N}.
    numeric = set()
    digits = pre_tokenizers.Digits(individual_digits=True)
    for k in range(0, len(chars), 50000):
        text = "".join("a" + c for c in chars[k:k + 50000])
        numeric.update(ord(p) for p, _ in digits.pre_tokenize_str(text) if len(p) == 1 and p != "a")
    ours = set()
    for lo, hi in ranges[UNICODE_CLASSES.index(r"\p{N}")]:
        ours.update(range(lo, hi + 1))
    diff = sorted(numeric ^ ours)
    total += len(diff)
    sample = ", ".join(f"U+{c:04X}({'HF' if c in numeric else 'ours'})" for c in diff[:show])
    print(f"Digits vs \\p{{N}}: {len(numeric)} numeric code points in HF, {len(ours)} in "
          f"regex-syntax, {len(diff)} differ {sample}")
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000, help="texts per tokenizer")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated tokenizer slugs")
    ap.add_argument("--show", type=int, default=5, help="mismatches shown per tokenizer")
    ap.add_argument("--unicode", action="store_true",
                    help="also compare the Unicode classes code point by code point")
    args = ap.parse_args()
    unicode_diffs = unicode_check(args.show) if args.unicode else 0
    slugs = [s for s in (args.only.split(",") if args.only else SLUGS)
             if (TOKENIZERS / s / "tokenizer.json").exists()]
    total_bad = 0
    for slug in slugs:
        patterns, pt, byte_level = stages_of(slug)
        rng = random.Random(f"{args.seed}:{slug}")
        texts = [random_text(rng) for _ in range(args.n)]
        res = machine_split(patterns, texts)
        if "fatal" in res:
            print(f"{slug}: machine refused the patterns: {res['fatal']}")
            total_bad += 1
            continue
        bad, byte_cuts = [], 0
        for text, got, err in zip(texts, res["pieces"], res["errors"]):
            want = hf_split(pt, byte_level, text)
            if err is None:
                got = [p.encode("utf-8") for p in got]
            if got != want:
                if inside_char_cut(want):
                    byte_cuts += 1  # HF cuts inside a character: no char-level marking exists
                    continue
                bad.append((text, want, got if err is None else err))
        total_bad += len(bad)
        print(f"{slug}: {len(patterns)} stage(s), {len(texts)} texts, {len(bad)} mismatches, "
              f"{byte_cuts} texts where HF cuts inside a UTF-8 character, "
              f"{res['states']} machine states")
        for text, want, got in bad[:args.show]:
            print(f"    text {text!r}\n      HF      {want!r}\n      machine {got!r}")
    # Unicode-version differences are reported, not counted as failures of the machine.
    del unicode_diffs
    sys.exit(1 if total_bad else 0)


if __name__ == "__main__":
    main()
