//! A small versioned, checksummed binary container for cached artefacts (the tokenizer DFA).
//!
//! Layout: `MAGIC` (7 bytes) · container version (1 byte) · kind tag (4 bytes) · format version
//! of the kind (u32) · fingerprint of the input it was built from (u64) · payload length (u64) ·
//! checksum of the payload (u64, see `checksum`) · payload. All integers little-endian. A reader checks every field before looking at
//! the payload and every read is bounds-checked, so a truncated, corrupted, stale (other
//! fingerprint) or other-version file is an error, never a panic or a wrong result.

use crate::error::{Error, Result};

const MAGIC: &[u8; 7] = b"PROPTOK";
/// 1: the checksum runs four independent lanes (version 0 ran one).
const CONTAINER_VERSION: u8 = 1;

/// FNV-1a, 64 bits, taken over 8-byte little-endian words (then the tail bytes) so that
/// checksumming a cache file costs little next to reading it. Not cryptographic: it detects
/// corruption and keys caches by content.
#[derive(Clone, Copy)]
pub struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Self {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv64 {
    pub fn write(&mut self, bytes: &[u8]) {
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.0 ^= u64::from_le_bytes(w.try_into().expect("8 bytes"));
            self.0 = self.0.wrapping_mul(PRIME);
            self.0 ^= self.0 >> 29;
        }
        for &b in words.remainder() {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(PRIME);
        }
    }
    pub fn write_u64(&mut self, v: u64) {
        self.write(&v.to_le_bytes());
    }
    pub fn finish(self) -> u64 {
        self.0
    }
}

/// The payload checksum: four FNV-style lanes over interleaved 8-byte words, combined at the
/// end. One lane is a chain of dependent multiplications (~4 cycles per word); four independent
/// ones let the CPU overlap them, which matters for the tokenizer DFA's cache (41 MB for
/// Mistral-7B: ~7 ms → ~2 ms). Not cryptographic: it detects corruption.
fn checksum(bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut lanes = [0xcbf2_9ce4_8422_2325u64, 0x8422_2325_cbf2_9ce4, 0x9e37_79b9_7f4a_7c15, 0xbf58_476d_1ce4_e5b9];
    let mut blocks = bytes.chunks_exact(32);
    for block in &mut blocks {
        for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            *lane ^= u64::from_le_bytes(word.try_into().expect("8 bytes"));
            *lane = lane.wrapping_mul(PRIME);
            *lane ^= *lane >> 29;
        }
    }
    let mut h = Fnv64::default();
    h.write(blocks.remainder());
    for lane in lanes {
        h.write_u64(lane);
    }
    h.write_u64(bytes.len() as u64);
    h.finish()
}

/// Appends little-endian values after room for the container header, which
/// [`Writer::finish`] fills in place (no copy of the payload: a Llama 3 tokenizer DFA is
/// ~460 MB).
pub struct Writer {
    buf: Vec<u8>,
}

const HEADER_BYTES: usize = 40;

impl Default for Writer {
    fn default() -> Self {
        Writer { buf: vec![0; HEADER_BYTES] }
    }
}

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32s(&mut self, v: &[u32]) {
        self.u64(v.len() as u64);
        let start = self.buf.len();
        self.buf.resize(start + v.len() * 4, 0);
        for (out, &x) in self.buf[start..].chunks_exact_mut(4).zip(v) {
            out.copy_from_slice(&x.to_le_bytes());
        }
    }
    /// Wraps the payload in the container.
    pub fn finish(self, kind: &[u8; 4], version: u32, fingerprint: u64) -> Vec<u8> {
        let mut out = self.buf;
        let (header, payload) = out.split_at_mut(HEADER_BYTES);
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            header[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        put(MAGIC);
        put(&[CONTAINER_VERSION]);
        put(kind);
        put(&version.to_le_bytes());
        put(&fingerprint.to_le_bytes());
        put(&(payload.len() as u64).to_le_bytes());
        put(&checksum(payload).to_le_bytes());
        debug_assert_eq!(at, HEADER_BYTES);
        out
    }
}

/// Decodes little-endian `u32`s (`bytes.len()` a multiple of 4).
pub fn u32s_from_le(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect()
}

fn corrupt(what: &str) -> Error {
    Error::InvalidArgument(format!("invalid propertok cache/serialized data: {what}"))
}

/// A payload and the checksum its container header records.
pub struct PayloadChecksum<'a> {
    payload: &'a [u8],
    expected: u64,
}

