"""llguidance's ``%json {schema}`` items in Lark grammars: each stands for the JSON instances of
its schema, so that tool-call grammars mix text, special tokens and JSON arguments. The oracle
for the instances is ``jsonschema``; for the tokens, the real tokenizer."""

from __future__ import annotations

import json

import pytest

from helpers import walk
from jsonschema_support import validator

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8, "pattern": "^[a-z/]*$"},
                   "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "days"],
    "additionalProperties": False,
}


def grammar(prefix: str = "") -> str:
    # The schema spread over lines, as people write it; a `/` in the schema's regex too.
    body = json.dumps(SCHEMA, indent=2)
    return f'{prefix}start: ANSWER | <s> %json {body}\nANSWER: /[a-z ]{{1,20}}/ // not %json {{\n'


def test_the_item_is_the_schemas_instances(pt):
    regex = pt.grammar_to_regex(grammar().replace("<s> ", ""))
    dfa = pt.ByteDfa(regex)
    v = validator(SCHEMA)
    samples = [s.decode() for s in dfa.sample(200, 7, 60)]
    for text in ['{"city": "a/b", "days": 3}', '{"city":"paris","days":7}', "good day"]:
        assert dfa.matches(text.encode()), text
    for text in ['{"city": "Paris", "days": 3}', '{"city": "a", "days": 8}', '{"days": 3}', "{}"]:
        assert not dfa.matches(text.encode()), text
    instances = [text for text in samples if text.startswith("{")]
    assert len(instances) >= 5
    for text in instances:
        assert v.is_valid(json.loads(text)), text


def test_tool_call_grammar_with_a_special_token(mistral):
    """``<s>`` then the JSON arguments: canonical on each side, valid by jsonschema."""
    o = mistral.oracle
    guide = mistral.compiler.compile_grammar(grammar())
    call = '{"city": "lagos", "days": 2}'
    assert walk(guide, [1] + o.canonical(call))[0]
    assert walk(guide, o.canonical("sunny all week"))[0]
    v = validator(SCHEMA)
    state = guide.next_state(guide.initial_state, 1)
    for seed in range(20):
        seq, s, k = [], state, seed
        while True:
            allowed = guide.allowed_tokens(s)
            if guide.is_final(s) and (len(seq) > 30 or k % 5 == 0):
                break
            t = [a for a in allowed if a != 2][k % len([a for a in allowed if a != 2])]
            k = k * 1103515245 + 12345
            seq.append(t)
            s = guide.next_state(s, t)
        text = o.decode(seq).decode()
        assert v.is_valid(json.loads(text)), text
        assert o.is_canonical(seq), seq


def test_text_that_only_looks_like_an_item_is_left_alone(pt):
    text = 'start: "%json {" /%json[ ]\\{/ // %json {\n'
    dfa = pt.ByteDfa(pt.grammar_to_regex(text))
    assert dfa.matches(b"%json {%json {")


def test_errors_name_the_line_as_written(pt, mistral):
    with pytest.raises(ValueError, match=r"line 2: %json needs a JSON Schema object"):
        pt.grammar_to_regex('start: "a"\n  | %json "b"\n')
    with pytest.raises(ValueError, match=r"line 1: the schema after %json is not JSON"):
        pt.grammar_to_regex('start: %json {"type": }\n')
    with pytest.raises(ValueError, match=r"line 1: %json: .*unknown type 'strin'"):
        mistral.compiler.compile_grammar('start: %json {"type": "strin"}\n')
    # The schema spans lines 1-3; the undefined name is on line 4 as written.
    with pytest.raises(ValueError, match=r"line 4: `y` is not defined"):
        pt.grammar_to_regex('start: %json {\n"type": "integer"\n}\nx: y\n')
    with pytest.raises(ValueError, match=r"a regex of \d+ characters"):  # not the whole regex
        pt.grammar_to_regex('start: "a"\n%json {"type": "object"}\n')
