//! Canonical guides for tokenizers that split the text before BPE (byte-level BPE with a
//! pre-tokenizer: GPT-2, Llama 3, Qwen2, cl100k, o200k, …).
//!
//! # What canonical means here
//! Such a tokenizer normalizes the text, cuts it into *pieces* with its pre-tokenizer (see
//! `crate::pre_tokenizer::piece_machine`), and runs BPE on each piece alone; with `ignore_merges`, a piece that
//! is itself a vocabulary token is emitted whole first. So a token sequence is canonical iff
//! 1. every piece boundary of its text is a token boundary (no token spans two pieces);
//! 2. inside each piece, every adjacent token pair is canonical for the merge table (the
//!    tokenizer DFA's pair condition: BPE of a piece is pairwise-canonical exactly as BPE of a
//!    whole text, `crate::tokenizer_dfa`), and a lone piece token is emittable by the merges;
//! 3. with `ignore_merges`, a piece that spells a vocabulary token is that token alone. Only
//!    the *lone tokens* — those the merges would not produce from their own text — need a
//!    check: for any other token `t`, BPE of `t`'s text is `[t]`, so condition 2 already
//!    rejects every other split. A lone token is allowed exactly as a whole piece.
//!
//! Pairs across a piece boundary are unconstrained.
//!
//! # The construction
//! [`crate::pre_tokenizer::text_automaton`] combines the regex's byte DFA, the pre-tokenizer's automaton over
//! correctly *marked* texts, and a trie of lone tokens into one automaton `Z` over bytes and
//! marks. An *element* `(z, c)` pairs a state of `Z` with a tokenizer-side state `c`: a class of
//! the tokenizer DFA (the last token, inside the current piece), [`START`] (at a piece start: no
//! pair constraint, lone tokens allowed) or [`LONE`] (a lone token was just emitted: a piece
//! boundary must follow). A token `t` moves `(z, c)` to `(Z(z, t), class(t))` when `t` may
//! follow `c` inside a piece; an ε-move `(z, c) → (Z(z, |k), START)` puts a boundary of kind `k`
//! before the next token (allowed unless the piece just ended spells a lone token that was not
//! emitted whole). Elements are searched like CartesianMerge's product states (lazily tested
//! token groups, forward then backward), which keeps the *live* ones — those from which some
//! canonical continuation reaches acceptance.
//!
//! Whether a token boundary is a piece boundary can depend on text not generated yet (`" "`
//! before a word joins it, before a newline does not; `\s+(?!\S)` looks one character ahead),
//! so the guide state is a *set* of live elements. All elements of a set share `c` (the last
//! token's class), so a guide state is `(Zset, c)`, with the ε-moves taken implicitly. Its mask
//! is `(A \ F(c)) ∪ (B ∩ F(c))`: `A` the tokens with a live successor through any element, `B`
//! those with one through a boundary (where the pair constraint does not apply), `F(c)` the
//! tokenizer DFA's forbidden set. Every guide state holds a live element, so a decoder that
//! follows the masks can always finish.
//!
//! # Normalizers
//! With NFC or NFKC, `encode(decode(ids)) == ids` forces the text to be normalized: the
//! pre-tokenizer's automaton comes paired with the normal form's
//! ([`crate::pre_tokenizer::normal_form::Normalized`]), so the text states are exactly the
//! normalized strings' and nothing else changes here.
//!
//! # Costs
//! One trie walk over `Z` per expanded text state (like the agnostic index), element and set
//! searches like CartesianMerge's, and two token sets per `(Zset, side)` (sparse or dense,
//! deduplicated: `crate::util::token_set`). The searches visit a wide text state once per class
//! that reaches it (a JSON string's contents: ~33,000 of Llama 3's 36,464 classes), so the
//! per-visit work is kept to a merge of the still-pending tokens with the class's forbidden set
//! (`pending`), and each wide successor table is built once by partition refinement
//! (`successor_table`). Limits: `max_product_states` bounds text states, elements and guide
//! states each; the compile deadline and `max_guide_bytes` apply as in CartesianMerge.

mod elements;
mod pending;
mod states;
mod successor_table;
mod token_groups;

use std::sync::Arc;

use rustc_hash::FxHashSet;

use crate::error::{Error, Result};
use crate::guide::pre_tokenized::{class_or_lone, mark_allowed, Element, Member, Side, LONE, START};
use crate::guide::{Automaton, Guide, Method};
use crate::limits::SearchLimits;
use crate::pre_tokenizer::text_automaton::{ContentTrie, PieceBoundaries, TextAutomaton};
use crate::regex::byte_dfa::{ByteDfa, DEAD};
use crate::tokenizer::token_trie::TokenTrie;
use crate::tokenizer::vocab::Vocabulary;
use crate::tokenizer_dfa::lone_tokens::{LoneSplits, ROOT};
use crate::tokenizer_dfa::TokenizerDfa;
use pending::ClassBits;
use token_groups::{Grouper, TokenGroups};

/// What every pre-tokenized guide of one tokenizer shares: the pre-tokenizer's automaton and the
/// added tokens' contents (templates: each compile clones them, they grow lazily), the lone
/// tokens' split trie, and the trie of every token a guide may use.
#[derive(Clone)]
pub struct PreTokenizedTables<M> {
    pub machine: M,
    pub contents: ContentTrie,
    pub splits: LoneSplits,
    pub trie: TokenTrie,
}

