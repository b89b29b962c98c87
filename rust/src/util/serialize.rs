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
    let mut lanes = Checksum::default().lanes;
    let mut blocks = bytes.chunks_exact(32);
    for block in &mut blocks {
        Checksum::block(&mut lanes, block);
    }
    Checksum::finish_lanes(lanes, blocks.remainder(), bytes.len() as u64)
}

/// [`checksum`] computed over a stream of byte slices: 32-byte blocks as they complete, a
/// partial block held until the next slice or the end.
struct Checksum {
    lanes: [u64; 4],
    pending: [u8; 32],
    pending_len: usize,
    len: u64,
}

impl Default for Checksum {
    fn default() -> Self {
        Checksum {
            lanes: [0xcbf2_9ce4_8422_2325, 0x8422_2325_cbf2_9ce4, 0x9e37_79b9_7f4a_7c15, 0xbf58_476d_1ce4_e5b9],
            pending: [0; 32],
            pending_len: 0,
            len: 0,
        }
    }
}

impl Checksum {
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    #[inline(always)]
    fn block(lanes: &mut [u64; 4], block: &[u8]) {
        for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            *lane ^= u64::from_le_bytes(word.try_into().expect("8 bytes"));
            *lane = lane.wrapping_mul(Self::PRIME);
            *lane ^= *lane >> 29;
        }
    }

    fn update(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        if self.pending_len > 0 {
            let take = (32 - self.pending_len).min(bytes.len());
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(&bytes[..take]);
            self.pending_len += take;
            bytes = &bytes[take..];
            if self.pending_len < 32 {
                return;
            }
            Self::block(&mut self.lanes, &self.pending);
            self.pending_len = 0;
        }
        // (the lanes in locals: kept in registers across the hot loop)
        let mut lanes = self.lanes;
        let mut blocks = bytes.chunks_exact(32);
        for block in &mut blocks {
            Self::block(&mut lanes, block);
        }
        self.lanes = lanes;
        let rest = blocks.remainder();
        self.pending[..rest.len()].copy_from_slice(rest);
        self.pending_len = rest.len();
    }

    fn finish(self) -> u64 {
        Self::finish_lanes(self.lanes, &self.pending[..self.pending_len], self.len)
    }

    /// The lanes, the bytes after the last whole block and the total length, combined.
    fn finish_lanes(lanes: [u64; 4], rest: &[u8], len: u64) -> u64 {
        let mut h = Fnv64::default();
        h.write(rest);
        for lane in lanes {
            h.write_u64(lane);
        }
        h.write_u64(len);
        h.finish()
    }
}

/// Appends little-endian values after room for the container header, which
/// [`Writer::finish`] fills in place (no copy of the payload).
pub struct Writer {
    buf: Vec<u8>,
}

const HEADER_BYTES: usize = 40;

impl Default for Writer {
    fn default() -> Self {
        Writer { buf: vec![0; HEADER_BYTES] }
    }
}

/// Where a [`Writer`] or a [`FileWriter`] puts the payload's bytes.
pub trait Sink {
    fn put(&mut self, bytes: &[u8]);

    fn u8(&mut self, v: u8) {
        self.put(&[v]);
    }
    fn u32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.put(&v.to_le_bytes());
    }
    /// The length, then the values (converted a block at a time).
    fn u32s(&mut self, v: &[u32]) {
        self.u64(v.len() as u64);
        let mut block = [0u8; 4096];
        for chunk in v.chunks(1024) {
            for (out, &x) in block.chunks_exact_mut(4).zip(chunk) {
                out.copy_from_slice(&x.to_le_bytes());
            }
            self.put(&block[..chunk.len() * 4]);
        }
    }
}

impl Sink for Writer {
    fn put(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }
}

