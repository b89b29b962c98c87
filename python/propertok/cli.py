"""The ``propertok`` command line: ``demo``, ``compile`` and ``check``.

``demo`` is the project's main job: with no arguments it shows, on the embedded Mistral-7B
tokenizer, how many token sequences an agnostic (Outlines-style) guide admits for the blog's
``boolean: ((true)|(false))`` and how few a canonical one does. Errors print one line on stderr
and exit with status 2 (set PROPERTOK_DEBUG=1 for the traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from typing import Any, List, Optional, Sequence, Tuple

import propertok as pt

from ._explore import accepted_sequences, spellings
from ._compiler import grammar_regex_or_none

DEMO_REGEX = "boolean: ((true)|(false))"
MAX_LISTED_SEQUENCES = 10
MAX_LISTED_TOKENS = 20
METHOD_BLURB = {
    "agnostic": "every token sequence that decodes to a match (what Outlines does)",
    "cartesian": "only canonical token sequences (CartesianMerge)",
}


METHODS = ["cartesian", "direct", "auto", "agnostic"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `propertok demo | head`: stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as e:  # one line, no traceback: these are user-facing errors
        if os.environ.get("PROPERTOK_DEBUG"):
            raise
        message = str(e) or type(e).__name__
        print(f"propertok: error: {message}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="propertok",
        description="Canonical-token masks for regex-constrained decoding.",
    )
    parser.add_argument("--version", action="version", version=f"propertok {pt.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    tokenizer_help = "a tokenizer.json (or a folder holding one); default: the embedded Mistral-7B"

    demo = commands.add_parser("demo", help="agnostic vs canonical guides for one regex")
    demo.add_argument("--tokenizer", metavar="PATH", help=tokenizer_help)
    demo.add_argument("--regex", metavar="R", default=DEMO_REGEX, help=f"default: {DEMO_REGEX!r}")
    demo.set_defaults(run=_demo)

    comp = commands.add_parser(
        "compile", help="compile a regex, a JSON schema or a grammar; print sizes, timing and samples",
        description="Compile REGEX, the JSON schema of --schema FILE (converted by "
        "propertok.json_schema) or the Lark / GBNF grammar of --grammar FILE (by "
        "propertok.grammar_to_regex) into a guide; print its size, the timings and sample outputs.")
    comp.add_argument("regex", metavar="REGEX", nargs="?", help="the regex (full match); or --schema / --grammar")
    comp.add_argument("--schema", metavar="FILE", help="a JSON Schema file ('-' reads stdin) instead of REGEX")
    comp.add_argument("--grammar", metavar="FILE", help="a Lark or GBNF grammar file ('-' reads stdin) instead of REGEX")
    comp.add_argument("--syntax", choices=("lark", "gbnf"),
                      help="with --grammar: its syntax (default: gbnf for a .gbnf file, else lark)")
    comp.add_argument("--start", metavar="RULE",
                      help="with --grammar: the start rule (default: start for Lark, root for GBNF)")
    comp.add_argument("--whitespace", metavar="R", default=r"[ ]?",
                      help="with --schema: regex allowed between JSON tokens (default '[ ]?')")
    comp.add_argument("--max-recursion-depth", metavar="N", type=int,
                      help="with --schema: expansions of one $ref per path, nesting of free values (default: "
                      "unbounded in a lazy guide, 3 with --eager); "
                      "with --grammar: nesting of each self-embedding rule inside itself (default: unbounded in a lazy "
                      "guide, refused with --eager)")
    comp.add_argument("--resource", metavar="URI=FILE", action="append", default=[],
                      help="with --schema: a schema document that $ref may point to, by its absolute URI "
                      "(repeatable; nothing is fetched)")
    comp.add_argument("--lax", action="store_true",
                      help="with --schema: also ignore unknown formats and read an ambiguous oneOf as anyOf "
                      "(may accept invalid instances)")
    comp.add_argument("--strict", action="store_true",
                      help="with --schema: fail on unknown keywords (by default they are ignored, with a note)")
    comp.add_argument("--tokenizer", metavar="PATH", help=tokenizer_help)
    comp.add_argument("--method", choices=METHODS, default="cartesian",
                      help="cartesian (default), direct (explicit token DFA), auto (direct when small enough), agnostic")
    laziness = comp.add_mutually_exclusive_group()
    laziness.add_argument("--lazy", dest="lazy", action="store_true", default=None,
                          help="build states as decoding reaches them (cartesian only, the default); states and "
                          "sequences are then not counted")
    laziness.add_argument("--eager", dest="lazy", action="store_false",
                          help="build every state up front, then count states, transitions and sequences")
    comp.add_argument("--json", action="store_true", help="print one JSON object")
    comp.set_defaults(run=_compile)

    check = commands.add_parser(
        "check",
        help="does TEXT match the regex? (exit 0 yes, 1 no)",
        description="Whether TEXT fully matches the regex (exit status 0 yes, 1 no, 2 error). "
        "With --tokenizer, also the token sequences a guide accepts that spell TEXT: "
        "exactly one, the tokenizer's own, for a canonical guide.",
    )
    check.add_argument("text", metavar="TEXT")
    check.add_argument("--regex", metavar="R", required=True)
    check.add_argument("--tokenizer", metavar="PATH", help="a tokenizer.json or a folder with one")
    check.add_argument("--method", choices=METHODS, default="cartesian")
    check.set_defaults(run=_check)
    return parser


def _demo(args: argparse.Namespace) -> int:
    vocab, path, load_s = _load_vocabulary(args.tokenizer)
    print(f"propertok {pt.__version__}: agnostic vs canonical guides")
    _print_tokenizer(vocab, path, load_s)
    print(f"regex       {args.regex!r}")
    compiler = pt.Compiler(vocab)
    counts = {}
    for method in ("agnostic", "cartesian"):
        print()
        print(f"[{method}] {METHOD_BLURB[method]}")
        if method != "agnostic" and vocab.canonical_unsupported_reason is not None:
            print(f"  skipped: {vocab.canonical_unsupported_reason}")
            continue
        if method != "agnostic" and vocab.kind != "wordpiece":  # (WordPiece has no tokenizer DFA)
            start = time.perf_counter()
            construction = compiler.tokenizer_dfa_construction  # builds (or loads) the DFA alone
            print(f"  tokenizer DFA      {_ms(time.perf_counter() - start)} "
                  f"(once per tokenizer, {construction})")
        # Eager: the demo prints the whole automaton, which a lazy guide builds only as decoded.
        guide, compile_s = _timed_compile(compiler, args.regex, method, lazy=False)
        counts[method] = _print_guide(vocab, guide, compile_s)
    if len(counts) == 2 and None not in counts.values():
        print()
        print(f"agnostic admits {counts['agnostic']} token sequence(s); "
              f"canonical admits {counts['cartesian']}, the tokenizer's own.")
    return 0


def _print_guide(vocab: Any, guide: Any, compile_s: float) -> Optional[int]:
    """The demo's per-method report; returns the number of accepted sequences."""
    print(f"  compile            {_ms(compile_s)}")
    print(f"  states             {guide.num_states}")
    print(f"  transitions        {guide.num_transitions()}")
    first = [int(t) for t in guide.allowed_tokens(guide.initial_state)]
    print(f"  first tokens       {len(first)}")
    eos = set(guide.eos_token_ids)
    for tid in first[:MAX_LISTED_TOKENS]:
        print(f"    {tid:>8}  {_token_repr(vocab, tid, eos)}")
    if len(first) > MAX_LISTED_TOKENS:
        print(f"    ... and {len(first) - MAX_LISTED_TOKENS} more")
    count = guide.count_sequences()
    print(f"  sequences          {'infinite' if count is None else count}")
    if count is not None and count <= MAX_LISTED_SEQUENCES:
        for seq in accepted_sequences(guide, MAX_LISTED_SEQUENCES):
            print(f"    {seq}  {' '.join(_token_repr(vocab, t, eos) for t in seq)}")
    else:
        print(f"    (listed only when there are at most {MAX_LISTED_SEQUENCES})")
    return count


