"""``propertok.integrations.transformers``: the logits processor, with and without transformers.

The processor's logic (one matcher per row, prompt skipped, EOS-only rows, beam reordering,
restarts, errors) is tested with a numpy stand-in for ``generate``, so it runs everywhere. The
real ``model.generate`` test needs torch and transformers and is skipped without them: a tiny
Llama built from a config (random weights, nothing downloaded) and the real Mistral-7B tokenizer;
every generated sequence must match the constraint and be canonical.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from jsonschema_support import validator

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
                   "ok": {"type": "boolean"}},
    "required": ["name", "age"],
}
REGEX = r"(yes|no|maybe)( [0-9]{1,3})?"


@pytest.fixture(scope="module")
def integration():
    from propertok.integrations import transformers as integration

    return integration


def fake_generate(processor, prompt, *, width, eos, rng, max_new_tokens=40, pad=None, permute_at=None):
    """``generate`` in miniature: random logits, the processor, sampling, EOS handling (finished
    rows get ``pad``), optional row permutation (as beam search does) at step ``permute_at``."""
    pad = eos if pad is None else pad
    ids = np.asarray(prompt, dtype=np.int64)
    finished = np.zeros(len(ids), dtype=bool)
    for step in range(max_new_tokens):
        if permute_at == step:
            perm = rng.permutation(len(ids))
            ids, finished = ids[perm], finished[perm]
        scores = rng.standard_normal((len(ids), width)).astype(np.float32) * 3
        scores = processor(ids, scores)
        gumbel = -np.log(-np.log(rng.uniform(size=scores.shape)))
        nxt = np.argmax(scores + gumbel, axis=1)
        nxt[finished] = pad
        ids = np.concatenate([ids, nxt[:, None]], axis=1)
        finished |= nxt == eos
        if finished.all():
            break
    return ids


def generated(ids, prompt_len, eos):
    out = []
    for row in ids[:, prompt_len:].tolist():
        assert eos in row, f"row never ended: {row}"
        out.append(row[: row.index(eos)])
    return out


def test_import_propertok_never_imports_transformers_or_torch():
    code = ("import sys, propertok, propertok.integrations, propertok.json_schema; "
            "bad = [m for m in ('transformers', 'torch') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("width", [32000, 32064])  # the model's logits may be wider than the tokenizer
def test_batch_generation_is_constrained_and_canonical(pt, mistral, integration, width):
    processor = integration.PropertokLogitsProcessor(mistral.compiler, regex=REGEX)
    eos = mistral.vocab.eos_token_ids[0]
    prompt = np.array([[1, 22557, 28747]] * 6)
    rng = np.random.default_rng(width)
    ids = fake_generate(processor, prompt, width=width, eos=eos, rng=rng)
    dfa = pt.ByteDfa(REGEX)
    for seq in generated(ids, prompt.shape[1], eos):
        text = mistral.oracle.decode(seq)
        assert dfa.matches(text), text
        assert mistral.oracle.is_canonical(seq), seq
    # generate stops after sampling the last EOS, so the last rows to finish never see it fed
    assert all(m.is_terminated() or m.is_accepting() for m in processor.matchers)


def test_json_schema_processor_with_beam_style_reordering(pt, mistral, integration):
    processor = integration.PropertokLogitsProcessor(mistral.compiler, schema=SCHEMA, whitespace="")
    eos = mistral.vocab.eos_token_ids[0]
    prompt = np.array([[1, 415], [1, 415], [1, 415], [1, 415]])
    rng = np.random.default_rng(7)
    ids = fake_generate(processor, prompt, width=32000, eos=eos, rng=rng, max_new_tokens=80, permute_at=5)
    v = validator(SCHEMA)
    for seq in generated(ids, prompt.shape[1], eos):
        text = mistral.oracle.decode(seq).decode()
        assert v.is_valid(json.loads(text)), text
        assert mistral.oracle.is_canonical(seq), text


def test_grammar_processor_with_a_special_token(pt, mistral, integration):
    """A grammar (GBNF) that may switch to a special token: every row is canonical text, or text,
    ``<s>`` (id 1) and canonical text after it, each run judged on its own."""
    grammar = 'root ::= word | word <s> "{" [0-9]{1,3} "}"\nword ::= [a-z]{1,5}\n'
    processor = integration.PropertokLogitsProcessor(mistral.compiler, grammar=grammar, syntax="gbnf")
    assert processor.guide.is_lazy
    eos = mistral.vocab.eos_token_ids[0]
    prompt = np.array([[1, 415]] * 8)
    rng = np.random.default_rng(11)
    ids = fake_generate(processor, prompt, width=32000, eos=eos, rng=rng, max_new_tokens=30)
    import re

    rows = generated(ids, prompt.shape[1], eos)
    assert any(1 in seq for seq in rows) and any(1 not in seq for seq in rows)
    for seq in rows:
        runs = [seq] if 1 not in seq else [seq[: seq.index(1)], seq[seq.index(1) + 1:]]
        texts = [mistral.oracle.decode(r).decode() for r in runs]
        assert re.fullmatch(r"[a-z]{1,5}", texts[0]) and (len(texts) == 1 or re.fullmatch(r"\{[0-9]{1,3}\}", texts[1]))
        assert all(mistral.oracle.is_canonical(r) for r in runs), seq
    with pytest.raises(TypeError, match="exactly one"):
        integration.PropertokLogitsProcessor(mistral.compiler, regex="a", grammar=grammar)


def test_reuse_restart_reset_and_pad_tokens(mistral, integration):
    processor = integration.PropertokLogitsProcessor(mistral.compiler.compile_regex("(yes|no)"))
    eos = mistral.vocab.eos_token_ids[0]
    rng = np.random.default_rng(3)
    first = fake_generate(processor, [[1, 2, 3]], width=32000, eos=eos, rng=rng, pad=0)
    second = fake_generate(processor, [[1, 5], [1, 6]], width=32000, eos=eos, rng=rng, pad=0)  # new shape
    for ids, plen in ((first, 3), (second, 2)):
        for seq in generated(ids, plen, eos):
            assert mistral.oracle.decode(seq) in (b"yes", b"no")
    processor.reset()
    assert processor.matchers == []


def test_a_token_the_mask_forbids_raises(mistral, integration):
    processor = integration.PropertokLogitsProcessor(mistral.compiler.compile_regex("yes"))
    scores = np.zeros((2, 32000), dtype=np.float32)
    processor(np.array([[1], [1]]), scores)
    allowed = np.flatnonzero(np.isfinite(scores[0]))
    forbidden = int(np.flatnonzero(~np.isfinite(scores[1]))[0])
    with pytest.raises(ValueError, match="row 1: token .* not allowed"):
        processor(np.array([[1, allowed[0]], [1, forbidden]]), np.zeros((2, 32000), dtype=np.float32))


def test_constructor_errors(pt, mistral, integration):
    P = integration.PropertokLogitsProcessor
    with pytest.raises(TypeError, match="exactly one"):
        P(mistral.compiler)
    with pytest.raises(TypeError, match="exactly one"):
        P(mistral.compiler, regex="a", schema={})
    with pytest.raises(TypeError, match="only with a Compiler"):
        P(mistral.compiler.compile_regex("a"), regex="a")
    with pytest.raises(TypeError, match="Guide or Compiler"):
        P("a")
    with pytest.raises(ValueError):
        P(mistral.compiler, regex="(?=a)")


def test_factories_with_a_transformers_tokenizer(pt, integration):
    transformers = pytest.importorskip("transformers")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=pt.default_tokenizer_path(), eos_token="</s>")
    a = integration.regex_logits_processor(tok, "(yes|no)")
    b = integration.json_schema_logits_processor(tok, SCHEMA, whitespace="")
    assert integration.compiler_for(tok) is integration.compiler_for(tok)  # built once
    assert a.guide.eos_token_ids == [tok.eos_token_id] == b.guide.eos_token_ids
    wide = integration.regex_logits_processor(tok, "(yes|no)", vocab_size=32064)
    assert wide.guide.vocab_size == 32064


def test_model_generate_end_to_end(pt, mistral, integration):
    """The issue's acceptance test: ``model.generate`` with a random tiny Llama, sampling, a
    batch of 4, a regex and a JSON schema: all outputs match and are canonical."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=32000, hidden_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, intermediate_size=64)
    model = transformers.LlamaForCausalLM(config).eval()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=pt.default_tokenizer_path(), eos_token="</s>")
    inputs = tok(["Answer:"] * 4, return_tensors="pt")
    dfa = pt.ByteDfa(REGEX)
    for processor, check in (
        (integration.regex_logits_processor(tok, REGEX), lambda text: dfa.matches(text.encode())),
        (integration.json_schema_logits_processor(tok, SCHEMA), lambda text: validator(SCHEMA).is_valid(json.loads(text))),
    ):
        out = model.generate(**inputs, logits_processor=[processor], do_sample=True, max_new_tokens=60,
                             pad_token_id=tok.eos_token_id)
        prompt_len = inputs["input_ids"].shape[1]
        for seq in generated(out.numpy(), prompt_len, tok.eos_token_id):
            text = mistral.oracle.decode(seq).decode()
            assert check(text), text
            assert mistral.oracle.is_canonical(seq), (text, seq)
