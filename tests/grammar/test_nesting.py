"""Grammars that nest without bound (``value`` → ``array`` → ``value``): lazy guides run a
pushdown automaton over the grammar's rules (``rust/src/lazy/pushdown.rs``), with exact
canonical masks.

The oracles: the real tokenizer (``tokenizers``: every walk is its own canonical encoding, every
text of the grammar's is accepted as the tokenizer encodes it), ``lark`` (every walk's text is
in the grammar's language), and the eager guides of the grammar unrolled to a depth (an
independent construction: a regex, CartesianMerge or the pre-tokenized builder), which must give
the same masks bit for bit wherever the text is shallower than that depth.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

lark = pytest.importorskip("lark", reason="lark is a test dependency (pip install -e '.[test]')")

from helpers import finishing_walks, walk  # noqa: E402

GRAMMAR = r'''
start: value
value: object | array | STRING | NUMBER | "true" | "null"
object: "{" (pair (SEP pair)*)? "}"
pair: STRING (":" | ": ") value
array: "[" (value (SEP value)*)? "]"
SEP: ", " | ","
STRING: "\"" /[a-z ]{1,8}/ "\""
NUMBER: /-?[1-9][0-9]{0,3}/
'''

TOKENIZERS = ["mistral7b", "llama3", "qwen2", "gpt2"]
KEYS = ["a", "id", "name", "tags", "x y"]


def random_value(rng: random.Random, depth: int, compact: bool = False) -> str:
    """A random text of ``GRAMMAR`` nested at most ``depth`` containers deep (exactly ``depth`` on
    its first path when ``rng`` allows it); ``compact``: of ``CONTAINERS`` (strings of up to
    three letters only, no spaces)."""
    if depth == 0 or rng.random() < 0.15:
        if compact:
            return '"' + "".join(rng.choice("xyz") for _ in range(rng.randint(1, 3))) + '"'
        return rng.choice(['"' + rng.choice(KEYS) + '"', str(rng.randint(-999, 9999) or 1), "true", "null"])
    sep = "," if compact else rng.choice([", ", ","])
    items = [random_value(rng, depth - 1, compact)] + [random_value(rng, rng.randint(0, depth - 1), compact)
                                                       for _ in range(rng.randint(0, 2))]
    if rng.random() < 0.5:
        return "[" + sep.join(items) + "]"
    colon = ":" if compact else rng.choice([":", ": "])
    key = (lambda: '"k"') if compact else (lambda: f'"{rng.choice(KEYS)}"')
    return "{" + sep.join(f"{key()}{colon}{v}" for v in items) + "}"


@pytest.fixture(scope="module")
def parser():
    return lark.Lark(GRAMMAR, parser="earley", lexer="dynamic_complete")


@pytest.fixture(scope="module")
def guides(tokenizer_under_test):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = tokenizer_under_test(name).compiler.compile_grammar(GRAMMAR)
        return cache[name]

    return get


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_texts_nested_ten_deep_are_accepted_as_the_tokenizer_encodes_them(tokenizer_under_test, guides, parser,
                                                                            tokenizer):
    """Complete: 24 random texts nested up to 10 containers deep, each accepted as its canonical
    encoding (lark confirms each is in the language first)."""
    o, guide = tokenizer_under_test(tokenizer).oracle, guides(tokenizer)
    rng = random.Random(7)
    texts = [random_value(rng, 10) for _ in range(24)] + ["[" * 40 + "1" + "]" * 40]
    for text in texts:
        parser.parse(text)
        ok, why = walk(guide, o.canonical(text))
        assert ok, f"{text!r}: {why}"


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_every_walk_is_canonical_in_the_language_and_can_finish(tokenizer_under_test, guides, parser, tokenizer):
    """Sound and no dead end: random mask-following walks (past 80 tokens, a shortest way to the
    end) never meet an empty mask, end final, are their own canonical encoding, and spell a text
    of the grammar. (Uniform choices rarely open containers: the next test goes deep.)"""
    tut = tokenizer_under_test(tokenizer)
    o, guide = tut.oracle, guides(tokenizer)
    walks = finishing_walks(guide, 24, 80)
    for w in walks:
        parser.parse(o.decode(w).decode())
    assert all(o.is_canonical_batch(walks))


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_tokens_allowed_deep_inside_are_canonical_and_lead_somewhere(tokenizer_under_test, guides, tokenizer):
    """Sound and no dead end where random walks rarely go: along the canonical encodings of texts
    nested 8 deep, 3 random allowed tokens at every step each make a canonical sequence and a
    state whose mask is not empty."""
    o, guide = tokenizer_under_test(tokenizer).oracle, guides(tokenizer)
    rng = random.Random(11)
    prefixes = []
    for _ in range(4):
        ids = o.canonical(random_value(rng, 8))
        state = guide.initial_state
        for i, t in enumerate(ids):
            allowed = [int(a) for a in guide.allowed_tokens(state) if a not in guide.eos_token_ids]
            for a in rng.sample(allowed, min(3, len(allowed))):
                prefixes.append(ids[:i] + [a])
                assert len(guide.allowed_tokens(guide.next_state(state, a))) > 0, ids[:i] + [a]
            state = guide.next_state(state, t)
    assert len(prefixes) > 100
    assert all(o.is_canonical_batch(prefixes))


@pytest.mark.parametrize("tokenizer", ["mistral7b", "llama3", "qwen2"])
def test_a_bounded_guide_is_the_unrolled_guide(tokenizer_under_test, tokenizer):
    """Differential, bit for bit: with ``max_recursion_depth=2`` (containers 2 deep) the lazy guide
    (the pushdown automaton, bounded) and the eager guide of the grammar unrolled into a regex
    accept the same language by two constructions; their masks agree at every step of the eager
    guide's random walks and of texts nested 2 deep. (The unbounded guide is compared with deep
    unrollings on Mistral-7B in ``rust/src/lazy/tests.rs``: on byte-level tokenizers a token's
    canonicity can depend on several more brackets after it, ``",[`` before ``[[``, so "shallow
    enough" is not simple.)"""
    tut = tokenizer_under_test(tokenizer)
    compiler = tut.compiler
    bounded = compiler.compile_grammar(CONTAINERS, max_recursion_depth=2)
    eager = compiler.compile_grammar(CONTAINERS, lazy=False, max_recursion_depth=2)
    rng = random.Random(5)
    walks = [eager.random_walk(seed, max_tokens=40) for seed in range(8)]
    walks += [tut.oracle.canonical(random_value(rng, 2, compact=True)) for _ in range(24)]
    assert _same_masks_along(bounded, eager, walks) > 150


