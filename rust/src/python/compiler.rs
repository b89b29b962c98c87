//! `propertok._core.Compiler`.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::detach::detach_for;
use super::guide::PyGuide;
use super::to_py;
use super::vocab::PyVocabulary;
use crate::compiler::Compiler;
use crate::grammar::lower::{LowerOptions, DEFAULT_MAX_GRAMMAR_REGEX_BYTES};
use crate::grammar::{parse as parse_grammar, Syntax};
use crate::guide::Method;
use crate::limits::Limits;

/// Subclassed by `propertok.Compiler`, which adds `compile_json_schema` (written in Python).
#[pyclass(name = "Compiler", module = "propertok._core", frozen, subclass)]
pub(crate) struct PyCompiler {
    inner: Arc<Compiler>,
    vocab: Py<PyVocabulary>,
}

#[pymethods]
impl PyCompiler {
    #[new]
    #[pyo3(signature = (
        vocabulary,
        *,
        max_byte_dfa_states=crate::limits::DEFAULT_MAX_BYTE_DFA_STATES,
        max_product_states=crate::limits::DEFAULT_MAX_PRODUCT_STATES,
        max_direct_states=crate::limits::DEFAULT_MAX_DIRECT_STATES,
        max_direct_transitions=crate::limits::DEFAULT_MAX_DIRECT_TRANSITIONS,
        max_compile_seconds=Some(crate::limits::DEFAULT_MAX_COMPILE_SECONDS),
        max_guide_bytes=crate::limits::DEFAULT_MAX_GUIDE_BYTES,
        max_mask_cache_bytes=crate::limits::DEFAULT_MAX_MASK_CACHE_BYTES,
        prefetch_seconds=crate::limits::DEFAULT_PREFETCH_SECONDS,
        cache_dir=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        vocabulary: Bound<'_, PyVocabulary>,
        max_byte_dfa_states: usize,
        max_product_states: usize,
        max_direct_states: usize,
        max_direct_transitions: usize,
        max_compile_seconds: Option<f64>,
        max_guide_bytes: usize,
        max_mask_cache_bytes: usize,
        prefetch_seconds: f64,
        cache_dir: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        if !(prefetch_seconds.is_finite() && prefetch_seconds >= 0.0) {
            return Err(PyValueError::new_err(format!(
                "prefetch_seconds must be a finite, non-negative number, got {prefetch_seconds}"
            )));
        }
        if max_compile_seconds.is_some_and(|s| s.is_nan() || s < 0.0) {
            return Err(PyValueError::new_err(format!(
                "max_compile_seconds must be a non-negative number or None, got {}",
                max_compile_seconds.unwrap_or_default()
            )));
        }
        let limits = Limits {
            max_byte_dfa_states,
            max_product_states,
            max_direct_states,
            max_direct_transitions,
            max_compile_seconds,
            max_guide_bytes,
            max_mask_cache_bytes,
            prefetch_seconds,
        };
        let cache_dir =
            cache_dir.or_else(|| std::env::var_os("PROPERTOK_CACHE_DIR").filter(|v| !v.is_empty()).map(Into::into));
        let inner = Arc::new(Compiler::new(vocabulary.get().inner.clone(), limits).with_cache_dir(cache_dir));
        Ok(PyCompiler { inner, vocab: vocabulary.unbind() })
    }
    #[getter]
    fn vocabulary(&self, py: Python<'_>) -> Py<PyVocabulary> {
        self.vocab.clone_ref(py)
    }
    #[pyo3(signature = (pattern, method="cartesian", *, lazy=None))]
    fn compile_regex(&self, py: Python<'_>, pattern: String, method: &str, lazy: Option<bool>) -> PyResult<PyGuide> {
        let method = Method::parse(method).map_err(to_py)?;
        // Lazy by default with cartesian, the same masks: compile plus one document's masks cost
        // less on 143 of 143 JSONSchemaBench schemas on Llama 3 (median 1.4 ms against 0.86 s)
        // and 129 of 143 on Mistral-7B (1.4 against 11.5 ms), and the eager product passes
        // `max_product_states` on 7 of 50 Github_* ones; a first visit makes the mask median
        // along a first document ~2x the eager guide's (`benches/RESULTS.md`, stop 65). With
        // a normalizer or WordPiece the eager guide of free text does not fit its limits.
        let lazy = lazy_for(lazy, method, true)?;
        let compiler = self.inner.clone();
        let guide = if lazy {
            // Most take under a millisecond: the GIL is released once the work turns out long
            // (see `detach`).
            detach_for(py, compiler.lazy_compiles_report_long_work(), move || compiler.compile_regex_lazy(&pattern))
        } else {
            py.detach(move || match method {
                Some(Method::Cartesian) if lazy => compiler.compile_regex_lazy(&pattern),
                Some(m) => compiler.compile_regex(&pattern, m),
                None => compiler.compile_regex_auto(&pattern),
            })
        }
        .map_err(to_py)?;
        Ok(PyGuide { inner: Arc::new(guide) })
    }
    /// Compiles a Lark or GBNF grammar; see `propertok.Compiler.compile_grammar` in the stubs.
    #[pyo3(signature = (grammar, syntax="lark", method="cartesian", *, lazy=None, start=None, max_recursion_depth=None, max_regex_bytes=DEFAULT_MAX_GRAMMAR_REGEX_BYTES))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn compile_grammar(
        &self,
        py: Python<'_>,
        grammar: String,
        syntax: &str,
        method: &str,
        lazy: Option<bool>,
        start: Option<String>,
        max_recursion_depth: Option<u32>,
        max_regex_bytes: usize,
    ) -> PyResult<PyGuide> {
        let syntax = Syntax::parse(syntax).map_err(to_py)?;
        let method = Method::parse(method).map_err(to_py)?;
        // Lazy by default with cartesian, unlike `compile_regex`: a grammar's regex repeats every
        // rule it inlines, and its eager guide can take seconds on a 128k vocabulary.
        let lazy = lazy_for(lazy, method, true)?;
        let options = LowerOptions { max_recursion_depth, max_regex_bytes };
        let compiler = self.inner.clone();
        // A lazy guide's grammar of usual size compiles in a millisecond or two, with the GIL
        // kept until the work turns out long (see `compile_regex`); parsing and lowering a
        // longer text is taken as long from the start.
        let reports =
            lazy && grammar.len() <= Compiler::LONG_PATTERN_BYTES && compiler.lazy_compiles_report_long_work();
        let guide = detach_for(py, reports, move || {
            let grammar = parse_grammar(&grammar, syntax, start.as_deref())?;
            compiler.compile_grammar(&grammar, options, method, lazy)
        })
        .map_err(to_py)?;
        Ok(PyGuide { inner: Arc::new(guide) })
    }
    /// A lazy guide of a pushdown automaton's rules (`(name, regex or None)`, the first the
    /// start, calls written as marker bytes): for `compile_json_schema`'s recursive schemas.
    #[pyo3(signature = (rules, max_recursion_depth=None))]
    fn _compile_rule_regexes(
        &self,
        py: Python<'_>,
        rules: Vec<(String, Option<String>)>,
        max_recursion_depth: Option<u32>,
    ) -> PyResult<PyGuide> {
        let compiler = self.inner.clone();
        let compile = move || compiler.compile_rule_regexes(&rules, max_recursion_depth);
        // Usually a millisecond or two, with the GIL kept until the work turns out long (see
        // `compile_regex`).
        let guide = detach_for(py, self.inner.lazy_compiles_report_long_work(), compile).map_err(to_py)?;
        Ok(PyGuide { inner: Arc::new(guide) })
    }
    /// Loads a guide saved with `Guide.to_bytes()` for this compiler's tokenizer.
    fn guide_from_bytes(&self, py: Python<'_>, data: Vec<u8>) -> PyResult<PyGuide> {
        let compiler = self.inner.clone();
        let guide = py
            .detach(move || {
                crate::guide::io::guide_from_bytes(&data, compiler.vocabulary(), || compiler.tokenizer_dfa().cloned())
                    .map(|g| g.with_mask_cache_limit(compiler.limits().max_mask_cache_bytes))
            })
            .map_err(to_py)?;
        Ok(PyGuide { inner: Arc::new(guide) })
    }
    fn tokenizer_dfa_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let compiler = self.inner.clone();
        // Read inside the closure: the DFA itself is not cloned out (54 MB for Llama 3).
        let dfa = py
            .detach(move || {
                compiler.tokenizer_dfa().map(|dfa| DfaFigures {
                    num_classes: dfa.num_classes(),
                    num_states: dfa.num_states(),
                    num_emittable: dfa.num_emittable(),
                    has_fallback: dfa.fallback_tokens().is_some(),
                    num_forbidden_pairs: dfa.num_forbidden_pairs(),
                    build_seconds: dfa.build_seconds(),
                })
            })
            .map_err(to_py)?;
        let d = PyDict::new(py);
        let n = self.inner.vocabulary().num_tokens();
        d.set_item("num_classes", dfa.num_classes)?;
        d.set_item("num_states", dfa.num_states)?;
        d.set_item("num_emittable_tokens", dfa.num_emittable)?;
        let fallback = if dfa.has_fallback { 256 } else { 0 };
        let special = (0..n as u32).filter(|&t| self.inner.vocabulary().is_never_allowed(t)).count();
        let compiler = self.inner.clone();
        let lone = py.detach(move || compiler.lone_tokens().map(<[u32]>::len)).map_err(to_py)?;
        d.set_item("num_byte_fallback_tokens", fallback)?;
        // Emitted only as a whole pre-tokenizer piece (ignore_merges), never by the merges.
        d.set_item("num_lone_tokens", lone)?;
        d.set_item("num_unreachable_tokens", n - dfa.num_emittable - fallback - special - lone)?;
        let compiler = self.inner.clone();
        let split = py.detach(move || compiler.tokens_always_split().map(|v| v.len())).map_err(to_py)?;
        // Emittable by the merges, but the pre-tokenizer never leaves their text whole.
        d.set_item("num_always_split_tokens", split)?;
        d.set_item("num_forbidden_pairs", dfa.num_forbidden_pairs)?;
        d.set_item("build_seconds", dfa.build_seconds)?;
        d.set_item("cache", self.inner.cache_status())?;
        // Lazy guides' slice group sets so far: walked here, or read from `cache_dir` (their
        // contents read, or shared with an equal set in memory).
        let (walked, loaded) = self.inner.slice_sets_made().unwrap_or((0, 0));
        d.set_item("slice_sets_walked", walked)?;
        d.set_item("slice_sets_loaded", loaded)?;
        d.set_item("slice_set_contents_read", self.inner.slice_set_contents_read().unwrap_or(0))?;
        let (found, loaded) = self.inner.slice_regions_made().unwrap_or((0, 0));
        d.set_item("slice_regions_found", found)?;
        d.set_item("slice_regions_loaded", loaded)?;
        Ok(d)
    }
    /// Token ids the merges can emit but whose text the pre-tokenizer never leaves whole (so no
    /// canonical sequence contains them); empty for tokenizers without a pre-tokenizer.
    fn tokens_always_split(&self, py: Python<'_>) -> PyResult<Vec<u32>> {
        let compiler = self.inner.clone();
        py.detach(move || compiler.tokens_always_split()).map_err(to_py)
    }
    #[getter]
    fn tokenizer_dfa_construction(&self, py: Python<'_>) -> PyResult<&'static str> {
        let compiler = self.inner.clone();
        py.detach(move || compiler.tokenizer_dfa().map(|dfa| dfa.construction().name())).map_err(to_py)
    }
}

/// What `tokenizer_dfa_stats` reports of the tokenizer DFA itself.
struct DfaFigures {
    num_classes: usize,
    num_states: usize,
    num_emittable: usize,
    has_fallback: bool,
    num_forbidden_pairs: usize,
    build_seconds: f64,
}

/// Whether a compile builds a lazy guide: `requested`, else `default` for `cartesian`. `direct`,
/// `agnostic` and `auto` (`None`, which may build a direct DFA) are eager by construction.
fn lazy_for(requested: Option<bool>, method: Option<Method>, default: bool) -> PyResult<bool> {
    match (requested, method) {
        (None, Some(Method::Cartesian)) => Ok(default),
        (None, _) | (Some(false), _) => Ok(false),
        (Some(true), Some(Method::Cartesian)) => Ok(true),
        (Some(true), _) => Err(PyValueError::new_err(
            "lazy=True needs method='cartesian': the other methods build their whole automaton up front",
        )),
    }
}
