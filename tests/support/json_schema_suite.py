"""The official JSON Schema Test Suite run against ``propertok.json_schema``.

The suite (``<shared>/data/json-schema-test-suite``, draft 2020-12 and draft 7, MIT) is a list of
groups: a schema and instances labelled valid or invalid. For each group this module converts the
schema (``whitespace=""``: compact JSON) and compiles a ``ByteDfa``; the group is *unsupported*
when the converter refuses it (an ``InvalidSchemaError`` saying that no value satisfies the
schema counts as the empty language, which matches nothing). For a supported group:

* no spelling of an invalid instance may match (*invalid accepted*: a soundness bug). The
  spellings are those a guide could generate for the same value: every key order (up to 24 per
  object), non-ASCII characters raw or ``\\u``-escaped, every character ``\\u``-escaped and ``/``
  as ``\\/``, integral numbers as ``1``, ``1.0`` and ``1e0``;
* a valid instance none of whose spellings matches is *valid rejected* (a documented generator
  choice such as no extra properties, or a missing feature: never a soundness issue). Each is
  classified by ``jsonschema_support.rejection_reason``: a documented choice (undeclared
  properties, types an untyped schema does not imply, format and number spellings not
  generated, nesting depth of free values) if the instance shows one, else "other";
* strings sampled from the DFA must validate under ``jsonschema`` (the suite's instances are
  few; the samples look for unsound acceptances they do not cover).

The suite's ``remotes/`` documents (vendored in ``tests/json_schema/remotes``, MIT, from the
same commit as the suite) are passed to the converter as ``resources``, each under
``http://localhost:1234/`` + its path, as the suite's README says; the same documents are given
to ``jsonschema`` for the samples.

``python tests/support/json_schema_suite.py`` prints the table for the three modes;
``--update`` rewrites the expected files of ``tests/json_schema/`` (default mode).
Nothing here imports propertok at module level: ``run`` takes the module objects it needs.
"""

from __future__ import annotations

import functools
import itertools
import json
import sys
import warnings
from pathlib import Path
from typing import Any, Dict, Iterator, List

from oracle import data_dir

DRAFTS = ("draft2020-12", "draft7")
MODES = {"strict": {"strict": True}, "default": {}, "lax": {"strict": False}}
EXPECTED_DIR = Path(__file__).resolve().parents[1] / "json_schema"
EXPECTED_UNSUPPORTED = EXPECTED_DIR / "expected_unsupported.json"
EXPECTED_INCOMPLETE = EXPECTED_DIR / "expected_incomplete.json"
REMOTES_DIR = EXPECTED_DIR / "remotes"
REMOTES_URI = "http://localhost:1234/"
SAMPLES = 8
MAX_ORDERS = 24


def suite_dir() -> Path:
    return data_dir() / "json-schema-test-suite"


@functools.lru_cache(maxsize=None)
def remotes() -> Dict[str, Any]:
    """The suite's remote documents, ``{"http://localhost:1234/<path>": schema}``."""
    return {REMOTES_URI + path.relative_to(REMOTES_DIR).as_posix(): json.loads(path.read_text(encoding="utf-8"))
            for path in sorted(REMOTES_DIR.rglob("*.json"))}


def groups() -> Iterator[tuple]:
    """``(group id, draft, group)`` for every group; the id is ``draft/file/index``."""
    for draft in DRAFTS:
        root = suite_dir() / draft
        files = sorted(root.glob("*.json")) + sorted((root / "optional" / "format").glob("*.json"))
        for path in files:
            name = path.relative_to(root).as_posix()
            for i, group in enumerate(json.loads(path.read_text(encoding="utf-8"))):
                yield f"{draft}/{name}/{i}", draft, group


# ---------------------------------------------------------------------------------------------
# Spellings of one value
# ---------------------------------------------------------------------------------------------