@pytest.mark.parametrize("tokenizer", ["mistral7b", "llama3"])
def test_a_prefetched_unbounded_guide_is_the_plain_one(tokenizer_under_test, guides, tokenizer):
    """``prefetch_seconds`` on the unbounded (pushdown) guide fills states in the compile and
    changes no mask: bit for bit the guide compiled without it, along its random walks and texts
    nested 6 deep."""
    tut = tokenizer_under_test(tokenizer)
    plain = guides(tokenizer)
    prefetched = tut.pt.Compiler(tut.vocab, prefetch_seconds=0.5, **tut._cache_kwargs()).compile_grammar(GRAMMAR)
    rng = random.Random(7)
    walks = [plain.random_walk(seed, max_tokens=40) for seed in range(6)]
    walks += [tut.oracle.canonical(random_value(rng, 6)) for _ in range(6)]
    assert _same_masks_along(prefetched, plain, walks) > 100


def _same_masks_along(a, b, walks) -> int:
    """Asserts that guides ``a`` and ``b`` have the same masks at every step of each walk and
    after its last token; returns the number of masks compared."""
    steps = 0
    for k, w in enumerate(walks):
        s_a, s_b = a.initial_state, b.initial_state
        for i in range(len(w) + 1):
            assert (np.array(a.mask(s_a)) == np.array(b.mask(s_b))).all(), f"walk {k}, step {i}"
            steps += 1
            if i < len(w):
                s_a, s_b = a.next_state(s_a, w[i]), b.next_state(s_b, w[i])
    return steps


