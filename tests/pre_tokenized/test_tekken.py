"""Mistral's Tekken tokenizer (Nemo, Small 3, Large 2, Pixtral, Devstral): read from its own file
format and held to ``mistral_common``'s own encoder (``support/tekken_oracle.py``), never to
propertok's reading of the file.

* ``test_reads_the_tekken_file``: every token's bytes, the special ids below the vocabulary
  (``0..999``, ``[TOOL_CALLS]`` is 9), the EOS, the pattern, and the same Vocabulary from
  ``from_file``, ``from_tokenizer(Tekkenizer)`` and ``from_tokenizer(MistralTokenizer)``.
* ``test_targeted_case``: the byte-level targeted cases (``pretok_support.CASES``) plus Tekken's
  case-split letters (``HelloWorld`` is ``Hello`` + ``World``): canonical encodings are accepted by
  the case's guide and by the ``(?s:.*)`` guide, the byte-by-byte spelling and the spelling of the
  text encoded in two chunks are refused, and random walks of the case's guide re-encode to
  themselves.
* ``test_random_pairs_and_triples``: every single token, then random pairs and triples (biased to
  canonical ones and near misses), accepted by the ``(?s:.*)`` guide iff the Tekkenizer says
  canonical.
* ``test_tool_call_schema``: a JSON Schema guide's random walks are canonical and valid.

The guides are lazy (what a server would build); the tokenizer DFA is built once, in a child
process, into the session's cache (1.3 GB at its peak, 5.5 s on 2 cores).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import zlib

import jsonschema
import pytest

from helpers import TOKENIZER_DFA_CACHE_ENV, MaskWalker, check_walks, walk
from pretok_support import CASES, TokenSequenceSampler, judge_token_sequences
from tekken_oracle import MISSING_REASON, TekkenOracle, tekken_files

if sys.version_info < (3, 11):
    pytest.skip(MISSING_REASON, allow_module_level=True)

FILES = tekken_files()
GENERAL = r"(?s:.*)"
WALKS = 100
# Tekken's pattern splits a run of letters before an upper-case letter that follows a lower-case
# one, and keeps marks and modifier / other letters (\p{Lm}, \p{Lo}) on both sides.
CASE_SPLIT = (
    r"[\p{L}\p{M}\p{N} '.]+",
    ["HelloWorld", "iPhone", "McDonald's", "XMLHttpRequest", "camelCaseHTTPServer", "ПриветМир",
     "ΚαλημέραΚόσμε", "İstanbulİZMİR", "ǅemalǅ", "ʰʲaʰB", "नमस्तेदुनिया", "中文ABc中文", "aB1cD2", "A.B'c"],
)
ALL_CASES = {**CASES, "case_split": CASE_SPLIT}


def test_mistral_common_ships_tekken_files():
    """The test dependency is installed and ships the files (so nothing below can pass vacuously)."""
    assert FILES and all(f.is_file() for f in FILES), FILES


@pytest.fixture(scope="module")
def tekken(pt, tmp_path_factory):
    """``(oracle, compiler, (?s:.*) guide)`` for the newest file; the tokenizer DFA is built in a
    child process into the session's cache folder (the allocator would keep its peak here)."""
    path = FILES[-1]
    o = TekkenOracle(path)
    cache = os.environ.get(TOKENIZER_DFA_CACHE_ENV) or str(tmp_path_factory.mktemp("tekken-cache"))
    build = "import sys, propertok as pt; pt.Compiler(pt.Vocabulary.from_file(sys.argv[1]), cache_dir=sys.argv[2]).tokenizer_dfa_stats()"
    proc = subprocess.run([sys.executable, "-c", build, str(path), cache], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    compiler = pt.Compiler(pt.Vocabulary.from_file(path), cache_dir=cache)
    return o, compiler, compiler.compile_regex(GENERAL, lazy=True)


@pytest.mark.parametrize("index", range(len(FILES)))
def test_reads_the_tekken_file(pt, index):
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    path = FILES[index]
    o = TekkenOracle(path)
    vocab = pt.Vocabulary.from_file(path)
    assert vocab.num_tokens == vocab.vocab_size == o.num_tokens == 131072
    assert vocab.kind == "byte-level-bpe"
    assert vocab.canonical_unsupported_reason is None
    assert vocab.special_token_ids == list(range(1000))
    assert vocab.eos_token_ids == [o.tekkenizer.eos_id] == [2]
    assert vocab.token_bytes(9) == b"[TOOL_CALLS]" and vocab.token_bytes(999) == b"<SPECIAL_999>"
    assert vocab.pre_tokenizer == {
        "stages": [o.pattern], "byte_mapped_stages": [], "normalization": "none", "ignore_merges": True}
    mismatched = [t for t in range(o.num_tokens) if vocab.token_bytes(t) != o.token_bytes(t)]
    assert not mismatched, mismatched[:10]
    for other in (pt.Vocabulary.from_tokenizer(o.tekkenizer), pt.Vocabulary.from_tokenizer(MistralTokenizer.from_file(path))):
        assert (other.num_tokens, other.eos_token_ids, other.special_token_ids) == (o.num_tokens, [2], list(range(1000)))
        assert all(other.token_bytes(t) == vocab.token_bytes(t) for t in range(0, o.num_tokens, 997))


def test_special_tokens_only_at_eos(tekken):
    """No special id (all below the vocabulary) is ever allowed inside text; EOS (id 2) is allowed
    where the text is complete (the empty text is)."""
    o, _, guide = tekken
    walker = MaskWalker(guide)
    assert walker.initial_bits[: len(o.special_ids)].nonzero()[0].tolist() == [2]
    state = guide.next_state(guide.initial_state, o.canonical("Hello")[0])
    assert walker.allowed(state, 2) and not walker.allowed(state, 9)


def other_spellings(o, s: str, canonical: list[int]) -> dict[str, list[int]]:
    """Spellings of ``s`` other than its canonical one: byte by byte, and ``s`` encoded in two
    chunks at every cut (the first that differs)."""
    out = {}
    by_byte = [1000 + b for b in s.encode("utf-8")]  # ranks 0..255 are the bytes
    if by_byte != canonical:
        out["bytes"] = by_byte
    for i in range(1, len(s)):
        chunks = o.canonical(s[:i]) + o.canonical(s[i:])
        if chunks != canonical:
            out["two_chunks"] = chunks
            break
    return out


@pytest.mark.parametrize("case", sorted(ALL_CASES))
def test_targeted_case(pt, tekken, case, record_property):
    o, compiler, general = tekken
    pattern, strings = ALL_CASES[case]
    guide = compiler.compile_regex(pattern, lazy=True)
    problems: list[str] = []
    counts: collections.Counter = collections.Counter()
    assert o.tekkenizer.decode(o.canonical("x")) == "x"
    for s in strings:
        ids = o.canonical(s)
        assert o.decode(ids) == s.encode("utf-8"), s
        counts["complete_checked"] += 1
        for name, g in (("case", guide), ("general", general)):
            ok, why = walk(g, ids)
            if not ok:
                problems.append(f"{name} guide refuses canonical({s!r}) = {ids}: {why}")
        for how, other in other_spellings(o, s, ids).items():
            counts[f"refused_{how}"] += 1
            for name, g in (("case", guide), ("general", general)):
                if walk(g, other)[0]:
                    problems.append(f"{name} guide accepts the {how} spelling {other} of {s!r} (canonical {ids})")
    check_walks(o, guide, pattern, pt.ByteDfa(pattern), range(1000, 1000 + WALKS), problems, counts)
    print(f"tekken {case}: {dict(counts)}")
    record_property("counts", dict(counts))
    assert counts["complete_checked"] == len(strings) and counts["walks"] == WALKS, dict(counts)
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])


