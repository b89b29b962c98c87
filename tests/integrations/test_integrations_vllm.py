"""``propertok.integrations.vllm`` without vLLM: the processor driven by a fake engine.

vLLM calls ``validate_params`` per request, then at every step ``update_state`` (with a
``BatchUpdate`` of removed / added / moved rows when the batch changed) and ``apply`` on the
logits. The fake here does the same with numpy logits and plain tuples for ``BatchUpdate``
(the processor duck-types both), so everything but the import of vLLM itself is tested in the
default run. The test that imports vLLM's own classes skips without vLLM; the end-to-end tests
against the real engine are in ``tests/integrations/engines`` (see docs/engines.md).
"""

from __future__ import annotations

import enum
import json
import time
from types import SimpleNamespace

import numpy as np
import pytest

from jsonschema_support import validator
from oracle import EMBEDDED_MISTRAL

SCHEMA = {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 999},
                                           "ok": {"type": "boolean"}}, "required": ["id", "ok"]}
REGEX = r"(yes|no|maybe)( [0-9]{1,3})?"
GRAMMAR = 'start: answer (", " answer)~0..2\nanswer: ("yes" | "no") " " INT\nINT: /[0-9]{1,2}/\n'
VOCAB = 32000


class Move(enum.Enum):  # vLLM's MoveDirectionality, by name
    UNIDIRECTIONAL = enum.auto()
    SWAP = enum.auto()


def batch_update(batch_size, removed=(), added=(), moved=()):
    return SimpleNamespace(batch_size=batch_size, removed=list(removed), added=list(added), moved=list(moved))


def params(**extra):
    return SimpleNamespace(extra_args=extra or None, structured_outputs=None)


@pytest.fixture(scope="module")
def vllm_mod(pt):
    from propertok.integrations import vllm as vllm_mod

    return vllm_mod


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """A model folder holding only tokenizer.json (the processor's fallback without transformers)."""
    import shutil

    folder = tmp_path_factory.mktemp("model")
    shutil.copy(EMBEDDED_MISTRAL, folder / "tokenizer.json")
    return folder


def fake_config(tokenizer_dir, max_num_seqs=8, vocab_size=VOCAB):
    model_config = SimpleNamespace(tokenizer=str(tokenizer_dir), tokenizer_revision=None, trust_remote_code=False,
                                   get_vocab_size=lambda: vocab_size)
    return SimpleNamespace(model_config=model_config, scheduler_config=SimpleNamespace(max_num_seqs=max_num_seqs))


@pytest.fixture
def processor(vllm_mod, tokenizer_dir, monkeypatch):
    # without transformers the processor reads <model>/tokenizer.json; with it, AutoTokenizer
    # would load the same file
    monkeypatch.setitem(__import__("sys").modules, "transformers", None)
    proc = vllm_mod.PropertokLogitsProcessor(fake_config(tokenizer_dir), "cpu", False)
    yield proc
    proc.cache.shutdown()


class FakeEngine:
    """Requests in a persistent batch: sampling from random logits after ``apply``, with
    vLLM's bookkeeping (live output lists, removals, compaction by moves, swaps)."""

    def __init__(self, processor, vocab_size=VOCAB, seed=0):
        self.proc = processor
        self.rng = np.random.default_rng(seed)
        self.vocab_size = vocab_size
        self.slots = []  # index -> (name, output list) or None

    def add(self, name, sampling_params, pending):
        out = []
        index = len(self.slots) if None not in self.slots else self.slots.index(None)
        if index == len(self.slots):
            self.slots.append(None)
        self.slots[index] = (name, out)
        pending["added"].append((index, sampling_params, [1, 2, 3], out))
        return out

    def step(self, pending, eos):
        size = len(self.slots)
        self.proc.update_state(batch_update(size, **pending) if any(pending.values()) else None)
        logits = self.rng.standard_normal((size, self.vocab_size)).astype(np.float32) * 3
        before = logits.copy()
        logits = self.proc.apply(logits)
        gumbel = -np.log(-np.log(self.rng.uniform(size=logits.shape)))
        sampled = np.argmax(logits + gumbel, axis=1)
        finished = []
        for index, slot in enumerate(self.slots):
            if slot is None:
                continue
            slot[1].append(int(sampled[index]))
            if sampled[index] == eos or len(slot[1]) >= 60:
                finished.append(index)
        return before, logits, finished


