//! Arbitrary bytes (and JSON mutations of them) as a tokenizer.json: `Vocabulary::from_json`
//! and a trivial compile must never panic. See `propertok::fuzz_checks`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    propertok::fuzz_checks::check_tokenizer_json(data);
});
