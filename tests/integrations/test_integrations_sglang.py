"""``propertok.integrations.sglang`` against SGLang's grammar-backend interface, without SGLang.

SGLang (>= 0.4.4) exposes ``sglang.srt.constrained.base_grammar_backend`` with
``BaseGrammarObject``, ``BaseGrammarBackend``, ``InvalidGrammarObject`` and
``register_grammar_backend(name, init_func)``. A stand-in module with those names is installed
in ``sys.modules`` and the adapter imported against it: registration, dispatch, failures, and a
scheduler-like loop (fill the mask, apply, sample, accept, jump forward with forced tokens, roll
back) whose outputs must match and be canonical.
"""

from __future__ import annotations

import importlib
import json
import sys
import types

import numpy as np
import pytest

from jsonschema_support import validator

SCHEMA = {"type": "object", "properties": {"name": {"enum": ["Ada Lovelace", "Alan Turing"]},
                                           "born": {"type": "integer", "minimum": 1800, "maximum": 1999}},
          "required": ["name", "born"]}
REGEX = r"(yes|no|maybe)( [0-9]{1,3})?"
EBNF = 'root ::= answer ("," answer)?\nanswer ::= ("yes" | "no") " " [0-9]{1,2}\n'


@pytest.fixture
def sgl(pt, monkeypatch, mistral):
    base = types.ModuleType("sglang.srt.constrained.base_grammar_backend")

    class BaseGrammarObject:
        def __init__(self):
            self._finished = False

        @property
        def finished(self):
            return self._finished

        @finished.setter
        def finished(self, value):
            self._finished = value

    class BaseGrammarBackend:
        def __init__(self):
            self.cache = {}

    class InvalidGrammarObject(BaseGrammarObject):
        def __init__(self, error_message="Unknown grammar error"):
            super().__init__()
            self.error_message = error_message

    registry = {}
    base.BaseGrammarObject = BaseGrammarObject
    base.BaseGrammarBackend = BaseGrammarBackend
    base.InvalidGrammarObject = InvalidGrammarObject
    base.GRAMMAR_BACKEND_REGISTRY = registry
    base.register_grammar_backend = lambda name, fn: registry.__setitem__(name, fn)
    for name in ("sglang", "sglang.srt", "sglang.srt.constrained"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "sglang.srt.constrained.base_grammar_backend", base)
    sys.modules["sglang.srt.constrained"].base_grammar_backend = base
    monkeypatch.delitem(sys.modules, "propertok.integrations.sglang", raising=False)
    module = importlib.import_module("propertok.integrations.sglang")
    backend = module.PropertokGrammarBackend(mistral.vocab)
    yield types.SimpleNamespace(module=module, base=base, registry=registry, backend=backend)
    backend.guides.shutdown()
    monkeypatch.delitem(sys.modules, "propertok.integrations.sglang", raising=False)


def test_registered_and_subclasses(sgl):
    assert sgl.registry["propertok"] is sgl.module.make_backend
    assert issubclass(sgl.module.PropertokGrammar, sgl.base.BaseGrammarObject)
    assert issubclass(sgl.module.PropertokGrammarBackend, sgl.base.BaseGrammarBackend)


def test_make_backend_from_a_transformers_tokenizer(sgl, pt):
    transformers = pytest.importorskip("transformers")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=pt.default_tokenizer_path(), eos_token="</s>")
    args = types.SimpleNamespace(constrained_json_whitespace_pattern=None, constrained_json_disable_any_whitespace=True)
    backend = sgl.module.make_backend(args, tok, 32000, {2})
    assert backend.vocab.eos_token_ids == [2] and backend.whitespace == ""


def test_bad_constraints_fail_only_that_request(sgl):
    for grammar in (sgl.backend.dispatch_regex("(unclosed"), sgl.backend.dispatch_json("{not json"),
                    sgl.backend.dispatch_json('{"type": "integer", "minimum": 3, "maximum": 1}'),
                    sgl.backend.dispatch_ebnf('root ::= ('), sgl.backend.dispatch_ebnf('root ::= "a" <|nope|>')):
        assert isinstance(grammar, sgl.base.InvalidGrammarObject)
        assert grammar.error_message.startswith("propertok:"), grammar.error_message
    assert isinstance(sgl.backend.dispatch_regex("yes|no"), sgl.module.PropertokGrammar)