def text_of(mistral, ids, eos):
    return mistral.oracle.decode([t for t in ids if t != eos]).decode()


def test_extra_args_and_validate_params(vllm_mod):
    P = vllm_mod.PropertokLogitsProcessor
    assert vllm_mod.extra_args(regex="a+") == {"propertok_regex": "a+"}
    assert json.loads(vllm_mod.extra_args(json_schema=SCHEMA)["propertok_json_schema"]) == SCHEMA
    assert vllm_mod.extra_args(grammar='root ::= "a"', syntax="gbnf") == {
        "propertok_grammar": 'root ::= "a"', "propertok_grammar_syntax": "gbnf"}
    P.validate_params(params())  # no constraint: nothing to check
    P.validate_params(SimpleNamespace(extra_args=None))
    P.validate_params(params(other_plugin=1))
    P.validate_params(params(propertok_regex=REGEX))
    P.validate_params(params(propertok_json_schema=json.dumps(SCHEMA), propertok_whitespace=""))
    P.validate_params(params(propertok_json_schema=SCHEMA, propertok_method="direct"))
    P.validate_params(params(propertok_grammar=GRAMMAR))
    P.validate_params(params(propertok_grammar='root ::= [a-z]+', propertok_grammar_syntax="gbnf"))
    P.validate_params(params(propertok_grammar='start: "a" <|any_special|>\n'))  # resolved at compile
    P.validate_params(params(propertok_grammar='start: "(" start ")" | "x"\n'))  # nesting: lazy guides run it
    for bad, words in (
        (params(propertok_regex="(unclosed"), "invalid regex"),
        (params(propertok_regex="a(?=b)"), "invalid regex"),
        (params(propertok_regex="[^\\x00-\\x{10FFFF}]"), "invalid regex"),
        (params(propertok_json_schema="{not json"), "not valid JSON"),
        (params(propertok_json_schema={"type": "object", "properties": {"a": {"type": "integer", "minimum": 5,
                                                                             "maximum": 1}},
                                       "required": ["a"]}), "invalid json"),
        (params(propertok_json_schema={"type": "strin"}), "invalid json"),
        (params(propertok_json_schema=[1]), "object or a boolean"),
        (params(propertok_regex="a", propertok_json_schema=SCHEMA), "not a regex and a JSON schema"),
        (params(propertok_regex="a", propertok_grammar=GRAMMAR), "not a regex and a grammar"),
        (params(propertok_grammar="start: (\n"), "invalid grammar constraint"),
        (params(propertok_grammar=GRAMMAR, propertok_grammar_syntax="ebnf"), "unknown grammar syntax"),
        (params(propertok_regex="a", propertok_grammar_syntax="gbnf"), "syntax applies to a grammar"),
        (params(propertok_grammar=GRAMMAR, propertok_whitespace=""), "whitespace applies"),
        (params(propertok_regex="a", propertok_method="fast"), "unknown method"),
        (params(propertok_regex=5), "must be a string"),
        (params(propertok_method="direct"), "without a regex"),
        (params(propertok_regex="a", propertok_whitespace=""), "whitespace applies"),
        (SimpleNamespace(extra_args={"propertok_regex": "a"}, structured_outputs=object()), "structured_outputs"),
    ):
        with pytest.raises(ValueError, match="propertok") as info:
            P.validate_params(bad)
        assert words.lower() in str(info.value).lower(), str(info.value)


