"""WordPiece (BERT) guides against the real tokenizer (the ``tokenizers`` package).

A WordPiece token sequence stands for the text Hugging Face's ``WordPiece`` decoder writes without
its cleanup: words joined by one space, ``##`` pieces glued to the piece before
(``decode_like_hugging_face`` below, written from the token strings, not from propertok). A guide
for a regex must accept exactly ``{canonical(s) : s in L(regex), s representable}``, where ``s`` is
representable when that decoding of ``canonical(s)`` gives ``s`` back (lowercase, no accents, one
space between words and around punctuation).

* ``test_bert_oracle``: the BERT tokenizer of the shared corpus, complete (every representable
  sample of the regex is accepted, token by token, ending in a final state) and sound (every random
  walk re-encodes to itself and decodes into the language).
* ``test_brute_force``: small WordPiece tokenizers built with ``tokenizers`` (random vocabularies,
  a short word limit), every string up to 5 characters over an alphabet with upper case, an accent,
  punctuation and spaces: the guide's sequences (up to that decoded length) are exactly the
  encodings of the representable matching strings; the agnostic guide's are every sequence whose
  decoding matches.
"""

from __future__ import annotations

import itertools
import random
import re

import pytest

from oracle import needs_shared, tokenizer_path

tokenizers = pytest.importorskip("tokenizers")

PREFIX = "##"


def decode_like_hugging_face(tok, ids) -> str:
    """``WordPiece`` decoding without cleanup: a space before each word but the first, pieces
    that continue a word glued on."""
    out = []
    for i in ids:
        t = tok.id_to_token(i)
        if t.startswith(PREFIX) and len(t) > len(PREFIX):
            out.append(t[len(PREFIX):])
        else:
            out.append((" " if out else "") + t)
    return "".join(out)


def canonical(tok, text: str) -> list:
    return tok.encode(text, add_special_tokens=False).ids


def representable(tok, text: str) -> bool:
    return decode_like_hugging_face(tok, canonical(tok, text)) == text


def walk(guide, ids) -> bool:
    """Whether ``guide`` accepts ``ids`` token by token and ends in a final state."""
    state = guide.initial_state
    for t in ids:
        if t not in set(guide.allowed_tokens(state).tolist()):
            return False
        state = guide.next_state(state, t)
    return guide.is_final(state)


# Regexes over the decoded text (words joined by one space), for both kinds of guide (free text
# over BERT's 30,522 tokens passes max_direct_transitions in an eager guide: lazy only).
FREE_TEXT = [r"[a-z]+( [a-z]+)*", r"(hello|hi) , [a-z]{1,6} !", r"[a-z]{3,}( [a-z]{3,}){0,3} \.",
             r"[a-z0-9]{1,12}( [a-z0-9]{1,12}){0,4}"]
BERT_REGEXES = [
    r"positive|negative|neutral",
    r"the answer is (yes|no) \.",
    r"[0-9]{1,4}( \. [0-9]{1,2})?",
    r"(un|re)?(affable|believable|do|doing)",
    r"[a-z]{1,4}",
    r"[a-z]{2,3}ing",
    r"caf(e|é)|Cafe|中 国|[αβγ]{1,3}|naïve",
    r"(hello|hi) , (world|there) !",
]


def bert_cases():
    return ([pytest.param(p, lazy, id=f"{'lazy' if lazy else 'eager'}-{p}") for p in BERT_REGEXES for lazy in (True, False)]
            + [pytest.param(p, True, id=f"lazy-{p}") for p in FREE_TEXT])


