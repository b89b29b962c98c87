//! The PyO3 binding module `propertok._core` — the only module that knows about Python.
//!
//! Each class is a thin wrapper over a core type behind an `Arc`; errors map onto Python
//! exceptions in one place ([`to_py`]); long work (tokenizer DFA build, regex compilation)
//! runs with the GIL released.

use std::sync::Arc;

use numpy::{ndarray::ArrayView1, PyArray1, PyReadwriteArray2, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyNotImplementedError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::error::Error;
use crate::guide::matcher::Matcher;
use crate::guide::{Guide, Method};
use crate::regex::byte_dfa::ByteDfa;
use crate::tokenizer::vocab::Vocabulary;
use crate::{compiler::Compiler, limits::Limits};

/// The extension's Rust allocations go to mimalloc, not glibc's malloc. A Llama 3 compile frees
/// ~150 MB of temporaries and dropping a guide frees tens of thousands of blocks; under glibc
/// the next large allocation sorts those freed chunks first, and that allocation is usually the
/// mask cache's slot for the next state, so the first masks after a compile took 100–400 µs
/// instead of 3–10 µs (`benches/compare.py`, Llama 3: mask p99 115 → 14 µs). mimalloc frees
/// into per-page lists and has no such deferred work. `v2`, `no_thp` and `local_dynamic_tls`
/// (see `Cargo.toml`): its v3 with transparent huge pages made the tokenizer-DFA build ~30 %
/// slower (huge pages zeroed again after each purge), and a library loaded with `dlopen` needs
/// the dynamic TLS model. Only the extension uses it: the crate itself (`cargo test`,
/// criterion) keeps the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Returns the memory the extension has freed to the operating system (mimalloc's
/// `mi_collect(true)`; glibc's `malloc_trim` does not reach it). For measuring resident memory,
/// as `benches/compare.py` does; results of propertok never depend on it.
#[pyfunction]
fn _release_freed_memory(py: Python<'_>) {
    // SAFETY: `mi_collect` only returns free pages of mimalloc's own heaps to the OS.
    py.detach(|| unsafe { libmimalloc_sys::mi_collect(true) });
}

create_exception!(_core, PropertokError, PyException, "Base class of propertok's own exceptions.");
create_exception!(_core, LimitExceeded, PropertokError, "A documented size limit was reached.");

fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Unsupported(_) => PyNotImplementedError::new_err(msg),
        Error::LimitExceeded { .. } => LimitExceeded::new_err(msg),
        Error::InvalidRegex(_)
        | Error::UnsupportedRegex(_)
        | Error::EmptyLanguage(_)
        | Error::MalformedTokenizer(_)
        | Error::UnsupportedTokenizer(_)
        | Error::InvalidArgument(_) => PyValueError::new_err(msg),
    }
}

fn token_id(v: i64, what: &str) -> PyResult<u32> {
    u32::try_from(v).map_err(|_| PyValueError::new_err(format!("{what} {v} is out of range")))
}

#[pyclass(name = "Vocabulary", module = "propertok._core", frozen)]
struct PyVocabulary {
    inner: Arc<Vocabulary>,
}

fn parse_ids(ids: Option<Vec<i64>>) -> PyResult<Option<Vec<u32>>> {
    ids.map(|v| v.into_iter().map(|i| token_id(i, "EOS token id")).collect()).transpose()
}

#[pymethods]
impl PyVocabulary {
    #[staticmethod]
    #[pyo3(signature = (json, eos_token_ids=None, vocab_size=None))]
    fn from_json(
        py: Python<'_>,
        json: String,
        eos_token_ids: Option<Vec<i64>>,
        vocab_size: Option<usize>,
    ) -> PyResult<Self> {
        let eos = parse_ids(eos_token_ids)?;
        let inner = py.detach(|| Vocabulary::from_json(&json, eos, vocab_size)).map_err(to_py)?;
        Ok(PyVocabulary { inner: Arc::new(inner) })
    }

