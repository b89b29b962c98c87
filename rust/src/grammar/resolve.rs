//! A grammar's special tokens resolved against one tokenizer's vocabulary.
//!
//! A grammar names a token by text (`<|python_tag|>`) or id (`<[128010]>`); what it means
//! depends on the kind of token:
//! * a **special** token (`"special": true` in `tokenizer.json`: turn, tool-call and reasoning
//!   markers) is not text at all. The tokenizer splits special tokens out of the input before
//!   anything else, so the text on either side is tokenized on its own. It stays an
//!   [`Expr::Token`], by id, and a guide allows exactly that token there;
//! * a **non-special added** token (DeepSeek V3's `<｜tool▁calls▁begin｜>`, `<think>`) is matched
//!   in the text itself, so naming it is writing its text: it becomes an [`Expr::Literal`], and
//!   canonical tokenization gives that token wherever the text spells it;
//! * an ordinary token, an end-of-sequence token (a guide ends with it after the grammar's
//!   text) or an id without a token is refused, naming it and the rule.
//!
//! A text name that is no token's text is also tried with square brackets for angle brackets
//! (`<TOOL_CALLS>` → `[TOOL_CALLS]`), the spelling llguidance uses for Mistral's control tokens.

use super::{Expr, Grammar, TokenName};
use crate::error::{Error, Result};
use crate::tokenizer::vocab::Vocabulary;

/// `grammar` with every special token named by id and every non-special added token written
/// as its text (see the module docs).
pub fn resolve_tokens(grammar: &Grammar, vocab: &Vocabulary) -> Result<Grammar> {
    let mut out = grammar.clone();
    for rule in &mut out.rules {
        let context = format!("rule `{}` (line {})", rule.name, rule.line);
        resolve(&mut rule.body, vocab, &context)?;
    }
    Ok(out)
}

fn resolve(expr: &mut Expr, vocab: &Vocabulary, context: &str) -> Result<()> {
    match expr {
        Expr::Token(name) => *expr = resolve_name(name, vocab, context)?,
        Expr::Seq(items) | Expr::Alt(items) => {
            for item in items {
                resolve(item, vocab, context)?;
            }
        }
        Expr::Repeat { expr, .. } => resolve(expr, vocab, context)?,
        Expr::Literal(_)
        | Expr::CaseInsensitiveLiteral(_)
        | Expr::Class { .. }
        | Expr::Regex { .. }
        | Expr::Rule(_) => {}
    }
    Ok(())
}

fn resolve_name(name: &TokenName, vocab: &Vocabulary, context: &str) -> Result<Expr> {
    let invalid = |why: String| Error::InvalidGrammar(format!("{context}: {name} {why}"));
    let id = match name {
        TokenName::Id(id) => *id,
        TokenName::Text(text) => {
            let bracketed = text.strip_prefix('<').and_then(|t| t.strip_suffix('>')).map(|inner| format!("[{inner}]"));
            let found = vocab.token_id(text).or_else(|| bracketed.as_deref().and_then(|b| vocab.token_id(b)));
            found.ok_or_else(|| invalid("is not the text of any token of this tokenizer".into()))?
        }
    };
    if id as usize >= vocab.num_tokens() {
        return Err(invalid(format!("is past the tokenizer's {} token ids", vocab.num_tokens())));
    }
    let text = String::from_utf8_lossy(vocab.token_bytes(id)).into_owned();
    if vocab.eos_token_ids().contains(&id) {
        return Err(invalid(format!(
            "(id {id}, {text:?}) is an end-of-sequence token of this guide: a guide ends with it after the \
             grammar's text, so leave it out of the grammar"
        )));
    }
    if vocab.special_token_ids().binary_search(&id).is_ok() {
        return Ok(Expr::Token(TokenName::Id(id)));
    }
    let added = vocab.pre_tokenizer().is_some_and(|p| p.added.iter().any(|&(a, _)| a == id));
    if added && !vocab.is_never_allowed(id) {
        return Ok(Expr::Literal(text));
    }
    Err(invalid(format!(
        "(id {id}, {text:?}) is an ordinary token, not a special one: write the text it spells as a string, \
         and canonical tokenization decides its tokens"
    )))
}