@needs_shared("the BERT tokenizer")
@pytest.mark.parametrize("pattern, lazy", bert_cases())
def test_bert_oracle(pt, pattern, lazy):
    path = tokenizer_path("bert-wordpiece")
    tok = tokenizers.Tokenizer.from_file(str(path))
    vocab = pt.Vocabulary.from_file(str(path))
    assert vocab.kind == "wordpiece" and vocab.canonical_unsupported_reason is None
    guide = pt.Compiler(vocab).compile_regex(pattern, lazy=lazy)
    assert guide.is_lazy == lazy and guide.method == ("cartesian" if lazy else "direct")
    rx = re.compile(pattern)

    samples = {s.decode() for s in pt.ByteDfa(pattern).sample(300, seed=7, max_len=40)}
    kept = [s for s in sorted(samples) if representable(tok, s)]
    assert kept, f"no representable sample of {pattern!r}: the test would check nothing"
    for s in kept:
        assert walk(guide, canonical(tok, s)), (pattern, s, canonical(tok, s))
    # Samples that are not representable must not be writable as they are.
    for s in sorted(samples - set(kept)):
        assert not (rx.fullmatch(s) and walk(guide, canonical(tok, s)) and representable(tok, s))

    eos = set(guide.eos_token_ids)
    for seed in range(40):
        ids = [t for t in guide.random_walk(seed, max_tokens=24) if t not in eos]
        text = decode_like_hugging_face(tok, ids)
        assert vocab.decode(ids) == text.encode()
        assert canonical(tok, text) == ids, (pattern, ids, text, canonical(tok, text))
        assert rx.fullmatch(text), (pattern, text)


@needs_shared("the BERT tokenizer")
@pytest.mark.parametrize("pattern", BERT_REGEXES)
def test_lazy_and_eager_guides_agree(pt, pattern):
    """Bit for bit: the product of the two guides has no state where their masks differ."""
    compiler = pt.Compiler(pt.Vocabulary.from_file(str(tokenizer_path("bert-wordpiece"))))
    lazy, eager = compiler.compile_regex(pattern), compiler.compile_regex(pattern, lazy=False)
    assert lazy.is_lazy and not eager.is_lazy
    assert lazy.first_difference(eager) is None


@needs_shared("the BERT tokenizer")
def test_lazy_guide_shared_by_threads(pt):
    """Eight threads walk one fresh lazy guide and see the masks a sequential run sees."""
    import concurrent.futures

    import numpy as np

    compiler = pt.Compiler(pt.Vocabulary.from_file(str(tokenizer_path("bert-wordpiece"))))
    pattern = FREE_TEXT[2]
    walks = [compiler.compile_regex(pattern).random_walk(seed, max_tokens=12) for seed in range(8)]

    def masks(guide, ids):
        state, out = guide.initial_state, []
        for t in ids:
            out.append(np.array(guide.mask(state)))
            state = guide.next_state(state, t)
        return out

    shared = compiler.compile_regex(pattern)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda ids: masks(shared, ids), walks))
    for ids, got in zip(walks, together):
        alone = masks(compiler.compile_regex(pattern), ids)
        assert all((a == b).all() for a, b in zip(alone, got))


@needs_shared("the BERT tokenizer")
def test_bert_specific_cases(pt):
    """Cases picked by hand on the real vocabulary: multi-piece words, a longer entry that shadows
    a split, upper case and accents never written, and punctuation as a word of its own."""
    path = tokenizer_path("bert-wordpiece")
    tok = tokenizers.Tokenizer.from_file(str(path))
    compiler = pt.Compiler(pt.Vocabulary.from_file(str(path)))
    ids = {t: tok.token_to_id(t) for t in ["una", "##ffa", "##ble", "hello", ",", "world", "the", "##re", "there"]}
    g = compiler.compile_regex(r"unaffable|hello , world|there")
    assert walk(g, [ids["una"], ids["##ffa"], ids["##ble"]])
    assert walk(g, [ids["hello"], ids[","], ids["world"]])
    assert walk(g, [ids["there"]]) and not walk(g, [ids["the"], ids["##re"]])
    with pytest.raises(ValueError, match=r"(?i)no canonical token sequence"):
        compiler.compile_regex(r"Hello|héllo|hello,world")
    agnostic = compiler.compile_regex(r"there", method="agnostic")
    assert walk(agnostic, [ids["the"], ids["##re"]]) and walk(agnostic, [ids["there"]])
    assert compiler.compile_regex(r"there").is_lazy
    with pytest.raises(NotImplementedError, match=r"(?i)special token"):
        compiler.compile_grammar('start: "a" <[103]>')  # [MASK]
    with pytest.raises(NotImplementedError, match=r"(?i)lazy"):
        compiler.compile_regex(r"there", lazy=True).to_bytes()
    assert compiler.compile_regex(r"there").materialize().first_difference(compiler.compile_regex(r"there", lazy=False)) is None
    # A recursive schema: WordPiece guides have no pushdown form, so the default keeps the
    # depth bound (3) of the regex route instead of failing; unbounded recursion is refused.
    nested = {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}
    ids = {t: tok.token_to_id(t) for t in "[]"}
    guide = compiler.compile_json_schema(nested)
    assert guide.is_lazy
    assert walk(guide, [ids["["], ids["["], ids["]"], ids["]"]])
    assert not walk(guide, [ids["["]] * 4 + [ids["]"]] * 4)
    with pytest.raises(NotImplementedError, match=r"(?i)wordpiece"):
        compiler.compile_json_schema(nested, lazy=True)


