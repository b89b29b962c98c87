"""Special tokens inside grammars (``<|name|>``, ``<[id]>``): a guide allows exactly that token
where the grammar names it, and the text on either side is canonical on its own.

The oracles: the real tokenizer, which splits special tokens out of the text before it tokenizes
(``tokenizers`` with special tokens recognised, for byte-level BPE; segment by segment for
SentencePiece, see ``docs/grammars.md``), and ``lark``, which parses the decoded text with each
special token read as one private-use character. A differential check holds the masks to the
eager regex guides of the text on each side.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

lark = pytest.importorskip("lark", reason="lark is a test dependency (pip install -e '.[test]')")
tokenizers = pytest.importorskip("tokenizers")

from helpers import walk  # noqa: E402
from oracle import tokenizer_path  # noqa: E402

TOKEN_ITEM = re.compile(r"<[^\s>]+>")
SENTINEL = 0xE000  # private use: none of the grammars' text can spell one


class Case:
    def __init__(self, name: str, tokenizer: str, grammar: str, positives: list, whole_text_oracle: bool):
        self.name, self.tokenizer, self.grammar = name, tokenizer, grammar
        self.positives = positives  # each a list of texts and special-token texts, in order
        self.whole_text_oracle = whole_text_oracle
        self.names = list(dict.fromkeys(TOKEN_ITEM.findall(grammar)))

    def lark_parser(self, sentinels: dict):
        """Lark's parser, each special token written as its sentinel character."""
        text = TOKEN_ITEM.sub(lambda m: '"\\u%04x"' % ord(sentinels[m.group(0)]), self.grammar)
        return lark.Lark(text, parser="earley", lexer="dynamic_complete")


CASES = [
    Case("llama3 turns", "llama3", r'''
start: turn+
turn: <|start_header_id|> ROLE <|end_header_id|> "\n\n" TEXT
ROLE: "user" | "assistant" | "ipython"
TEXT: /[A-Za-z ,.!?0-9]{1,24}/
''', [["<|start_header_id|>", "user", "<|end_header_id|>", "\n\nHello there, 42!"],
      ["<|start_header_id|>", "assistant", "<|end_header_id|>", "\n\nHi",
       "<|start_header_id|>", "ipython", "<|end_header_id|>", "\n\n 7 ."]], True),
    Case("qwen2 answer or tool call", "qwen2", r'''
start: ANSWER | ANSWER? <|im_start|> "tool\n" CALL (<[151644]> "tool\n" CALL)*
ANSWER: /[a-z :]{1,16}/
CALL: "{\"name\": \"" /[a-z_]{1,12}/ "\"}"
''', [["the answer: no"], ["<|im_start|>", 'tool\n{"name": "get_weather"}'],
      ["ok ", "<|im_start|>", 'tool\n{"name": "a"}', "<|im_start|>", 'tool\n{"name": "b_c"}']], True),
    Case("mistral7b markers", "mistral7b", r'''
start: WORD (<s> WORD)* <unk>?
WORD: /[a-z]{1,8}( [a-z]{1,8})?/
''', [["hello"], ["hi", "<s>", "there you", "<unk>"], ["a", "<s>", "b", "<s>", "c d"]], False),
]


@pytest.fixture(scope="module")
def hf():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = tokenizers.Tokenizer.from_file(str(tokenizer_path(name)))
        return cache[name]

    return get


def segments(vocab_ids: set, seq: list) -> list:
    """``seq`` cut at the special tokens: text runs (lists of ids) and special ids, in order."""
    out: list = [[]]
    for t in seq:
        if t in vocab_ids:
            out += [t, []]
        else:
            out[-1].append(t)
    return out