def test_case_split_is_what_tekken_does():
    """The harness: the case-split strings really are split inside a letter run by the Tekkenizer
    (so ``test_targeted_case['case_split']`` tests the case-aware classes)."""
    o = TekkenOracle(FILES[-1])
    assert [o.decode([t]) for t in o.canonical("HelloWorld")] == [b"Hello", b"World"]
    assert [o.decode([t]) for t in o.canonical("aBc")][0] == b"a"


def test_random_pairs_and_triples(tekken, record_property):
    o, _, general = tekken
    n_samples = int(os.environ.get("PROPERTOK_PAIR_SAMPLES", "3000"))
    sampler = TokenSequenceSampler(o, seed=zlib.crc32(b"tekken"))
    report, problems = judge_token_sequences(o, MaskWalker(general), sampler, n_samples)
    report["disagreements"] = len(problems)
    print(f"tekken random sequences ({n_samples} of each length): {report}")
    record_property("report", report)
    assert not problems, f"{len(problems)} disagreements with the oracle:\n" + "\n".join(problems[:30])


def test_tool_call_schema(tekken):
    """A tool call's arguments: random walks decode to valid instances and are canonical."""
    o, compiler, _ = tekken
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 30}, "days": {"type": "integer"},
                       "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "days", "unit"],
    }
    guide = compiler.compile_json_schema(json.dumps(schema), lazy=True)
    walks = [guide.random_walk(seed) for seed in range(200)]
    assert all(o.is_canonical_batch(walks))
    for w in walks:
        jsonschema.validate(json.loads(o.decode(w)), schema)
    canonical = o.canonical('{"city": "Paris", "days": 3, "unit": "celsius"}')
    assert walk(guide, canonical)[0]


