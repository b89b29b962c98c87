//! `propertok._core.Vocabulary`.

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::{to_py, token_id};
use crate::tokenizer::vocab::Vocabulary;

#[pyclass(name = "Vocabulary", module = "propertok._core", frozen)]
pub(crate) struct PyVocabulary {
    pub(crate) inner: Arc<Vocabulary>,
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

    /// From a loaded tokenizer, by duck typing (neither `tokenizers` nor `transformers` is
    /// imported): a `tokenizers.Tokenizer` (anything with `to_str()`), or a transformers fast
    /// tokenizer (its `backend_tokenizer`), whose EOS ids are the default.
    #[staticmethod]
    #[pyo3(signature = (tokenizer, eos_token_ids=None, vocab_size=None))]
    fn from_tokenizer(
        py: Python<'_>,
        tokenizer: Bound<'_, PyAny>,
        eos_token_ids: Option<Vec<i64>>,
        vocab_size: Option<usize>,
    ) -> PyResult<Self> {
        let found = describe_tokenizer(&tokenizer)?;
        let vocab = Self::from_json(py, found.text, eos_token_ids.or(found.default_eos), vocab_size)?;
        match found.num_tokens {
            Some(n) if n != vocab.inner.num_tokens() => Err(PyValueError::new_err(format!(
                "the tokenizer object has {n} token ids but its file defines {}: a Tekkenizer built with a \
                 non-default vocab_size is not supported",
                vocab.inner.num_tokens()
            ))),
            _ => Ok(vocab),
        }
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
    /// `Split(pattern, Isolated)` stages (with non-special added tokens, the first is the
    /// alternation of their contents, whose matches the later stages never see), the stages after
    /// `ByteLevel` over the byte-mapped text (Falcon), its normalizer
    /// ("none", "NFC", "NFKC") and `ignore_merges`; `None` otherwise.
    #[getter]
    fn pre_tokenizer<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(p) = self.inner.pre_tokenizer() else { return Ok(None) };
        let d = PyDict::new(py);
        d.set_item("stages", p.stages.clone())?;
        d.set_item("byte_mapped_stages", p.byte_mapped_stages.clone())?;
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
    /// The text a token sequence stands for (see the stub).
    fn decode<'py>(&self, py: Python<'py>, token_ids: Vec<i64>) -> PyResult<Bound<'py, PyBytes>> {
        let ids = token_ids
            .iter()
            .map(|&t| u32::try_from(t).ok().filter(|&id| (id as usize) < self.inner.vocab_size()))
            .collect::<Option<Vec<u32>>>()
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "a token id is out of range (vocab_size is {}): {token_ids:?}",
                    self.inner.vocab_size()
                ))
            })?;
        Ok(PyBytes::new(py, &self.inner.decode(&ids)))
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

const ACCEPTED: &str = "a tokenizers.Tokenizer, a transformers fast tokenizer (PreTrainedTokenizerFast, e.g. \
     AutoTokenizer.from_pretrained(..., use_fast=True)) or a mistral_common Tekken tokenizer (MistralTokenizer or \
     Tekkenizer); for a tokenizer.json or tekken.json file use Vocabulary.from_file(path)";

/// What a loaded tokenizer object says about itself.
struct FoundTokenizer {
    /// A `tokenizer.json` document or a Tekken file.
    text: String,
    default_eos: Option<Vec<i64>>,
    /// The number of token ids, when the object says.
    num_tokens: Option<usize>,
}