/// A bare payload, without a container (a key to compare with the one a file holds).
impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// The container header for a payload.
fn header(kind: &[u8; 4], version: u32, fingerprint: u64, payload_len: u64, checksum: u64) -> [u8; HEADER_BYTES] {
    let mut header = [0u8; HEADER_BYTES];
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
    put(&payload_len.to_le_bytes());
    put(&checksum.to_le_bytes());
    debug_assert_eq!(at, HEADER_BYTES);
    header
}

impl Writer {
    /// The payload written so far.
    pub fn payload(&self) -> &[u8] {
        &self.buf[HEADER_BYTES..]
    }

    /// Wraps the payload in the container.
    pub fn finish(self, kind: &[u8; 4], version: u32, fingerprint: u64) -> Vec<u8> {
        let mut out = self.buf;
        let (head, payload) = out.split_at_mut(HEADER_BYTES);
        head.copy_from_slice(&header(kind, version, fingerprint, payload.len() as u64, checksum(payload)));
        out
    }
}

/// A [`Writer`] that streams the payload into a file instead of memory (the same bytes): a
/// Llama 3 tokenizer DFA is ~460 MB, which a build would otherwise hold twice at its peak. The
/// header is written last, over the room left for it. The first I/O error is kept and returned
/// by [`FileWriter::finish`].
pub struct FileWriter {
    out: std::io::BufWriter<std::fs::File>,
    checksum: Checksum,
    error: Option<std::io::Error>,
}

impl FileWriter {
    pub fn create(path: &std::path::Path) -> std::io::Result<FileWriter> {
        use std::io::Write;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
        out.write_all(&[0; HEADER_BYTES])?;
        Ok(FileWriter { out, checksum: Checksum::default(), error: None })
    }

    pub fn finish(self, kind: &[u8; 4], version: u32, fingerprint: u64) -> std::io::Result<()> {
        use std::io::{Seek, Write};
        if let Some(e) = self.error {
            return Err(e);
        }
        let len = self.checksum.len;
        let head = header(kind, version, fingerprint, len, self.checksum.finish());
        let mut file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.seek(std::io::SeekFrom::Start(0))?;
        file.write_all(&head)
    }
}

impl Sink for FileWriter {
    fn put(&mut self, bytes: &[u8]) {
        use std::io::Write;
        if self.error.is_none() {
            self.checksum.update(bytes);
            if let Err(e) = self.out.write_all(bytes) {
                self.error = Some(e);
            }
        }
    }
}

/// Writes the file at `path` whole or not at all: `write` fills a file of the caller's own
/// beside it (named by process and call, so that threads and processes saving one file at once
/// each write their own), which is then renamed over `path`; on any error it is removed. The
/// caches rely on this: a reader sees an old file or a complete new one, and a file another
/// process has mapped is never changed in place (`crate::util::u32_storage`).
pub fn replace_file(
    path: &std::path::Path,
    write: impl FnOnce(&std::path::Path) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let call = WRITES.fetch_add(1, Ordering::Relaxed);
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "a cache file needs a folder and a name"));
    };
    let tmp = dir.join(format!(".{}.{}.{call}.tmp", name.to_string_lossy(), std::process::id()));
    let written = std::fs::create_dir_all(dir).and_then(|_| write(&tmp)).and_then(|_| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
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
    /// The next `n` bytes as they are.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        self.take(n)
    }
    /// The bytes left, as they are.
    pub fn rest(&mut self) -> &'a [u8] {
        let rest = &self.data[self.pos..];
        self.pos = self.data.len();
        rest
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
    /// them in place (see `crate::util::u32_storage`).
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

    /// The streamed checksum equals the one-slice checksum however the bytes are cut.
    #[test]
    fn streamed_checksum_equals_whole() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        for len in [0, 1, 31, 32, 33, 64, 100, 1000] {
            let whole = checksum(&data[..len]);
            for step in [1, 3, 7, 32, 33, 500] {
                let mut c = Checksum::default();
                for part in data[..len].chunks(step) {
                    c.update(part);
                }
                assert_eq!(c.finish(), whole, "len {len}, step {step}");
            }
        }
    }

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