def expected_ids(o, ids_of: dict, parts: list) -> list:
    out = []
    for p in parts:
        out += [ids_of[p]] if p in ids_of else o.canonical(p)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_special_tokens_where_the_grammar_names_them(tokenizer_under_test, hf, case):
    tut = tokenizer_under_test(case.tokenizer)
    o, vocab = tut.oracle, tut.vocab
    guide = tut.compiler.compile_grammar(case.grammar)
    assert guide.is_lazy
    ids_of = {}
    for name in case.names:
        m = re.fullmatch(r"<\[(\d+)\]>", name)
        ids_of[name] = int(m.group(1)) if m else hf(case.tokenizer).token_to_id(name)
    special = set(ids_of.values())
    assert special <= set(vocab.special_token_ids)
    as_lark = {i: chr(SENTINEL + k) for k, i in enumerate(sorted(special))}
    parser = case.lark_parser({n: as_lark[i] for n, i in ids_of.items()})

    # Complete: the real tokenizer's ids of each example are accepted, token by token.
    for parts in case.positives:
        seq = expected_ids(o, ids_of, parts)
        if case.whole_text_oracle:
            assert hf(case.tokenizer).encode("".join(parts), add_special_tokens=False).ids == seq, parts
        ok, why = walk(guide, seq)
        assert ok, f"{parts}: {why}"

    # Sound: walks are canonical segment by segment (and as a whole, where the tokenizer can say
    # so), and parse; every walk ends, so no mask led into a dead end.
    walks = [guide.random_walk(seed, max_tokens=40) for seed in range(60)]
    used = set()
    for seq in walks:
        parts = segments(special, seq)
        runs = [p for p in parts if isinstance(p, list) and p]
        assert all(o.is_canonical_batch(runs)), f"{seq}: a text run is not canonical"
        text = "".join(as_lark[p] if isinstance(p, int) else o.decode(p).decode() for p in parts)
        parser.parse(text)
        if case.whole_text_oracle:
            plain = "".join(vocab.token_bytes(t).decode() if t in special else o.decode([t]).decode() for t in seq)
            assert hf(case.tokenizer).encode(plain, add_special_tokens=False).ids == seq, plain
        used |= special & set(seq)
    assert used == special, f"walks never used {special - used}"


@pytest.mark.parametrize("tokenizer, left, token, right", [
    ("mistral7b", r'\{"a": [0-9]{1,3}\}', "<s>", r'(yes|no)( [a-z]{2,6})?'),
    ("llama3", r'[A-Za-z ]{0,12}', "<|start_header_id|>", r'"[^"\\]{0,8}"'),
    ("qwen2", r'(true|false|null)', "<|im_start|>", r'[0-9]+(\.[0-9]{1,2})?'),
])
def test_masks_are_the_regex_guides_on_each_side(tokenizer_under_test, tokenizer, left, token, right):
    """``L <t> R?``: before the token the masks are L's guide's (EOS and the token where L may
    end), after it R's guide's, bit for bit (eager guides of each side: an independent path)."""
    tut = tokenizer_under_test(tokenizer)
    compiler, vocab = tut.compiler, tut.vocab
    grammar = f"start: /{left}/ ({token} /{right}/)?\n"
    guide = compiler.compile_grammar(grammar)
    a, b = compiler.compile_regex(left, lazy=False), compiler.compile_regex(right, lazy=False)
    t = vocab.special_token_ids[[vocab.token_bytes(i) for i in vocab.special_token_ids].index(token.encode())]

    def left_mask(state):
        want = np.array(a.mask(state))
        if a.is_final(state):
            want[t >> 5] |= np.uint32(1 << (t & 31))
        return want

    steps = 0
    for seed in range(12):
        wa, wb = a.random_walk(seed, max_tokens=12), b.random_walk(seed + 100, max_tokens=12)
        sa, sb, s = a.initial_state, b.initial_state, guide.initial_state
        for i, x in enumerate(wa + [t]):
            assert (np.array(guide.mask(s)) == left_mask(sa)).all(), f"seed {seed}: before the token, after {wa[:i]}"
            s = guide.next_state(s, x)
            sa = a.next_state(sa, x) if x != t else None
            steps += 1
        for i, x in enumerate(wb + [vocab.eos_token_ids[0]]):
            assert (np.array(guide.mask(s)) == np.array(b.mask(sb))).all(), f"seed {seed}: after the token and {wb[:i]}"
            sb, s = b.next_state(sb, x), guide.next_state(s, x)
            steps += 1
    assert steps > 50