impl PayloadChecksum<'_> {
    pub fn verify(&self) -> Result<()> {
        if checksum(self.payload) == self.expected {
            Ok(())
        } else {
            Err(corrupt("checksum mismatch"))
        }
    }
}

/// Bounds-checked reads over a payload.
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Checks the container and returns a reader over its payload.
    pub fn open(bytes: &'a [u8], kind: &[u8; 4], version: u32, fingerprint: u64) -> Result<Reader<'a>> {
        let (reader, checksum) = Reader::open_unverified(bytes, kind, version, fingerprint)?;
        checksum.verify()?;
        Ok(reader)
    }

    /// Checks the container's header and returns a reader over its payload, and the payload's
    /// checksum check to run alongside (a large cache is parsed on one core while the other
    /// checksums it). The caller must not return anything read before [`PayloadChecksum::verify`]
    /// succeeds, and must validate what it reads as [`Reader::open`]'s callers do: the reads
    /// are bounds-checked, so unverified bytes can give wrong values but never read out of
    /// bounds.
    pub fn open_unverified(
        bytes: &'a [u8],
        kind: &[u8; 4],
        version: u32,
        fingerprint: u64,
    ) -> Result<(Reader<'a>, PayloadChecksum<'a>)> {
        if bytes.len() < HEADER_BYTES || &bytes[..7] != MAGIC {
            return Err(corrupt("not a propertok file (bad magic or truncated header)"));
        }
        if bytes[7] != CONTAINER_VERSION {
            return Err(corrupt(&format!(
                "container version {}, this build reads version {CONTAINER_VERSION} (written by another propertok release)",
                bytes[7]
            )));
        }
        if &bytes[8..12] != kind {
            return Err(corrupt("wrong kind of artefact"));
        }
        let ver = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
        if ver != version {
            return Err(corrupt(&format!("format version {ver}, this build reads version {version}")));
        }
        let fp = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
        if fp != fingerprint {
            return Err(corrupt("built from a different tokenizer (fingerprint mismatch)"));
        }
        let len = u64::from_le_bytes(bytes[24..32].try_into().expect("8 bytes"));
        let sum = u64::from_le_bytes(bytes[32..40].try_into().expect("8 bytes"));
        let payload = &bytes[HEADER_BYTES..];
        if payload.len() as u64 != len {
            return Err(corrupt("truncated payload"));
        }
        Ok((Reader { data: payload, pos: 0 }, PayloadChecksum { payload, expected: sum }))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end =
            self.pos.checked_add(n).filter(|&e| e <= self.data.len()).ok_or_else(|| corrupt("truncated field"))?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    pub fn u32s(&mut self) -> Result<Vec<u32>> {
        Ok(u32s_from_le(self.u32s_bytes()?))
    }
    /// The raw little-endian bytes of a `u32s` field (a multiple of 4), for callers that use
    /// them in place (see `forbidden_sets::U32Storage`).
    pub fn u32s_bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u64()?;
        let n = usize::try_from(n).ok().filter(|&n| n <= self.data.len() / 4).ok_or_else(|| corrupt("bad length"))?;
        self.take(n * 4)
    }
    pub fn expect_end(&self) -> Result<()> {
        if self.pos == self.data.len() {
            Ok(())
        } else {
            Err(corrupt("trailing bytes"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_corruption_is_an_error() {
        let mut w = Writer::default();
        w.u32(7);
        w.u32s(&[1, 2, 3]);
        let bytes = w.finish(b"TEST", 1, 42);
        let mut r = Reader::open(&bytes, b"TEST", 1, 42).unwrap();
        assert_eq!(r.u32().unwrap(), 7);
        assert_eq!(r.u32s().unwrap(), vec![1, 2, 3]);
        r.expect_end().unwrap();
        assert!(Reader::open(&bytes, b"TEST", 2, 42).is_err(), "other version");
        assert!(Reader::open(&bytes, b"TEST", 1, 43).is_err(), "stale fingerprint");
        assert!(Reader::open(&bytes, b"OTHR", 1, 42).is_err(), "other kind");
        let mut older = bytes.clone();
        older[7] = 0;
        assert!(
            matches!(Reader::open(&older, b"TEST", 1, 42), Err(Error::InvalidArgument(m)) if m.contains("container version 0"))
        );
        for cut in 0..bytes.len() {
            assert!(Reader::open(&bytes[..cut], b"TEST", 1, 42).is_err(), "truncated at {cut}");
        }
        for i in 40..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(Reader::open(&bad, b"TEST", 1, 42).is_err(), "flipped byte {i}");
        }
    }
}
