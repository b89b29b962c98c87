//! Synthetic char-BPE tokenizer with special tokens + a grammar (random rules in Lark or GBNF,
//! or raw text) from the input: parsed, lowered and compiled lazily; the regex is checked
//! against a direct interpreter of the grammar and the guide's walks against the reference
//! tokenization. See `propertok::testing::grammar`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    propertok::testing::grammar::check_grammar(data);
});