def test_non_special_added_tokens_are_their_text(tokenizer_under_test):
    """DeepSeek V3's ``<think>`` is matched in the text (not special): naming it is writing it,
    and canonical tokenization gives that one token."""
    tut = tokenizer_under_test("deepseek-v3")
    o = tut.oracle
    guide = tut.compiler.compile_grammar('start: <think> /[a-z ]{1,12}/ "</think>"\n')
    want = o.canonical("<think>hello there</think>")
    assert want[0] == o.token_id("<think>") and want[-1] == o.token_id("</think>")
    assert walk(guide, want)[0]
    assert guide.allowed_tokens(guide.initial_state) == [want[0]]
    walks = [guide.random_walk(seed) for seed in range(20)]
    assert all(o.is_canonical_batch(walks))


BAD = [
    ('start: "a" </s>\n', {}, ValueError, r"rule `start` \(line 1\): </s> .* end-of-sequence token"),
    ('start: "a" <|nope|>\n', {}, ValueError, r"<\|nope\|> is not the text of any token"),
    ('start: "a" <[1000]>\n', {}, ValueError, r"<\[1000\]> \(id 1000, .*\) is an ordinary token"),
    ('start: "a" <[99999999]>\n', {}, ValueError, r"<\[99999999\]> is past the tokenizer's 32000 token ids"),
    ('start: A\nA: "a" <s>\n', {}, ValueError, r"line 2: special token <s> inside a terminal"),
    ('start: "a" <[1-5]>\n', {}, ValueError, r"a token id is `<\[N\]>` with one decimal number"),
    ('start: "a" < s>\n', {}, ValueError, r"needs a closing `>`"),
    ('root ::= "a" !<[1]>\n', {"syntax": "gbnf"}, NotImplementedError, r"negated tokens"),
    ('start: "a" <s>\n', {"lazy": False}, NotImplementedError, r"special token <s>.*lazy canonical guides"),
    ('start: "a" <s>\n', {"method": "direct"}, NotImplementedError, r"special token <s>.*lazy canonical guides"),
]


@pytest.mark.parametrize("grammar, options, error, message", BAD, ids=[b[3][:24] for b in BAD])
def test_bad_token_names_are_refused_by_name(mistral, grammar, options, error, message):
    with pytest.raises(error, match=message):
        mistral.compiler.compile_grammar(grammar, **options)


def test_special_tokens_have_no_regex_and_no_eager_form(pt, mistral):
    with pytest.raises(NotImplementedError, match=r"names the special token <s>.*Compiler.compile_grammar"):
        pt.grammar_to_regex('start: "a" <s>\n')
    c = mistral.compiler
    guide = c.compile_grammar('root ::= "a" <[1]> "b"\n', "gbnf")
    assert walk(guide, mistral.oracle.canonical("a") + [1] + mistral.oracle.canonical("b"))[0]
    with pytest.raises(NotImplementedError, match="no eager form"):
        guide.materialize()


def test_cli_compiles_a_grammar_with_special_tokens(tmp_path, capsys):
    import json

    from propertok.cli import main

    path = tmp_path / "call.lark"
    path.write_text('start: /[a-z]{1,6}/ | <s> "{" /[0-9]{1,3}/ "}"\n')
    assert main(["compile", "--grammar", str(path)]) == 0
    assert "regex       none: the grammar names special tokens" in capsys.readouterr().out
    assert main(["compile", "--grammar", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["lazy"] and report["regex"] is None and len(report["samples"]) == 3
    assert main(["compile", "--grammar", str(path), "--eager"]) == 2
    assert "lazy canonical guides" in capsys.readouterr().err