/// What every phase reads.
struct Context<'a> {
    vocab: &'a Vocabulary,
    tok: &'a TokenizerDfa,
    splits: &'a LoneSplits,
    limits: &'a SearchLimits,
}

/// Builds the canonical guide of `dfa` for a pre-tokenized `vocab`, in three phases: the
/// elements forward and backward (`elements`), then the guide states (`states`).
pub fn build<M: PieceBoundaries + Clone>(
    vocab: &Arc<Vocabulary>,
    tokenizer_dfa: &Arc<TokenizerDfa>,
    tables: &PreTokenizedTables<M>,
    dfa: ByteDfa,
    limits: &SearchLimits,
) -> Result<Guide> {
    let started = std::time::Instant::now();
    let ctx = Context { vocab, tok: tokenizer_dfa, splits: &tables.splits, limits };
    let max = limits.max_states;
    // Each text state costs a 1 KiB row of byte transitions.
    let text_limit = if limits.max_guide_bytes / 1024 < max {
        ("max_guide_bytes", limits.max_guide_bytes)
    } else {
        ("max_product_states", max)
    };
    let mut text = TextAutomaton::new(
        &dfa,
        tables.machine.clone(),
        tables.contents.clone(),
        max.min(limits.max_guide_bytes / 1024),
        text_limit,
    );
    let mut class_bits = ClassBits::new(vocab.num_tokens());
    let elements = elements::search(&ctx, &mut text, &tables.trie, &mut class_bits)?;
    let elements_done = started.elapsed().as_secs_f64();
    let states = states::search(&ctx, &mut text, &elements, &mut class_bits)?;
    if std::env::var_os("PROPERTOK_DEBUG").is_some() {
        eprintln!(
            "pre-tokenized: elements {elements_done:.3}s, states {:.3}s; {} text states, {} elements ({} live), {}",
            started.elapsed().as_secs_f64() - elements_done,
            text.num_states(),
            elements.count,
            elements.live.len(),
            states.summary(),
        );
    }
    let frozen = text.freeze()?;
    let automaton = states.finish(&ctx, tokenizer_dfa, frozen, elements.live, dfa);
    if std::env::var_os("PROPERTOK_DEBUG").is_some() {
        let parts = automaton.heap_bytes_by_part();
        let shown: Vec<String> = parts.iter().map(|(n, b)| format!("{n} {:.2}", *b as f64 / 1e6)).collect();
        eprintln!(
            "pre-tokenized: ~{:.2} MB retained ({})",
            parts.iter().map(|p| p.1).sum::<usize>() as f64 / 1e6,
            shown.join(", ")
        );
    }
    Ok(Guide::new(Method::Cartesian, vocab.clone(), Automaton::PreTokenized(automaton), 0))
}

/// The live successor member sets of token `t` from `members` in `side`: through any element,
/// and through a boundary only.
fn exact_successors<M: PieceBoundaries>(
    ctx: &Context<'_>,
    text: &mut TextAutomaton<'_, M>,
    live: &FxHashSet<Element>,
    members: &[Member],
    side: Side,
    t: u32,
) -> Result<(Vec<Member>, Vec<Member>)> {
    let (vocab, tok, splits) = (ctx.vocab, ctx.tok, ctx.splits);
    let class = class_or_lone(tok, t);
    let bytes = vocab.token_bytes(t);
    let (mut all, mut free) = (Vec::new(), Vec::new());
    if side != Side::AfterLone && (side == Side::PieceStart || class != LONE) {
        for &Member { text: z, split: u } in members {
            let to = text.walk(z, bytes)?;
            let child = splits.child(u, t);
            if to != DEAD && live.contains(&Element::new(to, class, child)) {
                all.push(Member::new(to, child));
            }
        }
    }
    if side != Side::PieceStart {
        let c = if side == Side::AfterLone { LONE } else { 0 };
        for &Member { text: z, split: u } in members {
            if splits.spells_lone_token(u) {
                continue;
            }
            let spells = text.spells_content(z);
            for (kind, zm) in text.marks(z)?.to_vec().into_iter().enumerate() {
                if zm == DEAD || !mark_allowed(kind, spells, c) || !live.contains(&Element::new(zm, START, ROOT)) {
                    continue;
                }
                let to = text.walk(zm, bytes)?;
                let child = splits.child(ROOT, t);
                if to != DEAD && live.contains(&Element::new(to, class, child)) {
                    free.push(Member::new(to, child));
                }
            }
        }
    }
    free.sort_unstable();
    free.dedup();
    all.extend_from_slice(&free);
    all.sort_unstable();
    all.dedup();
    Ok((all, free))
}

/// The token groups of text state `z`: tokens whose walk from `z` stays alive, grouped by
/// (target text state, class), lone tokens under [`LONE`].
fn token_groups<M: PieceBoundaries, F: Fn(u32) -> u32>(
    text: &mut TextAutomaton<'_, M>,
    trie: &TokenTrie,
    grouper: &mut Grouper<F>,
    z: u32,
) -> Result<TokenGroups> {
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    trie.for_each_walk(
        z,
        |s, b| {
            let to = text.byte(s, b)?;
            Ok::<_, Error>((to != DEAD).then_some(to))
        },
        |t, to| pairs.push((t, to)),
    )?;
    Ok(grouper.group(&pairs))
}

#[cfg(test)]
mod tests;
