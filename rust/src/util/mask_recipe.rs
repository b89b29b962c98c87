//! A mask kept as how to write it again, not as its words.
//!
//! A lazy guide's dense masks are a shared token set less or plus a few others (a string's
//! contents after a token: its first tokens less the lone tokens and the last token's forbidden
//! successors, plus the first tokens after a boundary). Kept as words, each costs 16 KB on a
//! 128k vocabulary, and the copy into a fresh block is most of what caching it costs: on Llama 3,
//! issue 18's grammar documents, whose steps are mostly inside long strings, took a mask median
//! of 4.4 µs with the copy kept and 3.4 µs with it made and dropped at once (so that the next
//! step reused the block while it was still in the CPU's caches). A recipe holds the shared
//! sets by reference and the few ids set after them (a few hundred bytes at most), and writes
//! the mask in a pass over them. A revisit pays that pass instead of a copy of the words: on the
//! same documents, 2.1-2.4 µs against 1.0 µs.
//!
//! # Invariants
//! * [`MaskRecipe::write`] writes every word of `out` and gives the same mask on every call:
//!   what it reads (shared sets, tokenizer tables) never changes.

use crate::util::bitset;

/// How to write a dense mask: see the module docs.
pub trait WriteMask: Send + Sync {
    /// Writes the mask into every word of `out`.
    fn write(&self, out: &mut [u32]);
    /// Heap bytes the recipe holds for itself (not the shared sets it refers to).
    fn bytes(&self) -> usize;
}

/// A recipe and the token ids set after it (byte-fallback moves, special tokens, EOS).
pub struct MaskRecipe {
    writer: Box<dyn WriteMask>,
    ids: Vec<u32>,
}

impl MaskRecipe {
    /// The mask `writer` writes with the tokens `ids` set after it.
    pub fn new(writer: Box<dyn WriteMask>, ids: Vec<u32>) -> MaskRecipe {
        MaskRecipe { writer, ids }
    }

    /// Token `t` is set after the recipe's words.
    pub fn add(&mut self, t: u32) {
        self.ids.push(t);
    }

    /// Writes the mask into every word of `out`.
    pub fn write(&self, out: &mut [u32]) {
        self.writer.write(out);
        for &t in &self.ids {
            bitset::set(out, t as usize);
        }
    }

    /// Heap bytes held, as a mask cache charges them.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<MaskRecipe>() + self.writer.bytes() + self.ids.len() * 4
    }
}

/// What a mask's computation tells its cache besides the words it wrote.
pub enum MaskForm {
    /// Nothing: the cache keeps the words (or the ids it finds in them).
    Words,
    /// The mask's ids, in any order, repeats allowed (a narrow state's): kept instead of
    /// scanning the words.
    Ids(Vec<u32>),
    /// How to write the mask again.
    Recipe(MaskRecipe),
}

impl MaskForm {
    /// Token `t` was set in the mask after the form was made.
    pub fn add(&mut self, t: u32) {
        match self {
            MaskForm::Words => {}
            MaskForm::Ids(ids) => ids.push(t),
            MaskForm::Recipe(recipe) => recipe.add(t),
        }
    }
}
