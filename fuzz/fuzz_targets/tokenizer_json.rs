//! Arbitrary bytes (and JSON mutations of them) as a tokenizer.json: `Vocabulary::from_json`
//! and a trivial compile must never panic. See `propertok::testing`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    propertok::testing::check_tokenizer_json(data);
});
