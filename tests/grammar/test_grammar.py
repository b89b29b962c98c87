"""Grammars (``grammar_to_regex``, ``Compiler.compile_grammar``) against an independent oracle:
the ``lark`` package's Earley parser with ``lexer="dynamic_complete"``, the language propertok
reads a Lark grammar as (docs/grammars.md). GBNF grammars are judged by a Lark grammar written
by hand for the same language.

* Language: on strings drawn around each grammar's examples (mutations of them and random
  strings over its alphabet), the regex matches exactly what lark accepts, for grammars without
  nesting recursion; with ``max_recursion_depth`` it matches a subset.
* Guides: on real tokenizers, every example's canonical encoding is accepted, and random walks
  along the masks are canonical and parse.
"""

from __future__ import annotations

import json
import random

import pytest

lark = pytest.importorskip("lark", reason="lark is a test dependency (pip install -e '.[test]')")

from grammar_cases import CASES, GrammarCase  # noqa: E402
from helpers import walk  # noqa: E402


def language(case: GrammarCase, syntax: str) -> str:
    return case.lark if syntax == "lark" else case.gbnf


def lark_parser(case: GrammarCase):
    return lark.Lark(case.lark, parser="earley", lexer="dynamic_complete", start=case.lark_start)


def lark_accepts(parser, text: str) -> bool:
    try:
        parser.parse(text)
        return True
    except lark.exceptions.LarkError:
        return False


def probe_strings(case: GrammarCase, n: int, seed: int) -> list:
    """The examples, random edits of them, and random strings over their characters."""
    rng = random.Random(seed)
    examples = case.positives + case.negatives
    alphabet = sorted(set("".join(examples) + case.extra_alphabet))
    out = list(examples)
    while len(out) < n:
        if rng.random() < 0.7:
            s = list(rng.choice(examples))
            for _ in range(rng.randint(1, 3)):
                op = rng.randrange(3)
                i = rng.randint(0, len(s))
                if op == 0:
                    s.insert(i, rng.choice(alphabet))
                elif s and op == 1:
                    del s[min(i, len(s) - 1)]
                elif s:
                    s[min(i, len(s) - 1)] = rng.choice(alphabet)
            out.append("".join(s))
        else:
            out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))))
    return out


def case_ids(cases):
    return [c.name for c in cases]


SPELLINGS = [(c, "lark") for c in CASES] + [(c, "gbnf") for c in CASES if c.gbnf is not None]


@pytest.mark.parametrize("case, syntax", SPELLINGS, ids=[f"{c.name}-{s}" for c, s in SPELLINGS])
def test_regex_language_is_lark_language(pt, case, syntax):
    """Exact where there is no nesting recursion; a subset (containing every example within the
    depth) where ``max_recursion_depth`` unrolls it."""
    parser = lark_parser(case)
    for s in case.positives:
        assert lark_accepts(parser, s), f"example {s!r} is not in lark's language: fix the case"
    for s in case.negatives:
        assert not lark_accepts(parser, s), f"counterexample {s!r} is in lark's language: fix the case"
    regex = pt.grammar_to_regex(language(case, syntax), syntax, max_recursion_depth=case.depth)
    dfa = pt.ByteDfa(regex)
    counts = {"accepted": 0, "refused": 0}
    for s in probe_strings(case, 1500, seed=len(case.name)):
        ours = dfa.matches(s.encode())
        theirs = lark_accepts(parser, s)
        if case.depth is None:
            assert ours == theirs, f"{s!r}: propertok {ours}, lark {theirs}"
        else:
            assert not ours or theirs, f"{s!r}: propertok accepts what lark refuses"
        counts["accepted" if ours else "refused"] += 1
    for s in case.positives:
        assert dfa.matches(s.encode()), f"example {s!r} refused"
    assert counts["accepted"] >= 20 and counts["refused"] >= 20, counts


@pytest.fixture(scope="module", params=["mistral7b", "llama3", "gpt2"])
def tokenizer(request, tokenizer_under_test):
    return tokenizer_under_test(request.param)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_guides_are_canonical_and_parse(tokenizer, case):
    """Complete on the examples, sound on random walks: canonical and accepted by lark. On the
    default guides, which are lazy for grammars."""
    o = tokenizer.oracle
    guide = tokenizer.compiler.compile_grammar(case.lark, max_recursion_depth=case.depth)
    assert guide.is_lazy
    for s in case.positives:
        ok, why = walk(guide, o.canonical(s))
        assert ok, f"{s!r}: its canonical encoding is refused: {why}"
    parser = lark_parser(case)
    walks = [guide.random_walk(seed, max_tokens=48) for seed in range(60)]
    walks = [w for w in walks if guide.is_final(_end_state(guide, w))]
    assert len(walks) >= 30
    for seq, canonical in zip(walks, o.is_canonical_batch(walks)):
        text = o.decode(seq).decode("utf-8")
        assert canonical, f"walk {seq} ({text!r}) is not canonical"
        assert lark_accepts(parser, text), f"walk {seq} decodes to {text!r}, outside the grammar"


def _end_state(guide, seq):
    state = guide.initial_state
    for t in seq:
        state = guide.next_state(state, t)
    return state