def _compile(args: argparse.Namespace) -> int:
    if sum(x is not None for x in (args.regex, args.schema, args.grammar)) != 1:
        raise ValueError("give one of REGEX, --schema FILE or --grammar FILE")
    vocab, path, load_s = _load_vocabulary(args.tokenizer)
    schema_report = _grammar_regex(args) if args.grammar is not None else _schema_regex(args, vocab.kind)
    compiler = pt.Compiler(vocab)
    if args.grammar is not None:  # lazy by default, as compile_grammar; special tokens need it
        start = time.perf_counter()
        guide = compiler.compile_grammar(args.grammar_text, args.syntax, args.method, lazy=args.lazy, start=args.start,
                                         max_recursion_depth=args.max_recursion_depth)
        compile_s = time.perf_counter() - start
    elif args.regex is None:  # a schema that recurses: its rules, as compile_json_schema compiles them
        start = time.perf_counter()
        guide = compiler._compile_rule_regexes(args.schema_rules)
        compile_s = time.perf_counter() - start
    else:
        guide, compile_s = _timed_compile(compiler, args.regex, args.method, args.lazy)
    samples = [guide.random_walk(seed) for seed in range(3)]
    # Counting visits every state: a lazy guide would build them all, which is what it avoids.
    sizes = None if guide.is_lazy else (guide.num_states, guide.num_transitions(), guide.count_sequences())
    if args.json:
        report = {
            **schema_report,
            "regex": args.regex,
            "method": guide.method,
            "requested_method": args.method,
            "lazy": guide.is_lazy,
            "tokenizer": path,
            "vocab_size": guide.vocab_size,
            **({} if sizes is None else
               {"num_states": sizes[0], "num_transitions": sizes[1], "count_sequences": sizes[2]}),
            "load_seconds": load_s,
            "compile_seconds": compile_s,
            "samples": [{"token_ids": s, "text": _decode(vocab, s)} for s in samples],
        }
        print(json.dumps(report, indent=2))
        return 0
    _print_tokenizer(vocab, path, load_s)
    if schema_report:
        source = "grammar" if "grammar" in schema_report else "schema"
        print(f"{source:<11} {schema_report[source]}")
        if args.regex is None and source == "grammar":
            print("regex       none: the grammar names special tokens or nests rules, which no regex says")
        elif args.regex is None:
            print(f"regex       none: the schema recurses or has free values, {len(args.schema_rules)} rules of a "
                  "pushdown automaton (--max-recursion-depth N or --eager unroll them into a regex)")
        else:
            print(f"regex       {len(args.regex)} characters, converted in {_ms(schema_report['convert_seconds'])}"
                  + (f": {args.regex!r}" if len(args.regex) <= 200 else ""))
    else:
        print(f"regex       {args.regex!r}")
    print(f"method      {guide.method}" + (f" (requested {args.method})" if args.method != guide.method else ""))
    print(f"compile     {_ms(compile_s)}")
    if sizes is None:
        print(f"states      {guide.num_states} built by the samples (lazy guide; --eager counts them all)")
    else:
        print(f"states      {sizes[0]}")
        print(f"transitions {sizes[1]}")
        print(f"sequences   {'infinite' if sizes[2] is None else sizes[2]}")
    print("samples")
    for s in samples:
        print(f"  {_decode(vocab, s)!r}  {s}")
    return 0