def test_mixed_batch_is_constrained_canonical_and_leaves_other_rows_alone(processor, mistral):
    """Six requests (two regexes, a schema, unconstrained ones) join and leave a batch; rows move
    as vLLM compacts it. Constrained outputs match and are canonical; unconstrained rows' logits
    are never modified; one guide per distinct constraint is compiled."""
    eos = mistral.vocab.eos_token_ids[0]
    engine = FakeEngine(processor, seed=1)
    dfa = __import__("propertok").ByteDfa(REGEX)
    grammar_dfa = __import__("propertok").ByteDfa(__import__("propertok").grammar_to_regex(GRAMMAR))
    specs = {
        "r1": params(propertok_regex=REGEX), "r2": params(propertok_regex=REGEX),
        "j": params(propertok_json_schema=json.dumps(SCHEMA)), "free1": params(), "free2": params(other=1),
        "time": params(propertok_regex=r"[0-2][0-9]:[0-5][0-9]"),
        "g": params(propertok_grammar=GRAMMAR),
    }
    outputs = {}
    waiting = list(specs)
    pending = {"removed": [], "added": [], "moved": []}
    for name in waiting[:4]:
        outputs[name] = engine.add(name, specs[name], pending)
    waiting = waiting[4:]
    for _ in range(400):
        if not any(engine.slots) and not waiting:
            break
        before, after, finished = engine.step(pending, eos)
        for index, slot in enumerate(engine.slots):
            if slot is not None and specs[slot[0]].extra_args in (None, {"other": 1}):
                assert np.array_equal(before[index], after[index])  # untouched
        pending = {"removed": [], "added": [], "moved": []}
        for index in finished:
            engine.slots[index] = None
            pending["removed"].append(index)
        if waiting and finished:
            name = waiting.pop(0)
            outputs[name] = engine.add(name, specs[name], pending)
        # compaction, as vLLM's condense(): the last occupied slot moves into the first hole
        while None in engine.slots and any(s is not None for s in engine.slots[engine.slots.index(None):]):
            hole = engine.slots.index(None)
            last = max(i for i, s in enumerate(engine.slots) if s is not None)
            if last < hole:
                break
            engine.slots[hole], engine.slots[last] = engine.slots[last], None
            pending["moved"].append((last, hole, Move.UNIDIRECTIONAL))
        while engine.slots and engine.slots[-1] is None:
            engine.slots.pop()
    assert not any(engine.slots) and not waiting
    checks = {"r1": lambda t: dfa.matches(t.encode()), "r2": lambda t: dfa.matches(t.encode()),
              "j": lambda t: validator(SCHEMA).is_valid(json.loads(t)),
              "time": lambda t: __import__("re").fullmatch(r"[0-2][0-9]:[0-5][0-9]", t),
              "g": lambda t: grammar_dfa.matches(t.encode())}
    for name, check in checks.items():
        ids = outputs[name]
        assert ids[-1] == eos, (name, ids)
        body = ids[:-1]
        assert check(text_of(mistral, body, eos)), (name, text_of(mistral, body, eos))
        assert mistral.oracle.is_canonical(body), (name, body)
    assert processor.cache.compiles == 4  # REGEX shared by r1 and r2
    assert processor.rows == {}


def test_swap_and_replacement_follow_batch_update_order(processor, mistral):
    """removed, then added, then moved: an index removed and re-added in the same update holds
    the new request; a swap exchanges rows."""
    eos = mistral.vocab.eos_token_ids[0]
    P = processor
    out_a, out_b, out_c = [], [], []
    P.update_state(batch_update(2, added=[(0, params(propertok_regex="a+"), [], out_a),
                                          (1, params(propertok_regex="b+"), [], out_b)]))
    logits = np.zeros((2, VOCAB), dtype=np.float32)
    P.apply(logits)
    allowed = [set(np.flatnonzero(np.isfinite(row))) for row in logits]
    a_tokens = {t for t in allowed[0] if set(mistral.oracle.decode([t])) == {ord("a")}}
    assert a_tokens == allowed[0] and allowed[0] and eos not in allowed[0]
    P.update_state(batch_update(2, moved=[(0, 1, Move.SWAP)]))
    logits = np.zeros((2, VOCAB), dtype=np.float32)
    P.apply(logits)
    assert set(np.flatnonzero(np.isfinite(logits[1]))) == allowed[0]
    assert set(np.flatnonzero(np.isfinite(logits[0]))) == allowed[1]
    # index 0 removed and re-added with an unconstrained request in one update: row 0 untouched
    P.update_state(batch_update(2, removed=[0], added=[(0, params(), [], out_c)]))
    logits = np.zeros((2, VOCAB), dtype=np.float32)
    P.apply(logits)
    assert np.isfinite(logits[0]).all() and set(np.flatnonzero(np.isfinite(logits[1]))) == allowed[0]
    # a one-way move onto an unconstrained row replaces it; the source row is empty afterwards
    P.update_state(batch_update(1, moved=[(1, 0, Move.UNIDIRECTIONAL)]))
    assert set(P.rows) == {0}
    logits = np.zeros((1, VOCAB), dtype=np.float32)
    P.apply(logits)
    assert set(np.flatnonzero(np.isfinite(logits[0]))) == allowed[0]


