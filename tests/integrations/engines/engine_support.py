"""What the engine tests share: the tiny model, the requests, and the checks.

The model is a random-weight Llama built here with transformers (nothing downloaded), saved with
the Mistral-7B tokenizer embedded in propertok. Every constrained output is checked twice: it
matches its constraint (regex full match, or a JSON instance of the schema), and it is canonical
(the oracle's tokenization of its text is exactly the ids the engine returned).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO / "tests" / "support"))

from oracle import EMBEDDED_MISTRAL, Oracle  # noqa: E402

ENGINE_TESTS_ENV = "PROPERTOK_ENGINE_TESTS"

SCHEMA_ITEM = {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 999},
                                                "ok": {"type": "boolean"}}, "required": ["id", "ok"]}
SCHEMA_PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 6}, "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]},
                                                         "maxItems": 3}},
    "required": ["name"]}

# (name, kind, spec): each constraint is used by several concurrent requests
CONSTRAINTS = [
    ("answer", "regex", r"(yes|no|maybe)( [0-9]{1,3})?"),
    ("time", "regex", r"[0-2][0-9]:[0-5][0-9]"),
    ("email", "regex", r"[a-z]{1,8}@[a-z]{1,8}\.(com|org)"),
    ("item", "json", SCHEMA_ITEM),
    ("person", "json", SCHEMA_PERSON),
]
BAD = [
    ("bad-regex", "regex", "(unclosed"),
    ("bad-schema", "json", {"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 1}},
                            "required": ["n"]}),
]


def xargs(kind, spec):
    if kind == "regex":
        return {"propertok_regex": spec}
    return {"propertok_json_schema": json.dumps(spec)}


def build_tiny_llama(folder: Path) -> Path:
    """A 2-layer, hidden-size-64 Llama with random weights and the Mistral-7B tokenizer."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=32000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                                      bos_token_id=1, eos_token_id=2)
    model = transformers.LlamaForCausalLM(config)
    # larger output weights than the default init, so that sampling is not close to uniform
    with torch.no_grad():
        model.lm_head.weight.mul_(50)
    model.save_pretrained(folder)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(EMBEDDED_MISTRAL), bos_token="<s>",
                                               eos_token="</s>", unk_token="<unk>")
    tok.save_pretrained(folder)
    shutil.copy(EMBEDDED_MISTRAL, folder / "tokenizer.json")
    return folder


def entry_point_dir(folder: Path) -> Path:
    """A folder to put on PYTHONPATH that declares propertok's ``vllm.logits_processors`` entry
    point, as an installed wheel does (the tests run from a checkout, not an installation)."""
    dist = folder / "propertok_engine_test-0.0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: propertok-engine-test\nVersion: 0.0\n")
    pyproject = (REPO / "pyproject.toml").read_text()
    target = re.search(r'\[project\.entry-points\."vllm\.logits_processors"\]\s*\n(\w+) = "([^"]+)"', pyproject)
    assert target, "pyproject.toml has no vllm.logits_processors entry point"
    (dist / "entry_points.txt").write_text(f"[vllm.logits_processors]\n{target.group(1)} = {target.group(2)}\n")
    return folder


_ORACLE = None


def oracle() -> Oracle:
    global _ORACLE
    if _ORACLE is None:
        _ORACLE = Oracle.from_file(EMBEDDED_MISTRAL, name="mistral7b")
    return _ORACLE


def check_output(kind, spec, ids, eos=2):
    """(matches, canonical, text) for one output's token ids (a trailing EOS dropped)."""
    import jsonschema

    body = list(ids[:-1]) if ids and ids[-1] == eos else list(ids)
    try:
        text = oracle().decode(body).decode("utf-8")
    except UnicodeDecodeError:
        return False, False, repr(oracle().decode(body))
    if kind == "regex":
        matches = re.fullmatch(spec, text) is not None
    else:
        try:
            matches = jsonschema.Draft202012Validator(spec).is_valid(json.loads(text))
        except ValueError:
            matches = False
    return matches, oracle().is_canonical(body), text


def python_env(extra_paths=()):
    env = dict(os.environ)
    paths = [str(REPO / "python"), str(HERE)] + [str(p) for p in extra_paths]
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    return env
