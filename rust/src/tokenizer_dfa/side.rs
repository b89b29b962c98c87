//! The tokenizer side of a text that a pre-tokenizer cuts into pieces: where the next token
//! stands with respect to the last one. Inside a piece, the tokenizer DFA's pair condition holds
//! (the last token's *class* forbids some next tokens); at a piece start nothing constrains the
//! next token and lone tokens may start; after a lone token only a boundary may come. Shared by
//! the eager pre-tokenized builder, its decode-time automaton and the lazy engine.

use crate::tokenizer_dfa::{TokenizerDfa, NO_CLASS};

/// Tokenizer-side state at the start of a piece.
pub const START: u32 = u32::MAX - 2;
/// Tokenizer-side state after a lone token: only a piece boundary may follow.
pub const LONE: u32 = u32::MAX - 3;
/// "Not a set" / "not on a lone token's split".
pub const NONE: u32 = u32::MAX;

/// How a state's tokenizer side (the last token's class, [`START`] or [`LONE`]) constrains the
/// next token.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Side {
    /// At a piece start ([`START`]: the start of the text, or right after a boundary): no pair
    /// constraint, lone tokens allowed.
    PieceStart,
    /// After a lone token ([`LONE`]): a boundary must come first.
    AfterLone,
    /// After a token with a class, inside a piece: the pair constraint, or a boundary.
    InPiece,
}

pub fn side_of(c: u32) -> Side {
    match c {
        START => Side::PieceStart,
        LONE => Side::AfterLone,
        _ => Side::InPiece,
    }
}

/// Whether a boundary of `kind` may follow a text state whose stage-0 piece spells an added
/// token's content (`spells_content`): only when that token was just emitted whole (`c` is
/// [`LONE`]); a stage-0 boundary needs it, others do not end the stage-0 piece.
#[inline]
pub fn mark_allowed(kind: usize, spells_content: bool, c: u32) -> bool {
    kind != 0 || !spells_content || c == LONE
}

#[inline]
pub fn class_or_lone(tok: &TokenizerDfa, t: u32) -> u32 {
    match tok.class_of(t) {
        NO_CLASS => LONE,
        k => k,
    }
}