def _read_input(path: str) -> str:
    """The text of ``path``, or of stdin for ``-``."""
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as f:
        return f.read()


def _grammar_regex(args: argparse.Namespace) -> dict:
    """With --grammar: read it into ``args.grammar_text`` and ``args.syntax``, store its regex in
    ``args.regex`` (``None`` when it names special tokens or nests rules: only ``compile_grammar``
    compiles it),
    return what to report."""
    args.grammar_text = text = _read_input(args.grammar)
    args.syntax = syntax = args.syntax or ("gbnf" if args.grammar.endswith(".gbnf") else "lark")
    start = time.perf_counter()
    args.regex = grammar_regex_or_none(text, syntax, start=args.start, max_recursion_depth=args.max_recursion_depth)
    return {"grammar": args.grammar, "syntax": syntax, "convert_seconds": time.perf_counter() - start}


def _schema_regex(args: argparse.Namespace, tokenizer_kind: str) -> dict:
    """With --schema: convert it, store the regex in ``args.regex`` (``None`` when it recurses
    without bound, its rules then in ``args.schema_rules``), return what to report. Unbounded
    exactly where ``Compiler.compile_json_schema`` is: a lazy cartesian guide without
    --max-recursion-depth, on a tokenizer other than WordPiece."""
    if args.schema is None:
        return {}
    from .json_schema import schema_to_regex, schema_to_rules

    text = _read_input(args.schema)
    start = time.perf_counter()
    if args.lax and args.strict:
        raise ValueError("--lax and --strict exclude each other")
    strict = False if args.lax else True if args.strict else None
    resources = {}
    for item in args.resource:
        uri, eq, path = item.partition("=")
        if not eq or not uri or not path:
            raise ValueError(f"--resource takes URI=FILE, got {item!r}")
        with open(path, encoding="utf-8") as f:
            resources[uri] = f.read()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            unbounded = (args.lazy is not False and args.method == "cartesian" and args.max_recursion_depth is None
                         and tokenizer_kind != "wordpiece")
            if unbounded:
                args.schema_rules = schema_to_rules(text, whitespace=args.whitespace, strict=strict,
                                                    resources=resources)
                args.regex = args.schema_rules[0][1] if len(args.schema_rules) == 1 else None
            else:
                depth = 3 if args.max_recursion_depth is None else args.max_recursion_depth
                args.regex = schema_to_regex(text, whitespace=args.whitespace,
                                             max_recursion_depth=depth, strict=strict,
                                             resources=resources)
    except ValueError as e:
        raise ValueError(str(e).replace("pass strict=False", "use --lax")
                         .replace("leave strict unset", "leave out --strict")) from None
    for w in caught:
        print(f"propertok: note: {w.message}", file=sys.stderr)
    return {"schema": args.schema, "convert_seconds": time.perf_counter() - start}