def test_catch_up_placeholders_rollback_and_preemption(processor, mistral):
    """Output ids are read from vLLM's live list at each ``apply``: several at once (a resumed,
    preempted request arrives with output already), trailing -1 placeholders skipped, a shorter
    list rolls the matcher back."""
    eos = mistral.vocab.eos_token_ids[0]
    ids = mistral.oracle.canonical("maybe 42")
    out = list(ids[:1])  # resumed after preemption with one token already generated
    processor.update_state(batch_update(1, added=[(0, params(propertok_regex=REGEX), [], out)]))
    processor.apply(np.zeros((1, VOCAB), dtype=np.float32))
    row = processor.rows[0]
    assert row.fed == 1 and row.matcher.num_accepted_tokens == 1
    out.extend(ids[1:] + [-1])
    processor.apply(np.zeros((1, VOCAB), dtype=np.float32))
    assert row.fed == len(ids) and row.matcher.is_accepting()
    del out[2:]  # discarded tokens
    logits = np.zeros((1, VOCAB), dtype=np.float32)
    processor.apply(logits)
    assert row.fed == 2 and row.matcher.num_accepted_tokens == 2
    out[:] = ids + [eos]
    logits = np.zeros((1, VOCAB), dtype=np.float32)
    processor.apply(logits)
    assert row.matcher.is_terminated() and not row.failed
    assert list(np.flatnonzero(np.isfinite(logits[0]))) == [eos]


def test_compile_failure_fails_only_that_request(vllm_mod, processor, mistral, caplog):
    """A constraint that passes the static check but not the compiler (here: the product-state
    limit) ends its own request (EOS only, an error logged); the other row is masked normally."""
    eos = mistral.vocab.eos_token_ids[0]
    processor.cache._compiler = __import__("propertok").Compiler(mistral.vocab, max_product_states=10)
    out_bad, out_good = [], []
    processor.update_state(batch_update(2, added=[(0, params(propertok_regex="[a-z]{3}[0-9]{40}"), [], out_bad),
                                                  (1, params(propertok_regex="yes|no"), [], out_good)]))
    logits = np.zeros((2, VOCAB), dtype=np.float32)
    with caplog.at_level("ERROR", logger="propertok.integrations.vllm"):
        processor.apply(logits)
    assert list(np.flatnonzero(np.isfinite(logits[0]))) == [eos]
    assert np.isfinite(logits[1]).sum() >= 2 and not np.isfinite(logits[1, eos])
    assert "could not be compiled" in caplog.text and "LimitExceeded" in caplog.text
    assert processor.cache.compiles == 2 and len(processor.cache) == 1  # the failure is not cached


def test_compile_time_limit(vllm_mod, processor, mistral, caplog):
    """A guide that is not ready by the deadline ends its request; the step does not wait longer."""
    from concurrent.futures import Future

    never = Future()
    processor.cache.get = lambda constraint: never
    processor.compile_timeout = 0.2
    processor.cache._compiler = __import__("propertok").Compiler(mistral.vocab)
    processor.update_state(batch_update(1, added=[(0, params(propertok_regex="a"), [], [])]))
    logits = np.zeros((1, VOCAB), dtype=np.float32)
    start = time.monotonic()
    with caplog.at_level("ERROR", logger="propertok.integrations.vllm"):
        processor.apply(logits)
    assert time.monotonic() - start < 5
    assert list(np.flatnonzero(np.isfinite(logits[0]))) == mistral.vocab.eos_token_ids[:1]
    assert "no guide within" in caplog.text


