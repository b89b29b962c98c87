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

from json_schema_suite import EXPECTED_INCOMPLETE, EXPECTED_UNSUPPORTED, expected_files, run
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


def test_default_mode_supports_most_groups(results):
    unsupported, _ = expected_files(results)
    assert len(results) == 661 and len(results) - len(unsupported) >= 606