# The stack-context rows of the design note (§1.3): after the string value `x`, which tokens
# may close it depends on containers up to three frames down: (prefix, a closing token the note
# measured allowed on Llama 3, one it measured refused there).
ROWS = [
    ('{"a":"x', '"}', '"'),
    ('{"a":{"b":"x', '"}}', '"}'),
    ('[{"a":"x', '"}', '"}]'),
    ('{"a":[{"b":"x', '"}', '"}]}'),
    ('{"a":["x', '"]}', '"]'),
    ('[{"a":["x', '"]', '"]}'),
]
CONTAINERS = r'''
start: value
value: object | array | STRING
object: "{" pair ("," pair)* "}"
pair: STRING ":" value
array: "[" value ("," value)* "]"
STRING: "\"" /[a-z]{1,3}/ "\""
'''


@pytest.mark.parametrize("tokenizer", ["mistral7b", "llama3"])
def test_closing_quotes_depend_on_the_enclosing_containers(tokenizer_under_test, tokenizer):
    tut = tokenizer_under_test(tokenizer)
    o = tut.oracle
    guide = tut.compiler.compile_grammar(CONTAINERS)
    # Bounded at depth 8: the pushdown automaton that the test above holds to the eager guides.
    bounded = tut.compiler.compile_grammar(CONTAINERS, max_recursion_depth=8)

    def closing(g, text):
        s = g.initial_state
        for t in o.canonical(text):
            s = g.next_state(s, t)
        return {o.decode([t]).decode() for t in g.allowed_tokens(s) if set(o.decode([t])) <= set(b'"}]')}

    for prefix, required, forbidden in ROWS:
        got = closing(guide, prefix)
        assert got == closing(bounded, prefix), prefix
        if tokenizer == "llama3":
            assert required in got and forbidden not in got, (prefix, sorted(got))


def test_stats_count_each_rules_stacks(mistral):
    """A nesting grammar's stats count the stack frames made and, per rule, the distinct stacks
    it was decided under; deeper texts meet more of them, and a regex's stats have neither."""
    guide = mistral.compiler.compile_grammar(GRAMMAR)
    before = guide.stats()
    assert before["lazy_text_automaton"] == "pushdown"
    assert set(before["grammar_stacks_per_rule"]) == {"start", "value", "object", "array", "pair"}
    ok, why = walk(guide, mistral.oracle.canonical('[[[[[["a"]]]]]]'))
    assert ok, why
    after = guide.stats()
    assert after["grammar_stack_frames"] >= before["grammar_stack_frames"] + 4
    # Six arrays open: `value` has been read under at least seven stacks (none, then one a level).
    assert after["grammar_stacks_per_rule"]["value"] >= 7
    assert all(after["grammar_stacks_per_rule"][r] >= n for r, n in before["grammar_stacks_per_rule"].items())
    assert "grammar_stack_frames" not in mistral.compiler.compile_regex("[a-z]+").stats()


def test_bounds_and_refusals(mistral):
    compiler = mistral.compiler
    bounded = compiler.compile_grammar(CONTAINERS, max_recursion_depth=1)
    o = mistral.oracle
    # Depth 1: each rule open at most twice, so one container holds plain values.
    assert walk(bounded, o.canonical('{"a":"x"}'))[0] and walk(bounded, o.canonical('["y","z"]'))[0]
    assert not walk(bounded, o.canonical('{"a":["x"]}'))[0]
    with pytest.raises(NotImplementedError, match=r"`sum` is left-recursive \(sum → sum\)"):
        compiler.compile_grammar('start: sum\nsum: sum "+" sum | "(" sum ")" | "1"\n')
    with pytest.raises(ValueError, match=r"no string of the grammar's start rule `start` can be written"):
        compiler.compile_grammar('start: "(" start ")"\n')
    unbounded = compiler.compile_grammar(CONTAINERS)
    with pytest.raises(NotImplementedError, match=r"no eager form"):
        unbounded.materialize()
    with pytest.raises(NotImplementedError, match=r"count_sequences walks every state .* max_recursion_depth"):
        unbounded.count_sequences()
    with pytest.raises(NotImplementedError, match=r"first_difference"):
        unbounded.first_difference(bounded)
    assert bounded.count_sequences() is None  # bounded nesting, unbounded lists: infinite
    with pytest.raises(NotImplementedError, match=r"max_recursion_depth"):
        compiler.compile_grammar(CONTAINERS, lazy=False)