def test_no_constrained_rows_costs_nothing(processor):
    processor.update_state(batch_update(3, added=[(i, params(), [], []) for i in range(3)]))
    logits = np.ones((3, VOCAB), dtype=np.float32)
    assert processor.apply(logits) is logits and (logits == 1).all()
    assert processor.cache.compiles == 0 and processor.cache._compiler is None  # nothing loaded


def test_prefetch_setting(vllm_mod, tokenizer_dir, monkeypatch):
    """``PROPERTOK_VLLM_PREFETCH_SECONDS`` sets the compiler's ``prefetch_seconds`` (default
    0.002; the other tests decode with it); a bad value fails the compile of the request, by
    name."""
    monkeypatch.setitem(__import__("sys").modules, "transformers", None)
    proc = vllm_mod.PropertokLogitsProcessor(fake_config(tokenizer_dir), "cpu", False)
    assert proc.prefetch_seconds == vllm_mod.DEFAULT_PREFETCH_SECONDS == 0.002
    proc.cache.shutdown()
    monkeypatch.setenv("PROPERTOK_VLLM_PREFETCH_SECONDS", "-1")
    proc = vllm_mod.PropertokLogitsProcessor(fake_config(tokenizer_dir), "cpu", False)
    with pytest.raises(ValueError, match="prefetch_seconds must be a finite, non-negative number"):
        proc._make_compiler()
    proc.cache.shutdown()


def test_padded_vocabulary(vllm_mod, tokenizer_dir, mistral, monkeypatch):
    """Logits wider than the tokenizer (a padded embedding): ids past the tokenizer are never allowed."""
    monkeypatch.setitem(__import__("sys").modules, "transformers", None)
    proc = vllm_mod.PropertokLogitsProcessor(fake_config(tokenizer_dir, vocab_size=32064), "cpu", False)
    proc.update_state(batch_update(1, added=[(0, params(propertok_regex="[0-9]+"), [], [])]))
    logits = np.zeros((1, 32064), dtype=np.float32)
    proc.apply(logits)
    assert not np.isfinite(logits[0, 32000:]).any() and np.isfinite(logits[0, :32000]).any()
    proc.cache.shutdown()


def test_against_vllm_interface(vllm_mod):
    """With vLLM installed: the processor is a subclass of vLLM's V1 ``LogitsProcessor``, of the
    V2 runner's too (so its plugin loader accepts it), and is found through the entry point."""
    pytest.importorskip("vllm", reason="vLLM is not installed (pip install 'propertok[vllm]'); "
                        "the processor's logic is tested above without it")
    from vllm.v1.sample.logits_processor import LogitsProcessor, BatchUpdate, MoveDirectionality  # noqa: F401

    assert issubclass(vllm_mod.PropertokLogitsProcessor, LogitsProcessor)
    assert not getattr(vllm_mod.PropertokLogitsProcessor, "__abstractmethods__", None)


def test_v2_runner_ends_propertok_requests(vllm_mod, tokenizer_dir):
    """Under vLLM's V2 model runner (GPU, not implemented): propertok requests are ended (only
    their stop tokens allowed), other rows untouched, nothing raises."""
    torch = pytest.importorskip("torch")
    req_states = SimpleNamespace(all_token_ids=None)
    proc = vllm_mod.PropertokLogitsProcessor(fake_config(tokenizer_dir), req_states)
    if not proc._v2:
        pytest.skip("vLLM's V2 interface is not installed")
    assert proc.add_request(3, SimpleNamespace(extra_args={"propertok_regex": "a"}, all_stop_token_ids={2})) is True
    assert proc.add_request(5, SimpleNamespace(extra_args=None)) is False
    logits = torch.zeros((2, VOCAB))
    proc.apply(logits, SimpleNamespace(expanded_idx_mapping=torch.tensor([5, 3])))
    assert torch.isfinite(logits[0]).all() and torch.isfinite(logits[1]).nonzero().flatten().tolist() == [2]
