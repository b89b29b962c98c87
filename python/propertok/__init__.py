"""propertok: next-token masks for regex-constrained decoding that admit only canonical token
sequences (the ids the model's own tokenizer produces for the generated text).

The heavy lifting is the Rust extension ``propertok._core``; this package re-exports it and adds the
numpy/torch bitmask helpers, JSON Schema compilation (``Compiler.compile_json_schema``),
grammars (``Compiler.compile_grammar``, ``grammar_to_regex``) and the
``propertok`` command line. See README.md for a worked example.
"""

import os

from ._compiler import Compiler, grammar_to_regex
from ._core import (
    ByteDfa,
    Guide,
    LimitExceeded,
    Matcher,
    PropertokError,
    RuleAutomaton,
    Vocabulary,
    __version__,
)
from .bitmask import allocate_token_bitmask, apply_token_bitmask_inplace, fill_next_token_bitmask

__all__ = [
    "ByteDfa",
    "Compiler",
    "Guide",
    "LimitExceeded",
    "Matcher",
    "PropertokError",
    "RuleAutomaton",
    "Vocabulary",
    "__version__",
    "allocate_token_bitmask",
    "apply_token_bitmask_inplace",
    "default_tokenizer_path",
    "fill_next_token_bitmask",
    "grammar_to_regex",
]


def default_tokenizer_path() -> str:
    """Path of the embedded Mistral-7B ``tokenizer.json`` (Apache-2.0, see ``data/NOTICE``).

    Shipped so that the demo, the README examples and quick experiments run without a model hub.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "data", "mistral7b-tokenizer.json")
