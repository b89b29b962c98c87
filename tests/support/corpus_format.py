"""The in-repository test corpus (``tests/corpus/*.toml``): reading it, and writing it from a case
list (``tests/corpus/generate.py``). The format is described in ``tests/corpus/README.md``.

Every id in the corpus comes from the real tokenizer (``oracle.Oracle``, the ``tokenizers``
package); refused sequences are other spellings of accepted strings, made by splitting one token
into two vocabulary tokens, and checked non-canonical by the same oracle.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from oracle import REPO_ROOT, Oracle
from synthetic import MergeTableBPE

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.9 / 3.10
    import tomli as tomllib

CORPUS_DIR = REPO_ROOT / "tests" / "corpus"
EMBEDDED_MISTRAL = REPO_ROOT / "python" / "propertok" / "data" / "mistral7b-tokenizer.json"

# Synthetic merge tables: ids are the alphabet's letters in order, then each merge result (first
# creation, in rank order), then `</s>` (synthetic.MergeTableBPE; the Rust twin builds the same).
SYNTHETIC_TABLES = {
    "well-ordered": {"alphabet": "ab", "merges": [["a", "b"], ["a", "a"], ["b", "b"], ["ab", "ab"], ["a", "ab"]]},
    # ("b", "cd") ranks before ("c", "d"), which makes "cd": priority BPE then differs from
    # sequential passes, so `direct` materialises the product instead of running DirectMerge.
    "not well-ordered": {"alphabet": "abcd", "merges": [["b", "cd"], ["a", "b"], ["c", "d"], ["a", "bcd"]]},
}

# Error kinds, as the Rust core names them (`Error` variants), with what Python raises.
ERROR_KINDS = {"empty_language", "invalid_regex", "unsupported_regex"}
METHODS = ("agnostic", "cartesian", "direct", "auto")


@dataclass
class Accept:
    text: str
    ids: list[int]


@dataclass
class Refuse:
    ids: list[int]
    why: str
    # Whether the ids decode to a string of the language (another spelling of an accepted string,
    # which `agnostic` accepts), or to a string outside it (which every method refuses).
    in_language: bool


@dataclass
class Case:
    file: str
    name: str
    regex: str
    accept: list[Accept] = field(default_factory=list)
    refuse: list[Refuse] = field(default_factory=list)
    error: Optional[str] = None
    # method -> why it is skipped for this case
    skip: dict[str, str] = field(default_factory=dict)
    # method -> the limit it stops at with the default limits (LimitExceeded naming it)
    limit: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.file}:{self.name}"


@dataclass
class CorpusFile:
    path: Path
    tokenizer_name: str
    tokenizer_spec: dict
    cases: list[Case]

    def tokenizer_json(self) -> str:
        spec = self.tokenizer_spec
        if "file" in spec:
            return (REPO_ROOT / spec["file"]).read_text(encoding="utf-8")
        return MergeTableBPE(spec["alphabet"], [tuple(m) for m in spec["merges"]]).to_json()


def load_corpus() -> list[CorpusFile]:
    files = []
    for path in sorted(CORPUS_DIR.glob("*.toml")):
        with open(path, "rb") as f:
            doc = tomllib.load(f)
        spec = doc["tokenizer"]
        cases = []
        for c in doc.get("case", []):
            case = Case(
                file=path.stem,
                name=c["name"],
                regex=c["regex"],
                accept=[Accept(a["text"], list(a["ids"])) for a in c.get("accept", [])],
                refuse=[Refuse(list(r["ids"]), r["why"], bool(r["in_language"])) for r in c.get("refuse", [])],
                error=c.get("error"),
                skip=dict(c.get("skip", {})),
                limit=dict(c.get("limit", {})),
            )
            if case.error is not None and case.error not in ERROR_KINDS:
                raise ValueError(f"{path.name}: case {case.name!r}: unknown error kind {case.error!r}")
            for what, methods in (("skip", case.skip), ("limit", case.limit)):
                if set(methods) - set(METHODS):
                    raise ValueError(f"{path.name}: case {case.name!r}: unknown method in {what} {methods}")
            cases.append(case)
        files.append(CorpusFile(path, spec["name"], spec, cases))
    return files


# ------------------------------------------------------------------------------------------------
# Writing (tests/corpus/generate.py)
# ------------------------------------------------------------------------------------------------


def oracle_tokenizer(spec: Union[str, dict]) -> Oracle:
    """The oracle for a tokenizer.json path or a synthetic table spec."""
    if isinstance(spec, str):
        return Oracle.from_file(spec)
    return Oracle(MergeTableBPE(spec["alphabet"], [tuple(m) for m in spec["merges"]]).to_json(), name="synthetic")


def other_spellings(oracle: Oracle, ids: list[int], limit: int = 2) -> list[tuple[list[int], str]]:
    """Up to ``limit`` non-canonical spellings of the same text: one token split into two
    vocabulary tokens (the first split found, scanning tokens left to right)."""
    by_bytes: dict[bytes, int] = {}
    for t in range(oracle.num_tokens):
        if oracle.has_token(t) and t not in oracle.special_ids:
            by_bytes.setdefault(oracle.token_bytes(t), t)
    out = []
    for i, t in enumerate(ids):
        text = oracle.token_bytes(t)
        for cut in range(1, len(text)):
            left, right = by_bytes.get(text[:cut]), by_bytes.get(text[cut:])
            if left is None or right is None:
                continue
            seq = ids[:i] + [left, right] + ids[i + 1 :]
            if oracle.is_canonical(seq):
                continue
            out.append((seq, f"token {i} ({text.decode('utf-8', 'replace')!r}) split at byte {cut}"))
            break
        if len(out) >= limit:
            break
    return out


def _check_membership(regex: str, s: str, expected: bool) -> None:
    """A sanity check of the case list with Python's `re`, where it reads the regex the same way
    (regexes it cannot compile, such as `\\p{Greek}`, are left to the reviewer)."""
    try:
        pattern = re.compile(regex)
    except re.error:
        return
    if (pattern.fullmatch(s) is not None) != expected:
        raise ValueError(f"{regex!r} {'should' if expected else 'should not'} match {s!r}")


def _toml_string(s: str) -> str:
    """A TOML basic string (JSON's escapes are valid TOML escapes for these characters)."""
    return json.dumps(s, ensure_ascii=False)


def _toml_regex(s: str) -> str:
    """A literal string when possible, so regexes read as written."""
    if "'" not in s and "\n" not in s and all(ord(c) >= 0x20 for c in s):
        return f"'{s}'"
    return _toml_string(s)


def render_file(name: str, description: str, oracle: Oracle, cases: list, errors: list) -> str:
    """TOML text for one corpus file: `cases` are (name, regex, in-language strings, others[,
    options such as `limit`]), `errors` (name, regex, error kind)."""
    lines = [
        "# Generated by tests/corpus/generate.py from the real tokenizer; see README.md here.",
        f"# {description}",
        "",
        "[tokenizer]",
        f"name = {_toml_string(name)}",
    ]
    if name == "mistral7b":
        lines.append('file = "python/propertok/data/mistral7b-tokenizer.json"')
    else:
        spec = SYNTHETIC_TABLES[name.split(":", 1)[1]]
        lines.append(f"alphabet = {_toml_string(spec['alphabet'])}")
        lines.append(f"merges = {json.dumps(spec['merges'])}")
    for case_name, regex, inside, outside, *options in cases:
        lines += ["", "[[case]]", f"name = {_toml_string(case_name)}", f"regex = {_toml_regex(regex)}"]
        for key, value in (options[0] if options else {}).items():
            table = ", ".join(f"{m} = {_toml_string(v)}" for m, v in value.items())
            lines.append(f"{key} = {{ {table} }}")
        lines.append("accept = [")
        refusals = []
        for s in inside:
            ids = oracle.canonical(s)
            if oracle.decode(ids) != s.encode("utf-8"):
                raise ValueError(f"{case_name}: {s!r} is not representable")
            _check_membership(regex, s, True)
            lines.append(f"  {{ text = {_toml_string(s)}, ids = {json.dumps(ids)} }},")
            refusals += [(seq, f"other spelling of {s!r}: {why}", True) for seq, why in other_spellings(oracle, ids)]
        for s in outside:
            ids = oracle.canonical(s)
            if oracle.decode(ids) != s.encode("utf-8") or not ids:
                raise ValueError(f"{case_name}: {s!r} is not representable, or empty")
            _check_membership(regex, s, False)
            refusals.append((ids, f"canonical ids of {s!r}, which is not in the language", False))
        lines.append("]")
        lines.append("refuse = [")
        for seq, why, in_language in refusals:
            flag = "true" if in_language else "false"
            lines.append(f"  {{ ids = {json.dumps(seq)}, in_language = {flag}, why = {_toml_string(why)} }},")
        lines.append("]")
    for case_name, regex, kind in errors:
        lines += ["", "[[case]]", f"name = {_toml_string(case_name)}", f"regex = {_toml_regex(regex)}"]
        lines.append(f"error = {_toml_string(kind)}")
    return "\n".join(lines) + "\n"