def test_tool_call_grammar_with_the_special_token(tekken):
    """``[TOOL_CALLS]`` (id 9, below the vocabulary) named in a grammar as llguidance writes it:
    allowed exactly there, and the JSON after it canonical on its own (mistral_common never makes
    a special token from text, so each text run is judged alone)."""
    o, compiler, _ = tekken
    grammar = r'''
start: ANSWER | <TOOL_CALLS> "[" call (", " call)* "]"
call: "{\"name\": \"" NAME "\", \"arguments\": {\"city\": \"" CITY "\"}}"
NAME: /[a-z_]{1,16}/
CITY: /[A-Z][a-z]{1,12}/
ANSWER: /[A-Za-z ,.]{1,40}/
'''
    guide = compiler.compile_grammar(grammar)
    call = '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    assert walk(guide, [9] + o.canonical(call))[0]
    assert walk(guide, o.canonical("It is sunny."))[0]
    state = guide.next_state(guide.initial_state, 9)
    assert 9 not in guide.allowed_tokens(state)
    walks, runs = [], []
    for seed in range(40):
        w = guide.random_walk(seed, max_tokens=60)
        assert 9 not in w[1:], w
        runs.append(w[1:] if w[:1] == [9] else w)
        walks.append(w)
    assert all(o.is_canonical_batch(runs))
    for w, run in zip(walks, runs):
        text = o.decode(run)
        if w[:1] == [9]:
            calls = json.loads(text)
            assert all(set(c) == {"name", "arguments"} for c in calls)
    # Random walks rarely pick the one special token among ~100,000: walk from after it too.
    state = guide.next_state(guide.initial_state, 9)
    tokens = [9]
    while not guide.is_final(state):
        allowed = [t for t in guide.allowed_tokens(state) if t != 2]
        t = allowed[len(tokens) * 7919 % len(allowed)]
        tokens.append(t)
        state = guide.next_state(state, t)
    assert o.is_canonical_batch([tokens[1:]])[0]
    assert json.loads(o.decode(tokens[1:]))[0]["arguments"]["city"]


def test_bad_input_is_named(pt, tmp_path):
    """A malformed Tekken file names the field; mistral_common's SentencePiece tokenizers (found by
    duck typing, like its Tekkenizer) are refused with a pointer to their tokenizer.json."""
    doc = {"config": {"pattern": r"\s+|\S+", "default_num_special_tokens": 1},
           "vocab": [{"rank": 0, "token_bytes": "AA==", "token_str": None}]}
    with pytest.raises(ValueError, match="Tekken file: config.default_vocab_size"):
        pt.Vocabulary.from_json(json.dumps(doc))
    doc["config"]["default_vocab_size"] = 2
    with pytest.raises(ValueError, match="Tekken file: byte 0x01 is not a token"):
        pt.Vocabulary.from_json(json.dumps(doc))

    class SentencePieceTokenizer:  # the name, module and file_path of mistral_common's other tokenizer
        file_path = tmp_path / "tokenizer.model.v3"

    SentencePieceTokenizer.__module__ = "mistral_common.tokens.tokenizers.sentencepiece"
    with pytest.raises(TypeError, match="not Tekken.*from_file"):
        pt.Vocabulary.from_tokenizer(SentencePieceTokenizer())
    SentencePieceTokenizer.__module__ = "elsewhere"  # not mistral_common's: the general refusal
    with pytest.raises(TypeError, match="cannot build a Vocabulary from SentencePieceTokenizer"):
        pt.Vocabulary.from_tokenizer(SentencePieceTokenizer())