    #[staticmethod]
    #[pyo3(signature = (path, eos_token_ids=None, vocab_size=None))]
    fn from_file(
        py: Python<'_>,
        path: std::path::PathBuf,
        eos_token_ids: Option<Vec<i64>>,
        vocab_size: Option<usize>,
    ) -> PyResult<Self> {
        let json = std::fs::read_to_string(&path).map_err(|e| {
            pyo3::exceptions::PyOSError::new_err(format!("cannot read tokenizer file {}: {e}", path.display()))
        })?;
        Self::from_json(py, json, eos_token_ids, vocab_size)
    }

    #[staticmethod]
    #[pyo3(signature = (tokenizer, eos_token_ids=None, vocab_size=None))]
    fn from_tokenizer(
        py: Python<'_>,
        tokenizer: Bound<'_, PyAny>,
        eos_token_ids: Option<Vec<i64>>,
        vocab_size: Option<usize>,
    ) -> PyResult<Self> {
        let loading = py.import("propertok._loading")?;
        let (json, default_eos): (String, Option<Vec<i64>>) =
            loading.call_method1("describe_tokenizer", (tokenizer,))?.extract()?;
        Self::from_json(py, json, eos_token_ids.or(default_eos), vocab_size)
    }

    #[getter]
    fn num_tokens(&self) -> usize {
        self.inner.num_tokens()
    }
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }
    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.inner.eos_token_ids().to_vec()
    }
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind().name()
    }
    #[getter]
    fn canonical_unsupported_reason(&self) -> Option<String> {
        self.inner.canonical_unsupported_reason().map(str::to_string)
    }
    /// For a byte-level BPE tokenizer canonical guides support: its pre-tokenizer as a list of
    /// `Split(pattern, Isolated)` stages, its normalizer ("none", "NFC", "NFKC") and
    /// `ignore_merges`; `None` otherwise.
    #[getter]
    fn pre_tokenizer<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(p) = self.inner.pre_tokenizer() else { return Ok(None) };
        let d = PyDict::new(py);
        d.set_item("stages", p.stages.clone())?;
        d.set_item(
            "normalization",
            match p.normalization {
                crate::tokenizer::vocab::Normalization::None => "none",
                crate::tokenizer::vocab::Normalization::Nfc => "NFC",
                crate::tokenizer::vocab::Normalization::Nfkc => "NFKC",
            },
        )?;
        d.set_item("ignore_merges", p.ignore_merges)?;
        Ok(Some(d))
    }
    #[getter]
    fn special_token_ids(&self) -> Vec<u32> {
        self.inner.special_token_ids().to_vec()
    }
    fn token_bytes<'py>(&self, py: Python<'py>, token_id: i64) -> PyResult<Bound<'py, PyBytes>> {
        let id = u32::try_from(token_id).ok().filter(|&t| (t as usize) < self.inner.vocab_size()).ok_or_else(|| {
            PyValueError::new_err(format!(
                "token id {token_id} is out of range (vocab_size is {})",
                self.inner.vocab_size()
            ))
        })?;
        let bytes: &[u8] = if (id as usize) < self.inner.num_tokens() { self.inner.token_bytes(id) } else { &[] };
        Ok(PyBytes::new(py, bytes))
    }
    fn __repr__(&self) -> String {
        format!(
            "Vocabulary(kind={:?}, num_tokens={}, vocab_size={}, eos_token_ids={:?})",
            self.inner.kind().name(),
            self.inner.num_tokens(),
            self.inner.vocab_size(),
            self.inner.eos_token_ids()
        )
    }
}

#[pyclass(name = "ByteDfa", module = "propertok._core", frozen)]
struct PyByteDfa {
    inner: ByteDfa,
}

#[pymethods]
impl PyByteDfa {
    #[new]
    #[pyo3(signature = (pattern, max_states=crate::limits::DEFAULT_MAX_BYTE_DFA_STATES))]
    fn new(py: Python<'_>, pattern: String, max_states: usize) -> PyResult<Self> {
        let inner = py.detach(|| ByteDfa::from_regex(&pattern, max_states)).map_err(to_py)?;
        Ok(PyByteDfa { inner })
    }
    #[getter]
    fn num_states(&self) -> usize {
        self.inner.num_states()
    }
    fn matches(&self, data: &[u8]) -> bool {
        self.inner.matches(data)
    }
    #[pyo3(signature = (n, seed, max_len=64))]
    fn sample<'py>(&self, py: Python<'py>, n: usize, seed: u64, max_len: usize) -> Vec<Bound<'py, PyBytes>> {
        self.inner.sample(n, seed, max_len).iter().map(|s| PyBytes::new(py, s)).collect()
    }
}

