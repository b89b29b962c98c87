//! A normal form kept in a compiler's cache directory.
//!
//! [`NormalForm::build`] reads the properties of all 1.1 M code points and minimizes a DFA over
//! 406 classes: ~3.1 G instructions, 0.2-0.3 s of a process's first lazy guide on an NFC
//! tokenizer (Qwen2: 470 ms to its first guide against Llama 3's 180). The result depends only
//! on the form and on the Unicode tables of `unicode-normalization-alignments` (pinned), so one
//! file per form serves every tokenizer: `normal-form-{nfc,nfkc}-<fingerprint>.bin`, the
//! classes as runs and the minimal DFA's table in the project's checksummed container
//! ([`crate::util::serialize`]); what is derived from them is derived again on load.
//!
//! Invariants checked on load, so that a damaged file is an error and never a panic: the runs
//! start at U+0000 and ascend within the code points, every class id is below the number of
//! classes, and every transition is a state or [`DEAD`]. The fingerprint covers the form, the
//! Unicode version and this format's version. Files are written whole and renamed over the
//! old one, as the tokenizer DFA's are.

use std::path::{Path, PathBuf};

use super::{CharClasses, Form, NormalForm, DEAD};
use crate::error::{Error, Result};
use crate::util::serialize::{replace_file, FileWriter, Fnv64, Reader, Sink};

const KIND: &[u8; 4] = b"NFRM";
/// 1: classes as runs, then the minimal table without the inert-only row.
const FORMAT: u32 = 1;

fn tag(form: Form) -> &'static str {
    match form {
        Form::Nfc => "nfc",
        Form::Nfkc => "nfkc",
    }
}

/// What the file's contents are a function of.
pub(super) fn fingerprint(form: Form) -> u64 {
    let mut h = Fnv64::default();
    h.write(tag(form).as_bytes());
    let (major, minor, micro) = unicode_normalization_alignments::UNICODE_VERSION;
    for v in [major, minor, micro, FORMAT as u64] {
        h.write_u64(v);
    }
    h.finish()
}

pub(super) fn path(dir: &Path, form: Form) -> PathBuf {
    dir.join(format!("normal-form-{}-{:016x}.bin", tag(form), fingerprint(form)))
}

/// Writes `nf` to `path`, whole or not at all ([`replace_file`]).
pub(super) fn write_file(nf: &NormalForm, path: &Path, form: Form) -> std::io::Result<()> {
    replace_file(path, |tmp| {
        let mut out = FileWriter::create(tmp)?;
        let (starts, ids) = nf.classes.run_starts_and_ids();
        out.u32(nf.classes.num_classes() as u32);
        out.u32(nf.num_states as u32);
        out.u32s(starts);
        out.u32s(ids);
        out.u32s(&nf.table[..nf.num_states * nf.classes.num_classes()]);
        out.finish(KIND, FORMAT, fingerprint(form))
    })
}

fn invalid(what: &str) -> Error {
    Error::InvalidArgument(format!("invalid propertok cache/serialized data: normal form: {what}"))
}

/// The normal form kept at `path`, checked (see the module docs).
pub(super) fn read_file(path: &Path, form: Form) -> Result<NormalForm> {
    let bytes = std::fs::read(path).map_err(|e| invalid(&e.to_string()))?;
    let mut r = Reader::open(&bytes, KIND, FORMAT, fingerprint(form))?;
    let (n, num_states) = (r.u32()? as usize, r.u32()? as usize);
    let (starts, ids, table) = (r.u32s()?, r.u32s()?, r.u32s()?);
    r.expect_end()?;
    if n == 0 || n > u16::MAX as usize || num_states == 0 {
        return Err(invalid("no classes or no states"));
    }
    let ascending = starts.windows(2).all(|w| w[0] < w[1]);
    if starts.first() != Some(&0) || !ascending || starts.last().is_some_and(|&s| s > char::MAX as u32) {
        return Err(invalid("class runs out of order"));
    }
    if ids.len() != starts.len() || ids.iter().any(|&c| c as usize >= n) {
        return Err(invalid("a class id out of range"));
    }
    if table.len() != num_states.checked_mul(n).ok_or_else(|| invalid("table size"))?
        || table.iter().any(|&t| t != DEAD && t as usize >= num_states)
    {
        return Err(invalid("a transition out of range"));
    }
    Ok(NormalForm::assemble(CharClasses::from_runs(&starts, &ids, n), table, num_states))
}