def synthetic_tokenizer(seed: int):
    """A WordPiece tokenizer over a random vocabulary of a, b, e, ".", "A", "é" pieces, with
    BERT's normalizer and pre-tokenizer; words longer than 4 characters are the unknown token."""
    rnd = random.Random(seed)
    entries = [c for c in ["a", "b", "e", ".", "##a", "##b", "##e", "A", "##A", "é", "##."] if rnd.random() < 0.85]
    for _ in range(rnd.randint(3, 10)):
        piece = "".join(rnd.choice("abe") for _ in range(rnd.randint(2, 3)))
        entries.append(("##" if rnd.random() < 0.5 else "") + piece)
    entries.append(rnd.choice(["a.", "##a."]))  # never written: punctuation stands alone
    vocab = {t: i for i, t in enumerate(dict.fromkeys(["[UNK]", "[SEP]"] + entries))}
    model = tokenizers.models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=4)
    tok = tokenizers.Tokenizer(model)
    tok.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    tok.add_special_tokens(["[UNK]", "[SEP]"])
    return tok


ALPHABET = "abeAé. "
MAX_CHARS = 5
SYNTHETIC_REGEXES = [r"[abeAé. ]*", r"[abe]+( [abe]+)*", r"(ab|ba|e)+( \.)?", r"[ab]{2,5}|a \. b"]


def guide_sequences(guide, tok, max_chars: int) -> set:
    """Every accepted sequence whose decoding has at most ``max_chars`` characters; asserts on
    the way that no state reached is a dead end (an empty mask)."""
    eos = set(guide.eos_token_ids)
    found = set()
    stack = [(guide.initial_state, ())]
    while stack:
        state, ids = stack.pop()
        allowed = guide.allowed_tokens(state).tolist()
        assert allowed, f"a dead end after {ids}"
        if guide.is_final(state):
            found.add(ids)
        for t in allowed:
            if t in eos:
                continue
            longer = ids + (t,)
            if len(decode_like_hugging_face(tok, longer)) <= max_chars:
                stack.append((guide.next_state(state, t), longer))
    return found


@pytest.mark.parametrize("lazy", [True, False], ids=["lazy", "eager"])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("pattern", SYNTHETIC_REGEXES)
def test_brute_force(pt, seed, pattern, lazy):
    tok = synthetic_tokenizer(seed)
    compiler = pt.Compiler(pt.Vocabulary.from_json(tok.to_str()))
    rx = re.compile(pattern)
    texts = ["".join(p) for n in range(MAX_CHARS + 1) for p in itertools.product(ALPHABET, repeat=n)]
    matching = [s for s in texts if rx.fullmatch(s)]
    expected = {tuple(canonical(tok, s)) for s in matching if representable(tok, s)}
    try:
        guide = compiler.compile_regex(pattern, lazy=lazy)
    except ValueError as e:
        assert expected == set() or expected == {()}, (e, sorted(expected)[:5])
        assert "no canonical token sequence" in str(e)
        return
    assert guide_sequences(guide, tok, MAX_CHARS) == expected
    assert guide.first_difference(compiler.compile_regex(pattern, lazy=not lazy)) is None

    specials = {tok.token_to_id("[UNK]"), tok.token_to_id("[SEP]")}
    ordinary = [i for i in range(tok.get_vocab_size()) if i not in specials]
    decodings = set()
    stack = [()]
    while stack:
        ids = stack.pop()
        text = decode_like_hugging_face(tok, ids)
        if len(text) > MAX_CHARS:
            continue
        if rx.fullmatch(text):
            decodings.add(ids)
        stack.extend(ids + (t,) for t in ordinary)
    if not lazy:  # (agnostic guides are eager only)
        agnostic = compiler.compile_regex(pattern, method="agnostic")
        assert guide_sequences(agnostic, tok, MAX_CHARS) == decodings


