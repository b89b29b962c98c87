//! GPT-2's table between bytes and the printable characters that stand for them in byte-level
//! BPE vocabularies.

use rustc_hash::FxHashMap;

/// GPT-2's map from bytes to their printable stand-in characters.
pub fn byte_to_unicode_table() -> &'static [char; 256] {
    static TABLE: std::sync::OnceLock<[char; 256]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = ['\0'; 256];
        for (c, b) in unicode_to_byte() {
            table[b as usize] = c;
        }
        table
    })
}

/// GPT-2's map from the printable stand-in characters back to bytes.
pub fn unicode_to_byte() -> FxHashMap<char, u8> {
    let mut map = FxHashMap::default();
    let mut n = 0u32;
    for b in 0..=255u8 {
        let printable = (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
        let c = if printable {
            char::from(b)
        } else {
            n += 1;
            char::from_u32(255 + n).expect("valid code point")
        };
        map.insert(c, b);
    }
    map
}
