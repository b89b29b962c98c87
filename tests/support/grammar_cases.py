"""Grammars written twice (Lark and, where it can say it, GBNF) with examples and counterexamples:
the inputs of tests/grammar/test_grammar.py and benches/grammar_compare.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass
class GrammarCase:
    name: str
    lark: str
    positives: list
    negatives: list
    gbnf: Optional[str] = None
    depth: Optional[int] = None
    extra_alphabet: str = ""
    lark_start: str = "start"


CASES = [
    GrammarCase(
        "greeting",
        lark=r'''
start: ("hello"i | "hi") " " NAME ("," " "? NAME)* "!"?
NAME: ("a".."z")+
''',
        gbnf=r'''
# a greeting to one or more names
root ::= ([hH] [eE] [lL] [lL] [oO] | "hi") " " name ("," " "? name)* "!"?
name ::= [a-z]+
''',
        positives=["hello bob", "HeLLo bob,al!", "hi x, y,z", "hi ab!"],
        negatives=["hi", "hi Bob", "hello bob,", "hi x!!", "hey bob"],
    ),
    GrammarCase(
        "arithmetic, left recursive",
        lark=r'''
start: sum
sum: sum ("+" | "-") product | product
product: product "*" atom | atom
atom: INT | "x"
%import common.INT
''',
        gbnf=r'''
root    ::= sum
sum     ::= sum ("+" | "-") product | product
product ::= product "*" atom | atom
atom    ::= [0-9]+ | "x"
''',
        positives=["1", "1+2*x-30", "x*x*x", "12-3+4*5*6"],
        negatives=["", "+1", "1+", "1**2", "(1)"],
    ),
    GrammarCase(
        "key-value list, right recursive",
        lark=r'''
start: pairs
pairs: pair | pair ";" pairs
pair: KEY "=" (VALUE | "[" values "]")
values: VALUE ("," values)?
KEY: /[a-z_]+/
VALUE: /[0-9]+|"[^"]*"/
''',
        gbnf=r'''
root   ::= pairs
pairs  ::= pair | pair ";" pairs
pair   ::= key "=" (value | "[" values "]")
values ::= value ("," values)?
key    ::= [a-z_]+
value  ::= [0-9]+ | "\"" [^"]* "\""
''',
        positives=['a=1', 'a=1;b="x y";c=[1,2,"3"]', 'k_=[7]'],
        negatives=["a=", "a=1;", "a=[]", 'a="x', "A=1"],
        extra_alphabet='"',
    ),
    GrammarCase(
        "arithmetic with parentheses, nesting",
        lark=r'''
start: sum
sum: product (("+" | "-") product)*
product: atom ("*" atom)*
atom: /[0-9]+/ | "(" sum ")"
''',
        gbnf=r'''
root    ::= sum
sum     ::= product (("+" | "-") product)*
product ::= atom ("*" atom)*
atom    ::= [0-9]+ | "(" sum ")"
''',
        depth=3,
        positives=["1", "(1+2)*3", "((1))", "2*(3-(4+5))"],
        negatives=["()", "(1", "1+", "((1)"],
    ),
    GrammarCase(
        "JSON values with %ignore",
        lark=r'''
?start: value
?value: object | array | ESCAPED_STRING | SIGNED_NUMBER | "true" | "false" | "null"
array: "[" [value ("," value)*] "]"
object: "{" [pair ("," pair)*] "}"
pair: ESCAPED_STRING ":" value
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
''',
        depth=2,
        positives=['{"a": [1, 2.5, "x"], "b": null}', " [ ] ", '[{"k":-1e3}]', "true"],
        negatives=["[1,]", '{"a"}', "tru", "[1 2]", '{"a":1,}'],
    ),
]