@needs_shared("the BERT tokenizer")
def test_command_line_on_bert(capsys):
    """``propertok demo`` and ``check`` read WordPiece texts as the guides do (no space before the
    first word)."""
    from propertok.cli import main

    path = str(tokenizer_path("bert-wordpiece"))
    assert main(["demo", "--tokenizer", path, "--regex", "boolean : (true|false)"]) == 0
    out = capsys.readouterr().out
    assert "canonical admits 2" in out and "' boo' 'lean' ' :' ' true'" in out, out
    assert main(["check", "yes .", "--regex", r"(yes|no) \.", "--tokenizer", path]) == 0
    out = capsys.readouterr().out
    assert "cartesian   1 accepted token sequence(s) spell this text" in out, out


@needs_shared("the BERT tokenizer")
def test_lazy_guide_limit_is_reported_by_name(pt):
    """A lazy guide's states (built, settled, searched) are bounded by max_product_states: past it
    the call fails with LimitExceeded naming it, and the guide keeps failing cleanly."""
    vocab = pt.Vocabulary.from_file(str(tokenizer_path("bert-wordpiece")))
    pattern = r"(un|re)?(affable|believable)"
    for limit in (5, 40):
        guide = None
        with pytest.raises(pt.LimitExceeded, match="max_product_states"):
            guide = pt.Compiler(vocab, max_product_states=limit).compile_regex(pattern)
            for state in range(8):  # first visits, until one passes the limit
                guide.mask(min(state, guide.num_states - 1))
                for t in guide.allowed_tokens(min(state, guide.num_states - 1))[:4].tolist():
                    guide.next_state(min(state, guide.num_states - 1), t)
        if guide is not None:
            with pytest.raises(pt.LimitExceeded, match="max_product_states"):
                for state in range(guide.num_states):
                    guide.allowed_tokens(state)
                    for t in guide.allowed_tokens(state).tolist():
                        guide.next_state(state, t)
    guide = pt.Compiler(vocab, max_product_states=200).compile_regex(pattern)
    assert guide.random_walk(0)


@needs_shared("the BERT tokenizer")
def test_lazy_guide_reports_its_memo_and_bounds_it(pt):
    """A lazy WordPiece guide reports its memo as other lazy guides do (``stats()``), the memo
    grows as decoding reaches new states, and the word-start masks it holds are bounded by
    ``max_guide_bytes``, reported by name."""
    vocab = pt.Vocabulary.from_file(str(tokenizer_path("bert-wordpiece")))
    pattern = r"[a-z]+( [a-z]+)*"
    guide = pt.Compiler(vocab, max_guide_bytes=50_000_000).compile_regex(pattern)
    before = guide.stats()
    assert before["lazy"] and before["lazy_text_automaton"] == "minimal DFA"
    assert before["max_lazy_memo_bytes"] == 50_000_000
    tok = tokenizers.Tokenizer.from_file(str(tokenizer_path("bert-wordpiece")))
    state = guide.initial_state
    for t in canonical(tok, "the quick brown fox"):
        state = guide.next_state(state, t)
    after = guide.stats()
    assert after["lazy_memo_bytes"] > before["lazy_memo_bytes"] > 0
    # One word-start mask is ~4 KB on BERT (30,522 tokens): a budget below it is passed at once.
    small = pt.Compiler(vocab, max_guide_bytes=1000)
    with pytest.raises(pt.LimitExceeded, match="max_guide_bytes"):
        g = small.compile_regex(pattern)
        g.mask(g.initial_state)
