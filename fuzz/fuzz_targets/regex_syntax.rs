//! A regex (raw text, or pieces of regex syntax) translated by the common-subset reader and by
//! regex-syntax: wherever the former answers, the same HIR. See `propertok::testing`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    propertok::testing::check_regex_syntax(data);
});
