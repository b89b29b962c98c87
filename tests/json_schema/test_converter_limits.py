"""The JSON Schema converter's own limits, on the JSONSchemaBench schemas that once exhausted
memory or Python's stack (``propertok.json_schema``: ``MAX_BRANCHES``, ``MAX_REGEX_CHARS``, the
recursion limit). Each must now fail fast with an ``UnsupportedSchemaError`` naming the limit.

Every conversion runs in a subprocess under a 2 GiB address-space limit and a timeout, so that a
regression (a conversion that blows up again) fails the test instead of exhausting the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from oracle import data_dir, require_shared

require_shared("JSONSchemaBench schemas")

ADDRESS_SPACE = 2 << 30
TIMEOUT_S = 60

# Runs one conversion, prints {"ok": bool, "error": class name, "message": str, "seconds": float}.
_CHILD = r"""
import json, resource, sys, time, warnings
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from propertok.json_schema import schema_to_regex, schema_to_rules
schema = json.load(sys.stdin)
fn = {"rules": schema_to_rules, "regex": schema_to_regex}[sys.argv[2]]
start = time.perf_counter()
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn(schema)
    out = {"ok": True}
except BaseException as e:
    out = {"ok": False, "error": type(e).__name__, "message": str(e), "limit": getattr(e, "limit", None)}
out["seconds"] = time.perf_counter() - start
print(json.dumps(out))
"""


def schemas(*ids: str) -> dict:
    wanted, found = set(ids), {}
    with open(data_dir() / "jsonschemabench_schemas.jsonl", encoding="utf-8") as f:
        for line in f:
            if any(f'"{i}"' in line[:300] for i in wanted):
                row = json.loads(line)
                if row["id"] in wanted:
                    found[row["id"]] = row["schema"]
    assert set(found) == wanted, wanted - set(found)
    return found


def convert(schema, mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(ADDRESS_SPACE), mode], input=json.dumps(schema),
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_refused(result: dict, limit: str, *words: str) -> None:
    assert not result["ok"], result
    assert result["error"] == "UnsupportedSchemaError" and result["limit"] == limit, result
    for word in words:
        assert word in result["message"], result
    assert result["seconds"] < 30, result  # seconds at most (a loaded machine: more)


@pytest.mark.parametrize("mode", ["rules", "regex"])
@pytest.mark.parametrize("schema_id, pointer", [
    # allOf of 125 if/then: each an anyOf of two, multiplied by the merge (2^125 before)
    ("JsonSchemaStore/cloudify", "#/definitions/nodeTemplate/allOf/"),
    # allOf of 20-odd if/then, the same product
    ("JsonSchemaStore/jfrog-pipelines", "#/definitions/Resource/allOf/"),
])
def test_all_of_product_is_bounded(schema_id, pointer, mode):
    result = convert(schemas(schema_id)[schema_id], mode)
    assert_refused(result, "MAX_BRANCHES", "MAX_BRANCHES = 4,096", "'anyOf' at " + pointer)


@pytest.mark.parametrize("mode", ["rules", "regex"])
def test_one_of_exclusion_is_bounded(mode):
    """oneOf of 7 branches of ~20 properties: each branch excludes the 6 others, each exclusion
    a union of ~20 negated keywords (20^6 before)."""
    result = convert(schemas("JsonSchemaStore/task")["JsonSchemaStore/task"], mode)
    assert_refused(result, "MAX_BRANCHES", "MAX_BRANCHES = 4,096", "#/oneOf/")


def test_wide_object_regex_is_bounded():
    """A root object of ~600 large properties: its regex passes MAX_REGEX_CHARS, and is refused
    before it is written (every suffix of the entries was held at once before: out of memory)."""
    result = convert(schemas("Kubernetes/kb_1161_Normalized")["Kubernetes/kb_1161_Normalized"], "rules")
    assert_refused(result, "MAX_REGEX_CHARS", "MAX_REGEX_CHARS = 8,000,000")


@pytest.mark.parametrize("schema_id", ["Github_easy/o17683", "Github_medium/o17127", "Github_ultra/o69206"])
def test_endless_merged_recursion_is_an_unsupported_schema(schema_id):
    """A recursive $ref merged with other keywords (allOf / a oneOf branch beside them) expands
    without end in rules mode: Python's recursion limit, reported with the pointer reached."""
    result = convert(schemas(schema_id)[schema_id], "rules")
    assert_refused(result, "recursion", "nests too deeply", "recursion limit", "#/")


def test_recursion_error_in_process_names_the_nesting():
    """The same in this process: the error is the converter's, not a RecursionError."""
    from propertok.json_schema import UnsupportedSchemaError, schema_to_rules

    schema = schemas("Github_easy/o17683")["Github_easy/o17683"]
    with pytest.raises(UnsupportedSchemaError, match="nests too deeply") as e:
        schema_to_rules(schema)
    assert e.value.pointer.startswith("#/definitions/Foo/properties/childFoos")
    assert e.value.limit == "recursion"


def test_branch_limit_on_a_small_schema():
    """An allOf of anyOf pairs multiplies them: 2^6 convert, 2^13 are refused, naming the limit
    and where."""
    from propertok import json_schema as js

    pairs = [{"anyOf": [{"maxLength": 99 - i}, {"minLength": i}]} for i in range(13)]
    assert js.MAX_BRANCHES == 4096 and js.MAX_REGEX_CHARS == 8_000_000
    assert js.schema_to_regex({"type": "string", "allOf": pairs[:6]})  # 64 alternatives
    with pytest.raises(js.UnsupportedSchemaError, match="MAX_BRANCHES = 4,096") as e:
        js.schema_to_regex({"type": "string", "allOf": pairs})
    assert e.value.keyword == "anyOf" and e.value.pointer == "#/allOf/12" and e.value.limit == "MAX_BRANCHES"


def test_time_limit_names_itself_and_where(monkeypatch):
    """Past ``MAX_CONVERT_SECONDS`` a conversion stops at the next subschema it expands
    (Github_medium/o35868 took 28-53 s, now 10 s). With the limit at 0 any schema the Python
    converter expands is refused at its root; the default converts what it always did."""
    from propertok import json_schema as js

    schema = {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 3}}}  # Python converts it
    assert js.MAX_CONVERT_SECONDS == 10.0
    assert js.schema_to_regex(schema, whitespace="")
    monkeypatch.setattr(js, "MAX_CONVERT_SECONDS", 0.0)
    with pytest.raises(js.UnsupportedSchemaError, match=r"MAX_CONVERT_SECONDS = 0 s") as e:
        js.schema_to_regex(schema, whitespace="")
    assert e.value.pointer == "#" and e.value.limit == "MAX_CONVERT_SECONDS"
