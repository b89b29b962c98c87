"""The official JSON Schema Test Suite (draft 2020-12 and draft 7) against the default mode.

Run by tests/support/json_schema_suite.py (see there for what counts as a spelling). The
assertions:

* no invalid instance is accepted, in any spelling a guide could generate, in any supported
  group, and every string sampled from a group's DFA validates under ``jsonschema``;
* the unsupported groups are exactly those of ``expected_unsupported.json`` (group id ->
  keyword named in the refusal), and the valid instances rejected are exactly those of
  ``expected_incomplete.json``: a group newly refused, or newly supported, fails until the file
  is updated, so every change of coverage shows in review. To update both files after a
  deliberate change: ``python tests/support/json_schema_suite.py --update``.

Cost: one regex conversion and one ``ByteDfa`` per group (661), no token guides.
"""

from __future__ import annotations

import json

import pytest

from json_schema_suite import EXPECTED_INCOMPLETE, EXPECTED_UNSUPPORTED, expected_files, run, summary
from jsonschema_support import rejection_reason
from oracle import require_shared

require_shared("the JSON Schema Test Suite")

UPDATE = "python tests/support/json_schema_suite.py --update"


@pytest.fixture(scope="module")
def results(pt):
    from propertok import json_schema as js

    return run(js, pt, "default")


def test_no_invalid_instance_is_accepted(results):
    bad = {gid: r["invalid_accepted"] for gid, r in results.items() if r.get("invalid_accepted")}
    assert not bad, json.dumps(bad, indent=1, ensure_ascii=False)[:4000]


def test_every_sampled_instance_is_valid(results):
    bad = {gid: r["bad_samples"] for gid, r in results.items() if r.get("bad_samples")}
    assert not bad, json.dumps(bad, indent=1, ensure_ascii=False)[:4000]


def test_unsupported_groups_are_the_expected_ones(results):
    unsupported, _ = expected_files(results)
    expected = json.loads(EXPECTED_UNSUPPORTED.read_text(encoding="utf-8"))
    newly = {g: k for g, k in unsupported.items() if g not in expected}
    fixed = sorted(g for g in expected if g not in unsupported)
    changed = {g: (expected[g], k) for g, k in unsupported.items() if g in expected and expected[g] != k}
    assert not newly, f"groups newly unsupported: {newly}"
    assert not fixed and not changed, (
        f"groups now supported: {fixed}; refused by another keyword: {changed}; run {UPDATE}")


def test_valid_instances_rejected_are_the_expected_ones(results):
    _, incomplete = expected_files(results)
    expected = json.loads(EXPECTED_INCOMPLETE.read_text(encoding="utf-8"))
    assert incomplete == expected, (
        "valid instances rejected changed: "
        + json.dumps({g: [incomplete.get(g), expected.get(g)] for g in set(incomplete) | set(expected)
                      if incomplete.get(g) != expected.get(g)}, ensure_ascii=False)[:3000]
        + f"; if deliberate, run {UPDATE}")


def test_unbounded_recursion_accepts_no_invalid_instance_and_rejects_no_more(pt, results):
    """The converter's rules mode (``schema_to_rules``: ``$ref`` cycles and free values as calls,
    no recursion bound, what ``compile_json_schema(..., lazy=True)`` compiles): no invalid
    instance accepted, no group refused that the default mode supports, no valid instance
    rejected that the default mode accepts, and fewer rejected in all (recursion deeper than
    ``max_recursion_depth=3`` now passes)."""
    from propertok import json_schema as js

    unbounded = run(js, pt, "default", rules=True)
    bad = {gid: r["invalid_accepted"] for gid, r in unbounded.items() if r.get("invalid_accepted")}
    assert not bad, json.dumps(bad, indent=1, ensure_ascii=False)[:4000]
    refused = {gid: r["unsupported"] for gid, r in unbounded.items()
               if "unsupported" in r and "unsupported" not in results[gid]}
    assert not refused, refused
    worse = {gid: r["valid_rejected"] for gid, r in unbounded.items() if "unsupported" not in r
             and "unsupported" not in results[gid]
             and set(r["valid_rejected"]) - set(results[gid]["valid_rejected"])}
    assert not worse, worse
    before, after = summary(results), summary(unbounded)
    assert after["supported"] >= before["supported"] and after["valid_rejected"] < before["valid_rejected"], (
        before, after)


def test_default_mode_supports_most_groups(results):
    unsupported, _ = expected_files(results)
    assert len(results) == 661 and len(results) - len(unsupported) >= 614


# llguidance 1.9.1's valid instances rejected on the same suite (issue 15's target).
MAX_OTHER_REJECTIONS = 44


def test_valid_instances_rejected_are_mostly_documented_choices(results):
    """Rejected valid instances that no documented generator choice explains stay few."""
    other = {gid: [d for d, why in zip(r["valid_rejected"], r["reasons"]) if why == "other"]
             for gid, r in results.items() if "unsupported" not in r}
    other = {gid: ds for gid, ds in other.items() if ds}
    assert summary(results)["valid_rejected_other"] == sum(map(len, other.values()))
    assert sum(map(len, other.values())) <= MAX_OTHER_REJECTIONS, json.dumps(other, indent=1)[:3000]


@pytest.mark.parametrize("schema, instance, reason", [
    ({"properties": {"a": {}}}, {"b": 1}, "undeclared properties, unanchored pattern, counts"),
    ({"pattern": "a"}, "bab", "undeclared properties, unanchored pattern, counts"),
    ({"minimum": 1}, "x", "types not implied"),
    ({"format": "idn-email"}, "a@b", "types not implied"),  # an unknown format generates no strings
    ({"format": "date-time"}, "2020-01-01t00:00:00z", "format spelling"),
    ({"format": "hostname"}, "-a", "format asserted"),
    ({"maximum": 1e309}, 1e308, "number spelling"),
    ({}, [[[[1]]]], "nesting depth"),
    ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, 2.5, "other"),
])
def test_rejection_reasons(schema, instance, reason):
    assert rejection_reason(schema, instance) == reason