#[pyclass(name = "Compiler", module = "propertok._core", frozen)]
struct PyCompiler {
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
        cache_dir: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
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
    #[pyo3(signature = (pattern, method="cartesian"))]
    fn compile_regex(&self, py: Python<'_>, pattern: String, method: &str) -> PyResult<PyGuide> {
        let method = Method::parse(method).map_err(to_py)?;
        let compiler = self.inner.clone();
        let guide = py
            .detach(move || match method {
                Some(m) => compiler.compile_regex(&pattern, m),
                None => compiler.compile_regex_auto(&pattern),
            })
            .map_err(to_py)?;
        Ok(PyGuide { inner: Arc::new(guide) })
    }
    /// Compiles a JSON schema (dict or JSON text) through `propertok.json_schema.schema_to_regex`.
    #[pyo3(signature = (schema, method="cartesian", **options))]
    fn compile_json_schema(
        &self,
        py: Python<'_>,
        schema: Bound<'_, PyAny>,
        method: &str,
        options: Option<Bound<'_, PyDict>>,
    ) -> PyResult<PyGuide> {
        let module = py.import("propertok.json_schema")?;
        let regex: String = module.getattr("schema_to_regex")?.call((schema,), options.as_ref())?.extract()?;
        self.compile_regex(py, regex, method)
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
        let dfa = py.detach(move || compiler.tokenizer_dfa().cloned()).map_err(to_py)?;
        let d = PyDict::new(py);
        let n = self.inner.vocabulary().num_tokens();
        d.set_item("num_classes", dfa.num_classes())?;
        d.set_item("num_states", dfa.num_states())?;
        d.set_item("num_emittable_tokens", dfa.num_emittable())?;
        let fallback = dfa.fallback_tokens().map_or(0, |_| 256);
        let special = (0..n as u32).filter(|&t| self.inner.vocabulary().is_never_allowed(t)).count();
        let compiler = self.inner.clone();
        let lone = py.detach(move || compiler.lone_tokens().map(<[u32]>::len)).map_err(to_py)?;
        d.set_item("num_byte_fallback_tokens", fallback)?;
        // Emitted only as a whole pre-tokenizer piece (ignore_merges), never by the merges.
        d.set_item("num_lone_tokens", lone)?;
        d.set_item("num_unreachable_tokens", n - dfa.num_emittable() - fallback - special - lone)?;
        let compiler = self.inner.clone();
        let split = py.detach(move || compiler.tokens_always_split().map(|v| v.len())).map_err(to_py)?;
        // Emittable by the merges, but the pre-tokenizer never leaves their text whole.
        d.set_item("num_always_split_tokens", split)?;
        d.set_item("num_forbidden_pairs", dfa.num_forbidden_pairs())?;
        d.set_item("build_seconds", dfa.build_seconds())?;
        d.set_item("cache", self.inner.cache_status())?;
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
        let dfa = py.detach(move || compiler.tokenizer_dfa().cloned()).map_err(to_py)?;
        Ok(dfa.construction().name())
    }
}

#[pyclass(name = "Guide", module = "propertok._core", frozen)]
struct PyGuide {
    inner: Arc<Guide>,
}

impl PyGuide {
    fn state(&self, state: i64) -> PyResult<u32> {
        let s = u32::try_from(state).map_err(|_| PyValueError::new_err(format!("state {state} is out of range")))?;
        self.inner.check_state(s).map_err(to_py)?;
        Ok(s)
    }
}

