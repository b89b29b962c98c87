//! Synthetic char-BPE tokenizer + regex from the input; every method's guide is checked
//! (walks accepted, matching and canonical; samples' canonical tokenizations accepted;
//! cartesian and direct accept the same language). See `propertok::testing`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    propertok::testing::check_regex_guide(data);
});
