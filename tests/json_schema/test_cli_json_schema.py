"""``propertok compile --schema FILE``: output, options, errors (exit status 2, one line)."""

from __future__ import annotations

import io
import json

import pytest

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 1}},
          "required": ["ok"]}


def run(argv, capsys, stdin=None, monkeypatch=None):
    from propertok.cli import main

    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def test_compile_schema_json_report(tmp_path, capsys, pt, mistral):
    from propertok.json_schema import schema_to_regex

    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCHEMA))
    status, out, _ = run(["compile", "--schema", str(path), "--whitespace", "", "--json",
                          "--tokenizer", str(mistral.path)], capsys)
    assert status == 0
    report = json.loads(out)
    assert report["schema"] == str(path)
    assert report["regex"] == schema_to_regex(SCHEMA, whitespace="")
    v = pt.ByteDfa(report["regex"])
    for sample in report["samples"]:
        assert v.matches(sample["text"].encode())
        assert mistral.oracle.is_canonical(sample["token_ids"])
        assert json.loads(sample["text"])["ok"] in (True, False)


def test_compile_recursive_schema_unbounded_unless_bounded(tmp_path, capsys, pt, mistral):
    """As ``Compiler.compile_json_schema``: a recursive schema is the rules of a pushdown
    automaton in the default (lazy) guide, and one regex with --max-recursion-depth or --eager."""
    from propertok.json_schema import schema_to_regex

    nested = {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 2}}, "$ref": "#/$defs/n"}
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(nested))
    base = ["compile", "--schema", str(path), "--whitespace", "", "--tokenizer", str(mistral.path)]
    status, out, _ = run(base + ["--json"], capsys)
    report = json.loads(out)
    assert status == 0 and report["regex"] is None and report["lazy"] is True
    for sample in report["samples"]:
        assert isinstance(json.loads(sample["text"]), list)
        assert mistral.oracle.is_canonical(sample["token_ids"])
    status, out, _ = run(base, capsys)
    assert status == 0 and "2 rules of a pushdown automaton" in out
    guide = pt.Compiler(mistral.vocab).compile_json_schema(nested, whitespace="")
    deep = mistral.oracle.canonical("[" * 9 + "]" * 9)
    state = guide.initial_state
    for t in deep:
        state = guide.next_state(state, t)
    assert guide.is_final(state)
    for extra in (["--max-recursion-depth", "2"], ["--eager"]):
        status, out, _ = run(base + ["--json"] + extra, capsys)
        depth = 2 if "--max-recursion-depth" in extra else 3
        assert status == 0 and json.loads(out)["regex"] == schema_to_regex(nested, whitespace="", max_recursion_depth=depth)


def test_compile_schema_from_stdin_text_report(capsys, monkeypatch, mistral):
    status, out, _ = run(["compile", "--schema", "-", "--tokenizer", str(mistral.path)], capsys,
                         stdin=json.dumps({"enum": ["a", "b"]}), monkeypatch=monkeypatch)
    assert status == 0
    assert "schema      -" in out and "converted in" in out and "built by the samples (lazy guide" in out
    status, out, _ = run(["compile", "--schema", "-", "--eager", "--tokenizer", str(mistral.path)], capsys,
                         stdin=json.dumps({"enum": ["a", "b"]}), monkeypatch=monkeypatch)
    assert status == 0 and "sequences   2" in out


@pytest.mark.parametrize("argv, message", [
    (["compile"], "one of REGEX, --schema FILE or --grammar FILE"),
    (["compile", "a", "--schema", "x.json"], "one of REGEX, --schema FILE or --grammar FILE"),
    (["compile", "--schema", "/nonexistent/schema.json"], "No such file"),
])
def test_compile_argument_errors(argv, message, capsys):
    status, _, err = run(argv, capsys)
    assert status == 2 and message in err and err.count("\n") == 1


def test_compile_unsupported_schema_and_lax(tmp_path, capsys, mistral):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"type": "string", "x-note": "custom"}))
    status, _, err = run(["compile", "--schema", str(path), "--strict", "--tokenizer", str(mistral.path)], capsys)
    assert status == 2 and "'x-note' at #" in err and "leave out --strict" in err
    # by default an unknown keyword is an annotation: ignored, with a note
    status, out, err = run(["compile", "--schema", str(path), "--json", "--eager", "--tokenizer", str(mistral.path)],
                           capsys)
    assert status == 0 and json.loads(out)["count_sequences"] is None and "note: ignored" in err and "x-note" in err
    path.write_text(json.dumps({"type": "string", "format": "sha1"}))
    status, _, err = run(["compile", "--schema", str(path), "--tokenizer", str(mistral.path)], capsys)
    assert status == 2 and "'format' at #" in err and "use --lax" in err
    status, out, _ = run(["compile", "--schema", str(path), "--lax", "--json", "--tokenizer", str(mistral.path)], capsys)
    assert status == 0 and json.loads(out)["lazy"] is True and "count_sequences" not in json.loads(out)


def test_compile_schema_with_resources(tmp_path, capsys):
    from propertok.json_schema import schema_to_regex

    (tmp_path / "s.json").write_text(json.dumps({"$ref": "https://x.example/n.json"}))
    (tmp_path / "n.json").write_text(json.dumps({"type": "integer", "minimum": 7}))
    schema = str(tmp_path / "s.json")
    status, _, err = run(["compile", "--schema", schema], capsys)
    assert status == 2 and "https://x.example/n.json" in err and "resources" in err
    status, _, err = run(["compile", "--schema", schema, "--resource", "https://x.example/n.json"], capsys)
    assert status == 2 and "URI=FILE" in err
    status, out, _ = run(["compile", "--schema", schema, "--json", "--method", "agnostic", "--whitespace", "",
                          "--resource", f"https://x.example/n.json={tmp_path / 'n.json'}"], capsys)
    assert status == 0
    assert json.loads(out)["regex"] == schema_to_regex({"type": "integer", "minimum": 7}, whitespace="")


@pytest.mark.parametrize("method, expected", [("direct", "direct"), ("auto", "direct"), ("agnostic", "agnostic")])
def test_compile_methods(capsys, mistral, method, expected):
    """--method accepts every method; the report names the method the guide actually used
    (``auto`` picks ``direct`` for a small regex) and its samples are canonical (except for
    ``agnostic``, whose samples only have to match)."""
    status, out, _ = run(["compile", "(true|false)", "--method", method, "--json", "--tokenizer", str(mistral.path)], capsys)
    assert status == 0
    report = json.loads(out)
    assert report["method"] == expected and report["requested_method"] == method
    assert report["count_sequences"] == 2 if method != "agnostic" else report["count_sequences"] > 2
    for sample in report["samples"]:
        assert sample["text"] in ("true", "false")
        if method != "agnostic":
            assert mistral.oracle.is_canonical(sample["token_ids"])