def _orders(value: Any, k: int) -> Any:
    """``value`` with the keys of every object in their ``k``-th order (cycling)."""
    if isinstance(value, dict):
        keys = list(value)
        perms = list(itertools.islice(itertools.permutations(keys), MAX_ORDERS))
        keys = list(perms[k % len(perms)]) if perms else keys
        return {key: _orders(value[key], k) for key in keys}
    if isinstance(value, list):
        return [_orders(v, k) for v in value]
    return value


def _n_orders(value: Any) -> int:
    if isinstance(value, dict):
        n = 1
        for i in range(2, len(value) + 1):
            n = min(n * i, MAX_ORDERS)
        return max([n] + [_n_orders(v) for v in value.values()])
    if isinstance(value, list):
        return max([1] + [_n_orders(v) for v in value])
    return 1


def _escape_all(text: str) -> str:
    out = []
    for c in text:
        cp = ord(c)
        if cp > 0xFFFF:
            cp -= 0x10000
            out.append("\\u%04x\\u%04x" % (0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)))
        else:
            out.append("\\u%04X" % cp)
    return '"' + "".join(out) + '"'


def _write(value: Any, strings: str, numbers: str) -> str:
    """Compact JSON text; ``strings``: raw | ascii | escaped; ``numbers``: plain | point | exp."""
    if isinstance(value, dict):
        return "{" + ",".join(_write(k, strings, numbers) + ":" + _write(v, strings, numbers)
                              for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_write(v, strings, numbers) for v in value) + "]"
    if isinstance(value, str):
        if strings == "escaped":
            return _escape_all(value)
        text = json.dumps(value, ensure_ascii=strings == "ascii")
        return text.replace("/", "\\/") if strings == "ascii" else text
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float) and not value.is_integer():
        return repr(value)
    n = int(value)
    return {"plain": str(n), "point": f"{n}.0", "exp": f"{n}e0"}[numbers]


def spellings(value: Any) -> List[str]:
    """The JSON texts a compact guide could generate for ``value`` (deduplicated)."""
    out: Dict[str, None] = {}
    for k in range(_n_orders(value)):
        ordered = _orders(value, k)
        for strings in ("raw", "ascii", "escaped"):
            for numbers in ("plain", "point", "exp"):
                out[_write(ordered, strings, numbers)] = None
    return list(out)


# ---------------------------------------------------------------------------------------------
# Running the suite
# ---------------------------------------------------------------------------------------------


def draft_validator(schema: Any, draft: str):
    """A ``jsonschema`` validator of the group's draft, formats asserted, exact ``multipleOf``."""
    import jsonschema
    import referencing
    import referencing.jsonschema
    from jsonschema_support import _multiple_of

    base = jsonschema.Draft202012Validator if draft == "draft2020-12" else jsonschema.Draft7Validator
    spec = referencing.jsonschema.DRAFT202012 if draft == "draft2020-12" else referencing.jsonschema.DRAFT7
    registry = referencing.Registry().with_resources(
        (uri, referencing.Resource.from_contents(doc, default_specification=spec)) for uri, doc in remotes().items())
    cls = jsonschema.validators.extend(base, {"multipleOf": _multiple_of})
    return cls(schema, format_checker=cls.FORMAT_CHECKER, registry=registry)