#[pymethods]
impl PyGuide {
    #[getter]
    fn initial_state(&self) -> u32 {
        self.inner.initial_state()
    }
    #[getter]
    fn num_states(&self) -> usize {
        self.inner.num_states()
    }
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }
    #[getter]
    fn eos_token_ids(&self) -> Vec<u32> {
        self.inner.eos_token_ids().to_vec()
    }
    #[getter]
    fn method(&self) -> &'static str {
        self.inner.method().name()
    }
    fn num_transitions(&self, py: Python<'_>) -> usize {
        let g = self.inner.clone();
        py.detach(move || g.num_transitions())
    }
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let g = self.inner.clone();
        let st = py.detach(move || g.stats());
        let d = PyDict::new(py);
        d.set_item("method", self.inner.method().name())?;
        d.set_item("num_states", st.num_states)?;
        d.set_item("num_transitions", st.num_transitions)?;
        d.set_item("mean_allowed_tokens", st.mean_allowed_tokens)?;
        d.set_item("single_choice_share", st.single_choice_share)?;
        let (cached, max_cached) = self.inner.mask_cache_bytes();
        d.set_item("mask_cache_bytes", cached)?;
        d.set_item("max_mask_cache_bytes", max_cached)?;
        Ok(d)
    }
    fn allowed_tokens<'py>(&self, py: Python<'py>, state: i64) -> PyResult<Bound<'py, PyArray1<i32>>> {
        let s = self.state(state)?;
        let v: Vec<i32> = self.inner.allowed_tokens(s).into_iter().map(|t| t as i32).collect();
        Ok(PyArray1::from_vec(py, v))
    }
    fn mask<'py>(slf: Bound<'py, Self>, state: i64) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let this = slf.get();
        let s = this.state(state)?;
        let Some(words) = this.inner.cached_mask(s) else {
            // The guide's mask cache is full (max_mask_cache_bytes): a fresh, owned array.
            let array = PyArray1::from_vec(slf.py(), this.inner.mask(s).into_owned());
            array.call_method1("setflags", (false,))?;
            return Ok(array);
        };
        let view = ArrayView1::from(words);
        // SAFETY: the words live in the guide's cache (a boxed slice that is never moved or
        // freed while the guide lives), and `slf` — which owns the guide — becomes the array's
        // base object, so the memory outlives the array. The array is made read-only below.
        let array = unsafe { PyArray1::borrow_from_array(&view, slf.clone().into_any()) };
        array.call_method1("setflags", (false,))?;
        Ok(array)
    }
    fn next_state(&self, state: i64, token_id: i64) -> PyResult<u32> {
        let s = self.state(state)?;
        let t = u32::try_from(token_id)
            .map_err(|_| PyValueError::new_err(format!("token id {token_id} is out of range")))?;
        self.inner.next_state(s, t).map_err(to_py)
    }
    fn is_final(&self, state: i64) -> PyResult<bool> {
        Ok(self.inner.is_final(self.state(state)?))
    }
    fn count_sequences(&self, py: Python<'_>) -> Option<u64> {
        let g = self.inner.clone();
        py.detach(move || g.count_sequences()).map(|c| u64::try_from(c).unwrap_or(u64::MAX))
    }
    #[pyo3(signature = (seed, max_tokens=64))]
    fn random_walk(&self, py: Python<'_>, seed: u64, max_tokens: usize) -> PyResult<Vec<u32>> {
        let g = self.inner.clone();
        py.detach(move || g.random_walk(seed, max_tokens)).map_err(to_py)
    }
    /// `None` when both guides accept the same token sequences, else a shortest token sequence
    /// after which their masks differ.
    fn first_difference(&self, py: Python<'_>, other: PyRef<'_, PyGuide>) -> PyResult<Option<Vec<u32>>> {
        if self.inner.vocab_size() != other.inner.vocab_size() {
            return Err(PyValueError::new_err("the guides have different vocab sizes"));
        }
        let (a, b) = (self.inner.clone(), other.inner.clone());
        Ok(py.detach(move || a.first_difference(&b)))
    }
    /// The guide as bytes (versioned, checksummed; load with `Compiler.guide_from_bytes`).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let g = self.inner.clone();
        let bytes = py.detach(move || crate::guide::io::guide_to_bytes(&g)).map_err(to_py)?;
        Ok(PyBytes::new(py, &bytes))
    }
    fn __reduce__(&self) -> PyResult<()> {
        Err(pyo3::exceptions::PyTypeError::new_err(
            "a Guide cannot be pickled on its own (it shares its tokenizer's data): send guide.to_bytes() \
             and load it with Compiler(vocab).guide_from_bytes(data)",
        ))
    }
    fn matcher(&self) -> PyMatcher {
        PyMatcher { inner: Matcher::new(self.inner.clone()) }
    }
    fn __repr__(&self) -> String {
        format!(
            "Guide(method={:?}, num_states={}, vocab_size={})",
            self.inner.method().name(),
            self.inner.num_states(),
            self.inner.vocab_size()
        )
    }
}