def _check(args: argparse.Namespace) -> int:
    data = args.text.encode("utf-8")
    dfa = pt.ByteDfa(args.regex)
    matched = dfa.matches(data)
    print(f"match       {'yes' if matched else 'no'} ({dfa.num_states} byte-DFA states)")
    if args.tokenizer is not None:
        vocab, _, _ = _load_vocabulary(args.tokenizer)
        guide, _ = _timed_compile(pt.Compiler(vocab), args.regex, args.method)
        ways, example = spellings(guide, vocab, data)
        print(f"{guide.method:<11} {ways} accepted token sequence(s) spell this text")
        if example is not None:
            eos = set(guide.eos_token_ids)
            print(f"  {example}  {' '.join(_token_repr(vocab, t, eos) for t in example)}")
    return 0 if matched else 1


def _load_vocabulary(path: Optional[str]) -> Tuple[Any, str, float]:
    """(vocabulary, the file it came from, seconds to load)."""
    if path is None:
        path = pt.default_tokenizer_path()
    elif os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no tokenizer file at {path}")
    start = time.perf_counter()
    vocab = pt.Vocabulary.from_file(path)
    return vocab, path, time.perf_counter() - start


def _timed_compile(compiler: Any, regex: str, method: str, lazy: Optional[bool] = None) -> Tuple[Any, float]:
    start = time.perf_counter()
    guide = compiler.compile_regex(regex, method=method, lazy=lazy)
    return guide, time.perf_counter() - start


def _print_tokenizer(vocab: Any, path: str, load_s: float) -> None:
    print(f"tokenizer   {path}")
    print(f"            {vocab.kind}, {vocab.num_tokens} tokens, EOS {vocab.eos_token_ids}, "
          f"loaded in {_ms(load_s)}")


def _token_repr(vocab: Any, tid: int, eos: Any) -> str:
    """A token's text as repr: str when it is valid UTF-8, bytes otherwise (a byte-fallback
    token such as <0xE2> is a fragment of a character)."""
    if tid in eos:
        return "<EOS>"
    raw = vocab.token_bytes(tid)
    try:
        return repr(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(raw)


def _decode(vocab: Any, tokens: List[int]) -> str:
    return vocab.decode(tokens).decode("utf-8", errors="backslashreplace")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"