def run_group(js, pt, draft: str, group: dict, options: dict, samples: int = SAMPLES, rules: bool = False) -> dict:
    """The result of one group: ``{"unsupported": "keyword: reason"}`` or
    ``{"invalid_accepted": [...], "valid_rejected": [...], "bad_samples": [...]}``. With
    ``rules``: the converter's rules mode (``schema_to_rules``, recursion unbounded) matched by a
    ``RuleAutomaton``; nothing is sampled."""
    schema = group["schema"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if rules:
                regex = js.schema_to_rules(schema, whitespace="", resources=remotes(), **options)
            else:
                regex = js.schema_to_regex(schema, whitespace="", resources=remotes(), **options)
        except js.InvalidSchemaError as e:
            if "no JSON value satisfies" not in e.reason:
                return {"unsupported": f"{e.keyword}: {e.reason}"}
            regex = None  # the converter proved the language empty: nothing matches
        except js.UnsupportedSchemaError as e:
            return {"unsupported": f"{e.keyword}: {e.reason}"}
    try:
        dfa = None if regex is None else pt.RuleAutomaton(regex) if rules else pt.ByteDfa(regex)
    except Exception as e:  # noqa: BLE001 - any compile failure is "unsupported", visibly
        return {"unsupported": f"ByteDfa: {e}"}
    if rules:
        samples = 0
    from jsonschema_support import rejection_reason

    out: Dict[str, list] = {"invalid_accepted": [], "valid_rejected": [], "bad_samples": [], "reasons": []}
    for test in group["tests"]:
        matched = [s for s in spellings(test["data"]) if dfa is not None and dfa.matches(s.encode())]
        if test["valid"] and not matched:
            out["valid_rejected"].append(test["description"])
            mode = "lax" if options.get("strict") is False else "default"
            out["reasons"].append(rejection_reason(schema, test["data"], lambda s: draft_validator(s, draft), mode))
        elif not test["valid"] and matched:
            out["invalid_accepted"].append(f"{test['description']}: {matched[0]}")
    if samples and dfa is not None:
        from jsonschema_support import load_instance

        v = draft_validator(schema, draft)
        for s in dfa.sample(samples, 1, max_len=200):
            try:
                ok = v.is_valid(load_instance(s))
            except ValueError:  # not JSON at all
                ok = False
            if not ok:
                out["bad_samples"].append(s.decode("utf-8", "replace"))
    return out


def run(js, pt, mode: str = "default", samples: int = SAMPLES, rules: bool = False) -> Dict[str, dict]:
    return {gid: run_group(js, pt, draft, group, MODES[mode], samples, rules)
            for gid, draft, group in groups()}


def summary(results: Dict[str, dict]) -> dict:
    supported = [r for r in results.values() if "unsupported" not in r]
    return {
        "groups": len(results),
        "supported": len(supported),
        "invalid_accepted": sum(len(r["invalid_accepted"]) for r in supported),
        "valid_rejected": sum(len(r["valid_rejected"]) for r in supported),
        "valid_rejected_other": sum(r["reasons"].count("other") for r in supported),
        "bad_samples": sum(len(r["bad_samples"]) for r in supported),
    }


def expected_files(results: Dict[str, dict]) -> tuple:
    """(unsupported: {group id: keyword}, incomplete: {group id: [valid test descriptions]})."""
    unsupported = {gid: r["unsupported"].split(":", 1)[0] for gid, r in results.items() if "unsupported" in r}
    incomplete = {gid: r["valid_rejected"] for gid, r in results.items()
                  if "unsupported" not in r and r["valid_rejected"]}
    return unsupported, incomplete


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def main(argv: List[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    import propertok as pt
    from propertok import json_schema as js

    modes = ["default"] if "--update" in argv else list(MODES)
    for mode in modes:
        results = run(js, pt, mode)
        print(mode, summary(results))
        if "-v" in argv:
            for gid, r in results.items():
                if r.get("invalid_accepted") or r.get("bad_samples"):
                    print("  ", gid, r)
        if "--reasons" in argv:  # the valid instances rejected, by reason
            by_reason: Dict[str, List[str]] = {}
            for gid, r in results.items():
                for description, reason in zip(r.get("valid_rejected", []), r.get("reasons", [])):
                    by_reason.setdefault(reason, []).append(f"{gid}: {description}")
            for reason, items in sorted(by_reason.items()):
                print(f"   {reason}: {len(items)}")
                if reason == "other":
                    for item in items:
                        print("     ", item)
        if "--update" in argv:
            unsupported, incomplete = expected_files(results)
            EXPECTED_UNSUPPORTED.write_text(dump(unsupported), encoding="utf-8")
            EXPECTED_INCOMPLETE.write_text(dump(incomplete), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