#[pyclass(name = "Matcher", module = "propertok._core")]
struct PyMatcher {
    inner: Matcher,
}

#[pymethods]
impl PyMatcher {
    #[getter]
    fn state(&self) -> u32 {
        self.inner.state()
    }
    #[getter]
    fn num_accepted_tokens(&self) -> usize {
        self.inner.num_accepted_tokens()
    }
    fn accept_token(&mut self, token_id: i64) -> PyResult<bool> {
        let t = u32::try_from(token_id)
            .map_err(|_| PyValueError::new_err(format!("token id {token_id} is out of range")))?;
        self.inner.accept_token(t).map_err(to_py)
    }
    fn accept_tokens(&mut self, token_ids: Vec<i64>) -> PyResult<bool> {
        for t in token_ids {
            if !self.accept_token(t)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
    fn rollback(&mut self, num_tokens: usize) -> PyResult<()> {
        self.inner.rollback(num_tokens).map_err(to_py)
    }
    fn reset(&mut self) {
        self.inner.reset()
    }
    fn is_accepting(&self) -> bool {
        self.inner.is_accepting()
    }
    fn is_terminated(&self) -> bool {
        self.inner.is_terminated()
    }
    fn allowed_tokens<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i32>> {
        PyArray1::from_vec(py, self.inner.allowed_tokens().into_iter().map(|t| t as i32).collect())
    }
    fn forced_tokens(&self) -> Vec<u32> {
        self.inner.forced_tokens()
    }
    #[pyo3(signature = (bitmask, index=0))]
    fn fill_next_token_bitmask(&self, bitmask: Bound<'_, PyAny>, index: isize) -> PyResult<()> {
        let words = self.inner.guide().mask_words();
        let mut array: PyReadwriteArray2<i32> = bitmask.extract().map_err(|_| {
            PyValueError::new_err(format!(
                "bitmask must be a writeable 2-D numpy array of dtype int32 with shape (batch, {words}); got {}",
                describe_array(&bitmask)
            ))
        })?;
        let shape = array.shape().to_vec();
        if shape[1] != words {
            return Err(PyValueError::new_err(format!(
                "bitmask has {} words per row; this guide needs ceil(vocab_size/32) = {words}",
                shape[1]
            )));
        }
        if index < 0 || index as usize >= shape[0] {
            return Err(PyValueError::new_err(format!("index {index} is out of range for a batch of {}", shape[0])));
        }
        if !array.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "bitmask must be C-contiguous (row-major); use np.ascontiguousarray or allocate_token_bitmask",
            ));
        }
        let slice = array.as_slice_mut().map_err(|_| PyValueError::new_err("bitmask must be C-contiguous"))?;
        let row = &mut slice[index as usize * words..(index as usize + 1) * words];
        // SAFETY: i32 and u32 have the same size and alignment; any bit pattern is valid for both.
        let row: &mut [u32] = unsafe { std::slice::from_raw_parts_mut(row.as_mut_ptr().cast::<u32>(), row.len()) };
        self.inner.write_mask(row);
        Ok(())
    }
}

fn describe_array(obj: &Bound<'_, PyAny>) -> String {
    let get = |a: &str| obj.getattr(a).and_then(|v| v.str().map(|s| s.to_string())).unwrap_or_else(|_| "?".into());
    match obj.getattr("dtype") {
        Ok(_) => format!("dtype {}, shape {}", get("dtype"), get("shape")),
        Err(_) => format!("an object of type {}", obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()),
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("PropertokError", m.py().get_type::<PropertokError>())?;
    m.add("LimitExceeded", m.py().get_type::<LimitExceeded>())?;
    m.add_class::<PyVocabulary>()?;
    m.add_class::<PyByteDfa>()?;
    m.add_class::<PyCompiler>()?;
    m.add_class::<PyGuide>()?;
    m.add_class::<PyMatcher>()?;
    m.add_function(wrap_pyfunction!(_release_freed_memory, m)?)?;
    Ok(())
}