/// The file behind a loaded tokenizer; `TypeError` naming what is accepted for anything else,
/// slow tokenizers included (they have no `tokenizer.json`).
fn describe_tokenizer(tok: &Bound<'_, PyAny>) -> PyResult<FoundTokenizer> {
    let to_str = |obj: &Bound<'_, PyAny>| -> PyResult<Option<String>> {
        match obj.getattr("to_str") {
            Ok(f) if f.is_callable() => Ok(Some(f.call0()?.extract()?)),
            _ => Ok(None),
        }
    };
    if let Ok(backend) = tok.getattr("backend_tokenizer") {
        if let Some(json) = to_str(&backend)? {
            return Ok(FoundTokenizer { text: json, default_eos: transformers_eos_ids(tok), num_tokens: None });
        }
    }
    if let Some(json) = to_str(tok)? {
        return Ok(FoundTokenizer { text: json, default_eos: None, num_tokens: None });
    }
    if let Some(found) = mistral_common_tekken(tok)? {
        return Ok(found);
    }
    let name = tok.get_type().name().map(|n| n.to_string()).unwrap_or_default();
    if tok.getattr("is_fast").is_ok_and(|v| v.is(pyo3::types::PyBool::new(tok.py(), false))) {
        return Err(PyTypeError::new_err(format!(
            "{name} is a slow (Python) transformers tokenizer, which has no tokenizer.json; expected {ACCEPTED}"
        )));
    }
    Err(PyTypeError::new_err(format!("cannot build a Vocabulary from {name}: expected {ACCEPTED}")))
}

/// A `mistral_common` tokenizer (a type of its modules), by duck typing: a `MistralTokenizer`
/// (its `instruct_tokenizer.tokenizer`) or a `Tekkenizer`, whose `file_path` is read; its
/// `eos_id` is the default EOS. `None` when `tok` is neither; `TypeError` for its SentencePiece
/// tokenizers.
fn mistral_common_tekken(tok: &Bound<'_, PyAny>) -> PyResult<Option<FoundTokenizer>> {
    let inner = match tok.getattr("instruct_tokenizer").and_then(|i| i.getattr("tokenizer")) {
        Ok(inner) => inner,
        Err(_) => tok.clone(),
    };
    let ty = inner.get_type();
    let module = ty.module().map(|m| m.to_string()).unwrap_or_default();
    let name = ty.name().map(|n| n.to_string()).unwrap_or_default();
    let path = match inner.getattr("file_path").and_then(|p| p.extract::<std::path::PathBuf>()) {
        Ok(path) if module.starts_with("mistral_common") => path,
        _ => return Ok(None),
    };
    if name != "Tekkenizer" {
        return Err(PyTypeError::new_err(format!(
            "{name} is a mistral_common tokenizer that is not Tekken; load the model's tokenizer.json with \
             Vocabulary.from_file(path)"
        )));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| {
        pyo3::exceptions::PyOSError::new_err(format!("cannot read the Tekken file {}: {e}", path.display()))
    })?;
    let eos = inner.getattr("eos_id").and_then(|e| e.extract::<i64>()).ok().map(|e| vec![e]);
    let num_tokens = inner.getattr("n_words").and_then(|n| n.extract::<usize>()).ok();
    Ok(Some(FoundTokenizer { text, default_eos: eos, num_tokens }))
}

/// The EOS id(s) of a transformers tokenizer plus, when it was loaded from a local folder, the
/// stop ids of its `generation_config.json` (chat models stop on several ids, e.g. Llama 3's
/// `<|eot_id|>`). Never touches the network; anything unreadable is ignored.
fn transformers_eos_ids(tok: &Bound<'_, PyAny>) -> Option<Vec<i64>> {
    let mut ids: Vec<i64> = Vec::new();
    let mut add = |v: &serde_json::Value| {
        let values = v.as_array().cloned().unwrap_or_else(|| vec![v.clone()]);
        for id in values.iter().filter_map(serde_json::Value::as_i64).filter(|&i| i >= 0) {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    };
    if let Ok(eos) = tok.getattr("eos_token_id") {
        let value = if let Ok(list) = eos.extract::<Vec<i64>>() {
            serde_json::json!(list)
        } else if eos.is_instance_of::<pyo3::types::PyBool>() {
            serde_json::Value::Null
        } else {
            eos.extract::<i64>().map_or(serde_json::Value::Null, |i| serde_json::json!(i))
        };
        add(&value);
    }
    let folder = tok.getattr("name_or_path").ok().and_then(|p| p.extract::<std::path::PathBuf>().ok());
    if let Some(folder) = folder.filter(|f| f.is_dir()) {
        let config = std::fs::read_to_string(folder.join("generation_config.json")).ok();
        if let Some(config) = config.and_then(|c| serde_json::from_str::<serde_json::Value>(&c).ok()) {
            if let Some(eos) = config.get("eos_token_id") {
                add(eos);
            }
        }
    }
    (!ids.is_empty()).then_some(ids)
}