def decode_loop(grammar, vocab, rng, jump_forward):
    """SGLang's scheduler in miniature: fill + apply + sample + accept, with jump-forward."""
    mask = np.full((1, (vocab.vocab_size + 31) // 32), -1, dtype=np.int32)
    ids, jumped = [], 0
    while not grammar.is_terminated():
        if jump_forward:
            helper = grammar.try_jump_forward(None)
            if helper is not None:
                text, _state = grammar.jump_forward_str_state(helper)
                assert text == b"".join(vocab.token_bytes(t) for t in helper[0]).decode()
                new_ids = ids + helper[0]  # what SGLang's retokenization gives for canonical text
                grammar.jump_and_retokenize(ids, new_ids, -1)
                ids, jumped = new_ids, jumped + len(helper[0])
                continue
        grammar.fill_vocab_mask(mask, 0)
        logits = rng.standard_normal((1, vocab.vocab_size)).astype(np.float32)
        grammar.apply_vocab_mask(logits, mask)
        token = int(np.argmax(logits))
        grammar.accept_token(token)
        ids.append(token)
    return ids, jumped


@pytest.mark.parametrize("jump_forward", [False, True])
def test_decoding_is_constrained_and_canonical(sgl, mistral, jump_forward):
    eos = mistral.vocab.eos_token_ids[0]
    rng = np.random.default_rng(3)
    regex_proto = sgl.backend.dispatch_regex(REGEX)
    json_proto = sgl.backend.dispatch_json(json.dumps(SCHEMA))
    ebnf_proto = sgl.backend.dispatch_ebnf(EBNF)
    dfa = __import__("propertok").ByteDfa(REGEX)
    ebnf_dfa = __import__("propertok").ByteDfa(__import__("propertok").grammar_to_regex(EBNF, "gbnf"))
    total_jumped = 0
    for _ in range(4):
        for proto, check in ((regex_proto, lambda t: dfa.matches(t.encode())),
                             (json_proto, lambda t: validator(SCHEMA).is_valid(json.loads(t))),
                             (ebnf_proto, lambda t: ebnf_dfa.matches(t.encode()))):
            grammar = proto.copy()  # SGLang copies the cached prototype for every request
            assert grammar.matcher is not proto.matcher and grammar.guide is proto.guide
            ids, jumped = decode_loop(grammar, mistral.vocab, rng, jump_forward)
            total_jumped += jumped
            assert ids[-1] == eos and grammar.finished
            body = ids[:-1]
            text = mistral.oracle.decode(body).decode()
            assert check(text), text
            assert mistral.oracle.is_canonical(body), (text, body)
    assert (total_jumped > 0) == jump_forward
    assert sgl.backend.guides.compiles == 3


def test_rollback_and_retokenize(sgl, mistral):
    grammar = sgl.backend.dispatch_regex(REGEX)
    ids = mistral.oracle.canonical("maybe 42")
    for t in ids:
        grammar.accept_token(t)
    assert grammar.matcher.is_accepting()
    grammar.rollback(2)
    assert grammar.matcher.num_accepted_tokens == len(ids) - 2
    grammar.jump_and_retokenize(ids[:-2], ids, -1)
    assert grammar.matcher.num_accepted_tokens == len(ids)
    with pytest.raises(ValueError, match="not allowed"):
        grammar.accept_token(mistral.oracle.canonical("x")[0])
    eos = mistral.vocab.eos_token_ids[0]
    grammar.accept_token(eos)
    assert grammar.is_terminated() and grammar.finished
    grammar.rollback(1)
    assert not grammar.is_terminated() and not grammar.finished


def test_without_sglang_the_module_imports_and_registers_nothing(pt, monkeypatch):
    monkeypatch.setitem(sys.modules, "sglang", None)
    monkeypatch.delitem(sys.modules, "propertok.integrations.sglang", raising=False)
    module = importlib.import_module("propertok.integrations.sglang")
    assert module.register() is False
    monkeypatch.delitem(sys.modules, "propertok.integrations.sglang", raising=False)