def test_gbnf_and_lark_compile_to_the_same_guide(mistral):
    case = CASES[0]
    a = mistral.compiler.compile_grammar(case.lark, lazy=False)
    b = mistral.compiler.compile_grammar(case.gbnf, "gbnf", lazy=False)
    assert not a.is_lazy and a.first_difference(b) is None


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_lazy_default_is_the_eager_guide(mistral, case):
    lazy = mistral.compiler.compile_grammar(case.lark, max_recursion_depth=case.depth)
    eager = mistral.compiler.compile_grammar(case.lark, max_recursion_depth=case.depth, lazy=False)
    assert lazy.is_lazy and not eager.is_lazy
    # Masks side by side along random walks of the eager guide, EOS bits included (the whole
    # lazy guide's `materialize()` takes minutes on the JSON grammar).
    steps = 0
    for seed in range(30):
        a, b = lazy.initial_state, eager.initial_state
        for t in eager.random_walk(seed, max_tokens=40):
            assert (lazy.mask(a) == eager.mask(b)).all(), f"seed {seed}, step {steps}"
            assert lazy.is_final(a) == eager.is_final(b)
            a, b = lazy.next_state(a, t), eager.next_state(b, t)
            steps += 1
    assert steps > 100


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_prefetched_grammar_guides_are_the_eager_guide(pt, mistral, case):
    """``prefetch_seconds`` on a grammar's lazy guide fills states in the compile and changes no
    mask: the eager guide's masks along random walks."""
    compiler = pt.Compiler(mistral.vocab, prefetch_seconds=1.0)
    lazy = compiler.compile_grammar(case.lark, max_recursion_depth=case.depth)
    eager = mistral.compiler.compile_grammar(case.lark, max_recursion_depth=case.depth, lazy=False)
    assert lazy.is_lazy
    steps = 0
    for seed in range(10):
        a, b = lazy.initial_state, eager.initial_state
        for t in eager.random_walk(seed, max_tokens=40):
            assert (lazy.mask(a) == eager.mask(b)).all(), f"seed {seed}, step {steps}"
            a, b = lazy.next_state(a, t), eager.next_state(b, t)
            steps += 1
    assert steps > 30


def test_recursion_needs_a_depth(pt):
    nested = CASES[3].lark
    with pytest.raises(NotImplementedError, match=r"`sum` is recursive \(sum → product → atom → sum\).*max_recursion_depth"):
        pt.grammar_to_regex(nested)
    shallow = pt.ByteDfa(pt.grammar_to_regex(nested, max_recursion_depth=0))
    deeper = pt.ByteDfa(pt.grammar_to_regex(nested, max_recursion_depth=1))
    assert shallow.matches(b"1+2") and not shallow.matches(b"(1)")
    assert deeper.matches(b"(1)") and not deeper.matches(b"((1))")


@pytest.mark.parametrize(
    "text, syntax, error, message",
    [
        ("start: a\n", "lark", ValueError, "invalid grammar: line 1: `a` is not defined"),
        ('start: "x"\nstart: "y"\n', "lark", ValueError, "defined twice"),
        ("start: /a(?=b)/\n", "lark", ValueError, "look-around"),
        ("start: <|python_tag|>\n", "lark", NotImplementedError, "names the special token <|python_tag|>"),
        ("%import common.NUMBERS\n", "lark", ValueError, "common has no `NUMBERS`"),
        ('root ::= "a" b\n', "gbnf", ValueError, "`b` is not defined"),
        ('root ::= "a\n', "gbnf", ValueError, "line 1"),
        ('root ::= "a"', "ebnf", ValueError, 'unknown grammar syntax "ebnf"'),
        ('start: "(" start ")"\n', "lark", NotImplementedError, "recursive"),
    ],
)
def test_errors_name_the_problem(pt, text, syntax, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?").replace("|", r"\|")):
        pt.grammar_to_regex(text, syntax)


def test_empty_language_and_size_limit(pt):
    with pytest.raises(ValueError, match="empty language"):
        pt.grammar_to_regex('start: "(" start ")"\n', max_recursion_depth=4)
    with pytest.raises(pt.LimitExceeded, match="max_regex_bytes"):
        pt.grammar_to_regex(CASES[3].lark, max_recursion_depth=8, max_regex_bytes=5_000)


def test_cli_compiles_a_grammar_file(tmp_path, capsys):
    from propertok.cli import main

    path = tmp_path / "greeting.gbnf"
    path.write_text(CASES[0].gbnf)
    assert main(["compile", "--grammar", str(path)]) == 0
    out = capsys.readouterr().out
    assert "grammar     " in out and "samples" in out
    path = tmp_path / "nested.lark"
    path.write_text(CASES[3].lark)
    # Nesting: unbounded in a lazy guide (no regex to show), refused eagerly without a depth.
    assert main(["compile", "--grammar", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    parser = lark_parser(CASES[3])
    assert report["regex"] is None and all(lark_accepts(parser, s["text"]) for s in report["samples"])
    assert main(["compile", "--grammar", str(path), "--eager"]) == 2
    assert "max_recursion_depth" in capsys.readouterr().err
    assert main(["compile", "--grammar", str(path), "--max-recursion-depth", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    # Lazy by default, as Compiler.compile_grammar: nothing is counted, every sample is a match.
    assert report["lazy"] and "count_sequences" not in report and "num_states" not in report
    assert all(lark_accepts(parser, sample["text"]) for sample in report["samples"])


def test_cli_counts_an_eager_grammar_guide(tmp_path, capsys):
    from propertok.cli import main

    path = tmp_path / "two.lark"
    path.write_text('start: "yes" | "no"\n')
    assert main(["compile", "--grammar", str(path), "--eager", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert not report["lazy"] and report["count_sequences"] == 2 and report["num_states"] >= 3
    assert main(["compile", "--grammar", str(path)]) == 0
    out = capsys.readouterr().out
    assert "lazy guide; --eager counts them all" in out and "sequences" not in out
    with pytest.raises(SystemExit):
        main(["compile", "yes|no", "--lazy", "--eager"])
    assert "not allowed with argument --lazy" in capsys.readouterr().err
