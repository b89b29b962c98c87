"""Type stubs for the Rust extension module ``propertok._core``.

Everything heavy lives here; the pure-Python package (``propertok``) re-exports these classes
and adds ``Compiler.compile_json_schema`` (on a subclass), numpy/torch bitmask helpers and the CLI.
Checked against the extension by ``mypy.stubtest`` in CI.
"""

import os
from typing import Any, Optional, Sequence, Union, final

import numpy as np
import numpy.typing as npt
from typing_extensions import disjoint_base

__all__ = [
    "__version__",
    "PropertokError",
    "LimitExceeded",
    "Vocabulary",
    "ByteDfa",
    "RuleAutomaton",
    "Compiler",
    "Guide",
    "Matcher",
    "_release_freed_memory",
    "grammar_to_regex",
    "schema_to_rules_subset",
]

__version__: str

def _release_freed_memory() -> None:
    """Return the memory the extension has freed to the OS (its allocator is mimalloc, which
    glibc's ``malloc_trim`` does not reach). For resident-memory measurements; never needed for
    correct results."""

def grammar_to_regex(
    grammar: str,
    syntax: str = "lark",
    *,
    start: Optional[str] = None,
    max_recursion_depth: Optional[int] = None,
    max_regex_bytes: int = ...,
) -> str:
    """Write a Lark (``syntax="lark"``) or GBNF (``syntax="gbnf"``) grammar's start rule as one
    regex (full match), the one ``Compiler.compile_grammar`` compiles.

    ``start``: the start rule (default ``start`` for Lark, ``root`` for GBNF). Rules are inlined;
    recursion that only continues at one end (``list: item | item "," list``) is solved exactly;
    recursion that nests (``value`` inside ``[ ]`` inside ``value``) is refused, naming a cycle,
    unless ``max_recursion_depth=N`` admits the derivations that nest each such rule up to N
    times inside itself (all of them valid, deeper ones not admitted). ``max_regex_bytes`` (default
    1 MiB) bounds the regex (``LimitExceeded`` past it).

    Errors: ``ValueError`` (syntax errors and undefined or twice-defined names, with the line;
    an empty language; an unknown ``syntax``), ``NotImplementedError`` (recursion without
    ``max_recursion_depth``; features not supported, named), ``LimitExceeded``. Releases the
    GIL."""

def schema_to_rules_subset(
    schema: Any, whitespace: str
) -> Optional[tuple[list[tuple[str, str]], list[tuple[str, str]]]]:
    """``(rules, ignored)``: the rules ``propertok.json_schema.schema_to_rules(schema,
    whitespace=whitespace)`` returns for a schema (plain JSON data: exactly ``dict`` with ``str``
    keys, ``list``, ``str``, ``int``, finite ``float``, ``bool``, ``None``; or JSON text), byte for
    byte, and the unknown keywords it ignores as ``(keyword, pointer)`` (what its
    ``IgnoredKeywordsWarning`` lists), computed in Rust; ``None`` when the schema is outside the
    subset the Rust converter handles (then call the Python converter, which also raises where it
    should). The subset and the contract: ``rust/src/json_schema/mod.rs``. Releases the GIL while
    it converts."""

class PropertokError(Exception):
    """Base class of propertok's own exceptions."""

class LimitExceeded(PropertokError):
    """A documented size limit (byte-DFA states, product states, ...) was reached.

    The message names the limit, its value, and how to raise it.
    """

@final
class Vocabulary:
    """A tokenizer's vocabulary as byte strings, its merge table and its special tokens.

    Built from the text of a Hugging Face ``tokenizer.json`` or of a Mistral Tekken file
    (``tekken.json``); immutable and thread-safe.
    """

    @staticmethod
    def from_json(
        json: str,
        eos_token_ids: Optional[Sequence[int]] = None,
        vocab_size: Optional[int] = None,
    ) -> "Vocabulary":
        """Parse a ``tokenizer.json`` document, or a Mistral Tekken file (``tekken.json``, recognized
        by its ``config.pattern`` and ``vocab`` list: special tokens are ids ``0..n_special``, the
        token of rank ``r`` is id ``n_special + r``, and ``</s>`` is the default EOS).

        ``eos_token_ids``: defaults to the tokenizer's EOS found by name among its special tokens
        (``</s>``, ``<|endoftext|>``, ``<|end_of_text|>``, ``<|eot_id|>``, ``<|im_end|>``, ``<eos>``...);
        ``ValueError`` when none is found and none is given.
        ``vocab_size``: the model's logits width when padded past the tokenizer (ids past the
        tokenizer are never allowed); ``ValueError`` when smaller than the tokenizer.
        Raises ``ValueError`` naming the problem for malformed JSON or an unsupported model type.
        """
    @staticmethod
    def from_file(
        path: Union[str, "os.PathLike[str]"],
        eos_token_ids: Optional[Sequence[int]] = None,
        vocab_size: Optional[int] = None,
    ) -> "Vocabulary":
        """Read and parse a ``tokenizer.json`` or ``tekken.json`` file (as ``from_json``);
        ``OSError`` when it cannot be read."""
    @staticmethod
    def from_tokenizer(
        tokenizer: Any,
        eos_token_ids: Optional[Sequence[int]] = None,
        vocab_size: Optional[int] = None,
    ) -> "Vocabulary":
        """Build from a loaded tokenizer: a ``tokenizers.Tokenizer`` or a ``transformers`` fast
        tokenizer, by duck typing (``to_str()``, or ``backend_tokenizer.to_str()``), or a
        ``mistral_common`` Tekken tokenizer (``MistralTokenizer`` or ``Tekkenizer``: its
        ``file_path`` is read). A transformers tokenizer's ``eos_token_id`` and, when it was
        loaded from a local folder, the stop ids of its ``generation_config.json`` are the default
        EOS ids; a Tekkenizer's ``eos_id`` is. ``TypeError`` for anything else, e.g. a slow
        tokenizer or a mistral_common SentencePiece tokenizer."""
    @property
    def num_tokens(self) -> int:
        """Number of token ids the tokenizer defines (max id + 1)."""
    @property
    def vocab_size(self) -> int:
        """Width of masks and bitmasks (>= num_tokens)."""
    @property
    def eos_token_ids(self) -> list[int]: ...
    @property
    def kind(self) -> str:
        """``"sentencepiece-bpe"``, ``"byte-level-bpe"``, ``"unigram"`` or ``"wordpiece"``."""
    @property
    def canonical_unsupported_reason(self) -> Optional[str]:
        """``None`` when canonical guides are exact for this tokenizer, else why they are refused."""
    @property
    def pre_tokenizer(self) -> Optional[dict[str, Any]]:
        """For a byte-level BPE tokenizer canonical guides support: ``{"stages": [pattern, ...],
        "byte_mapped_stages": [pattern, ...], "normalization": "none" | "NFC" | "NFKC",
        "ignore_merges": bool}``, the pre-tokenizer as ``Split(pattern, Isolated)`` stages applied
        in order (with non-special added tokens, the first stage is the alternation of their
        contents, and its matches are never passed to the later stages), then the stages after
        ``ByteLevel`` (Falcon's ``Digits`` and ``Split``), whose patterns see one stand-in
        character per byte (GPT-2's table) and may cut inside a UTF-8 character; ``None``
        otherwise."""
    @property
    def special_token_ids(self) -> list[int]: ...
    def token_bytes(self, token_id: int) -> bytes:
        """The bytes a token decodes to (``ValueError`` for an id out of range). A WordPiece
        token that starts a word is a space and its text (``b" hello"``), one that continues a
        word its text without ``##``."""
    def decode(self, token_ids: Sequence[int]) -> bytes:
        """The text ``token_ids`` stand for, the text guides match their regex against: the
        tokens' bytes in order, except that a WordPiece text's first word has no space before it
        (``ValueError`` for an id out of range)."""

@final
class ByteDfa:
    """A regex compiled to a trimmed byte-level DFA (full-match semantics, UTF-8).

    Exposed mainly for tests and diagnostics.
    """

    def __new__(cls, pattern: str, max_states: int = ...) -> "ByteDfa":
        """``ValueError`` for invalid/unsupported syntax or an empty language;
        ``LimitExceeded`` past ``max_states`` (default 250,000)."""
    @property
    def num_states(self) -> int: ...
    def matches(self, data: bytes) -> bool:
        """Whether the whole of ``data`` is in the language."""
    def sample(self, n: int, seed: int, max_len: int = 64) -> list[bytes]:
        """``n`` random members of the language (random walks that stop at accepting states;
        past ``max_len`` bytes they take a shortest way to acceptance)."""

@final
class RuleAutomaton:
    """The pushdown automaton of a rule set that nests: ``(name, regex)`` rules, the first the
    start, a call to rule ``i`` written ``(?-u:\\xFE\\x{80+i/64}\\x{80+i%64})``
    (``propertok.json_schema.schema_to_rules`` writes such rules). States are built as texts are
    matched. Exposed for tests and diagnostics.
    """

    def __new__(
        cls,
        rules: Sequence[tuple[str, Optional[str]]],
        max_recursion_depth: Optional[int] = None,
        max_states: int = ...,
    ) -> "RuleAutomaton":
        """``ValueError`` for an invalid regex, no rules or no finite string; ``NotImplementedError``
        for left recursion; ``LimitExceeded`` past ``max_states`` (default 250,000) per rule's
        DFA."""
    @property
    def num_states(self) -> int: ...
    def matches(self, data: bytes) -> bool:
        """Whether the whole of ``data`` is in the language (``LimitExceeded`` past
        ``max_states`` states or stack frames, or 1,024 configurations in one state)."""

@disjoint_base
class Compiler:
    """Compiles regexes into guides for one vocabulary.

    Builds the tokenizer DFA (the canonical-pair structure of the tokenizer) on first use
    of a canonical method and reuses it; immutable and safe to share across threads.
    """

    def __new__(
        cls,
        vocabulary: Vocabulary,
        *,
        max_byte_dfa_states: int = ...,
        max_product_states: int = ...,
        max_direct_states: int = ...,
        max_direct_transitions: int = ...,
        max_compile_seconds: Optional[float] = ...,
        max_guide_bytes: int = ...,
        max_mask_cache_bytes: int = ...,
        prefetch_seconds: float = ...,
        cache_dir: Optional[str] = None,
    ) -> "Compiler":
        """Limits (``LimitExceeded`` naming the limit past each, checked as the work goes):
        ``max_byte_dfa_states`` (the regex's DFA), ``max_product_states`` (CartesianMerge's
        product search), ``max_direct_states`` / ``max_direct_transitions`` (explicit DFAs of
        ``direct``; ``auto`` falls back to cartesian past them), ``max_compile_seconds`` (wall
        time of one compile, tokenizer DFA excluded, and of each mask or step of a lazy guide that
        builds new states; ``None`` = unlimited), ``max_guide_bytes``
        (estimated size of a guide's tables). ``max_mask_cache_bytes`` bounds the masks each guide
        caches while in use: past it masks are computed per request (same results, slower).
        Defaults (the README's Limits table): 250,000 byte-DFA states, 2,000,000 product states,
        100,000 direct states, 2,000,000 direct transitions, 30 s, 1 GiB of guide tables, 256 MiB
        of cached masks.

        ``prefetch_seconds`` (default 0: off): how long a lazy compile goes on, after its initial
        state, filling the states a decoder can reach next, breadth first. Masks never change;
        first visits move from decoding steps into the compile (worth it where compiles overlap
        other work, as in a serving engine that compiles while it prefills). It stops early at
        half of ``max_product_states`` text states or half of ``max_guide_bytes``. ``ValueError``
        unless finite and non-negative.

        ``cache_dir`` (default: env ``PROPERTOK_CACHE_DIR``, else no cache): where the tokenizer
        DFA is kept between processes, keyed by the tokenizer's content fingerprint; a corrupt or
        stale file is rebuilt, never trusted. A loaded file is memory-mapped (its pages are shared
        by every process that loads it): replace a cache file by renaming, never edit it in
        place while a process uses it."""
    @property
    def vocabulary(self) -> Vocabulary: ...
    def compile_regex(self, pattern: str, method: str = "cartesian", *, lazy: Optional[bool] = None) -> "Guide":
        """Compile ``pattern`` (full match) into a Guide.

        ``method``: ``"cartesian"`` (canonical, default); ``"direct"`` (canonical, as an explicit
        minimised token DFA — ``LimitExceeded`` past ``max_direct_states``/``max_direct_transitions``);
        ``"auto"`` (direct when within those limits, else cartesian; ``guide.method`` says which);
        or ``"agnostic"`` (every token sequence that decodes to a match, what Outlines does).

        ``lazy`` (``"cartesian"`` only; default ``True``): build each state the first time a
        decoder reaches it, memoized in the guide and shared by every matcher and thread,
        instead of every state up front. The masks are the same bit for bit; a lazy compile
        costs about a millisecond where an eager one on a 128k-vocabulary tokenizer costs up to
        seconds (with an NFC / NFKC normalizer, or WordPiece, an eager guide of free text does
        not fit its limits at all), while a state's first visit costs microseconds to
        milliseconds (a JSON string's opening). ``lazy=False`` asks for the eager guide (for
        ``Guide.to_bytes`` or whole-guide statistics); ``lazy=True`` with another method is a
        ``ValueError``; ``Guide.materialize()`` turns a lazy guide into an eager one.

        A WordPiece (BERT) tokenizer's guides read the regex against the text its tokens decode
        to, words joined by one space (see the README's "Tokenizer support"); they are lazy by
        default, and eager ones are explicit token DFAs (``guide.method`` ``"direct"``, or
        ``"agnostic"``).

        Errors: ``ValueError`` (invalid regex, unsupported feature such as look-around or
        backreferences, empty language, unknown method), ``NotImplementedError`` (canonical
        method on a tokenizer it cannot make exact), ``LimitExceeded``. A lazy guide can also
        raise ``LimitExceeded`` later, from ``mask``/``next_state`` and the matcher calls, when a
        state it must build passes ``max_product_states`` or its memo passes ``max_guide_bytes``.
        Releases the GIL: a lazy compile once its work passes a millisecond (most take less).
        """
    def compile_grammar(
        self,
        grammar: str,
        syntax: str = "lark",
        method: str = "cartesian",
        *,
        lazy: Optional[bool] = None,
        start: Optional[str] = None,
        max_recursion_depth: Optional[int] = None,
        max_regex_bytes: int = 1 << 20,
    ) -> "Guide":
        """Compile a Lark or GBNF grammar (``syntax``) from its start rule (``start``; default
        ``start`` for Lark, ``root`` for GBNF) into a guide with exactly canonical masks.

        Lazy guides (the default with ``"cartesian"``) take the grammar as it is: rules that
        nest (``value`` → ``array`` → ``value``) nest without bound, run as a pushdown
        automaton whose stacks the guide builds as the text opens them; ``max_recursion_depth=N``
        bounds the nesting instead (each rule open at most N + 1 times). A rule that names
        itself before any text (left recursion inside nesting, ``sum: sum "+" sum | ...``) is a
        ``NotImplementedError`` naming the cycle; write such lists with ``*``. Eager guides
        (``lazy=False``) and other methods compile the start rule as ``grammar_to_regex`` writes
        it, so nesting needs ``max_recursion_depth`` there. See ``docs/grammars.md``.

        Special tokens (``<|python_tag|>`` or ``<[128010]>``, in Lark and GBNF alike) are
        resolved against this compiler's tokenizer. A special token (``"special": true``: turn,
        tool-call and reasoning markers) is allowed exactly where the grammar names it, and the
        text on either side is tokenized canonically on its own, as the tokenizer splits special
        tokens out first; such guides are lazy only (``lazy=False`` or another method is a
        ``NotImplementedError``), and ``materialize()`` / ``to_bytes()`` refuse them. A
        non-special added token (DeepSeek V3's ``<｜tool▁calls▁begin｜>``) is its text, which
        canonical tokenization turns into that token. An ordinary token, an end-of-sequence
        token or an unknown name is a ``ValueError`` naming the rule.

        ``lazy`` defaults to ``True`` with ``"cartesian"`` (unlike ``compile_regex``): a grammar's
        regex repeats every rule it inlines, and an eager guide of it can take seconds on a
        128k-vocabulary tokenizer (JSON nested 3 deep on Llama 3: 16 s eager, 1.3 ms lazy,
        ``benches/RESULTS.md``). ``lazy=False`` asks for the eager guide. A guide of a nesting
        grammar has no eager form (``materialize()`` and ``to_bytes()`` refuse it).

        Errors: as ``grammar_to_regex`` and ``compile_regex``; ``LimitExceeded`` when a lazy
        guide's automaton passes ``max_product_states`` (states or stack frames) or 1,024
        configurations in one state (an ambiguous grammar). Releases the GIL.
        """
    def _compile_rule_regexes(
        self, rules: Sequence[tuple[str, Optional[str]]], max_recursion_depth: Optional[int] = None
    ) -> "Guide":
        """A lazy guide of a pushdown automaton's rules, ``(name, regex)`` with the first the
        start and calls to rule ``i`` written ``(?-u:\\xFE\\x{80+i/64}\\x{80+i%64})``: what
        ``compile_json_schema`` builds for recursive schemas (lazy, by default). Internal."""
    def guide_from_bytes(self, data: bytes) -> "Guide":
        """Load a guide saved by ``Guide.to_bytes()`` for the same tokenizer; ``ValueError`` for
        truncated, corrupted, other-version or other-tokenizer data."""
    def tokenizer_dfa_stats(self) -> dict[str, float]:
        """Builds the tokenizer DFA if needed; returns ``num_classes``, ``num_emittable_tokens``,
        ``num_lone_tokens`` (with ``ignore_merges``: emitted only as a whole pre-tokenizer piece),
        ``num_unreachable_tokens`` (never emitted), ``num_always_split_tokens`` (the pre-tokenizer
        never leaves their text whole), ``num_forbidden_pairs``, ``build_seconds`` (load time on a cache
        hit), ``cache`` (``"hit"``, ``"miss"``, ``"write-failed"``, ``"disabled"``),
        ``slice_sets_walked`` and ``slice_sets_loaded`` (the lazy guides' shared token tables of
        JSON string contents and ``.*`` so far, one per kind of text before them: walked over the
        vocabulary by this compiler, or read from ``cache_dir``), ``slice_set_contents_read`` (of
        those read, how many had their contents read: a set the same as one already in memory,
        another kind of text's, is shared instead), ``slice_regions_found`` and
        ``slice_regions_loaded`` (the text states of string contents from one start that a shared
        first-token set's key describes: explored here, or read from ``cache_dir``);
        ``construction`` is not included
        (see ``tokenizer_dfa_construction``)."""
    def tokens_always_split(self) -> list[int]:
        """Token ids the merges can emit but whose text the pre-tokenizer never leaves whole, so
        that no canonical sequence contains them (``[]`` without a pre-tokenizer)."""
    @property
    def tokenizer_dfa_construction(self) -> str:
        """How the tokenizer DFA was built: ``"priority-timeline"`` (exact for every merge table;
        the appendix's ``"algorithm3"`` is only a reference in the Rust tests)."""

@final
class Guide:
    """An immutable automaton over token ids: states, allowed tokens per state, transitions.

    States are ints in ``range(num_states)``. EOS is allowed exactly in final states.
    """

    @property
    def initial_state(self) -> int: ...
    @property
    def num_states(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def eos_token_ids(self) -> list[int]: ...
    @property
    def method(self) -> str: ...
    @property
    def is_lazy(self) -> bool:
        """Whether states are built as decoders reach them (``Compiler.compile_regex(lazy=...)``);
        ``num_states``, ``num_transitions`` and ``stats`` then count the states built so far."""
    def materialize(self) -> "Guide":
        """The same guide with every state built up front (an eager guide, what ``to_bytes``
        needs), under the limits it was compiled with; an eager guide is returned as it is."""
    def num_transitions(self) -> int:
        """Total number of (state, non-EOS token) transitions (costs a pass over all masks)."""
    def stats(self) -> dict[str, object]:
        """``method``, ``num_states``, ``num_transitions`` (non-EOS), ``mean_allowed_tokens``,
        ``single_choice_share`` (states with exactly one choice: one token, or EOS alone),
        ``mask_cache_bytes`` / ``max_mask_cache_bytes`` (masks cached so far, and the budget),
        ``lazy``; for a lazy guide also ``lazy_memo_bytes`` / ``max_lazy_memo_bytes`` (its memo,
        bounded by ``max_guide_bytes``), ``lazy_text_automaton`` (``"minimal DFA"``: the regex's
        DFA, built by the compile; ``"DFA on demand"``: a large regex's DFA, determinized as
        decoding reaches its states; ``"outlined rules"``: a regex whose large counted repetitions
        repeat calls to rules of their own, determinized on demand; ``"pushdown"``: a grammar that
        nests, or a recursive schema), ``lazy_text_states`` (text states built so far) and
        ``lazy_sliced_text_states`` (those whose tokens came from a tokenizer-wide slice, such as a
        JSON string's contents, instead of a trie walk of their own); for a lazy guide of a grammar
        that nests (``"pushdown"``) also ``grammar_stack_frames`` (stack frames its automaton has
        made so far) and ``grammar_stacks_per_rule`` (rule name → the distinct stacks that rule has
        been decided under so far: its contexts). A lazy WordPiece guide has
        no text states: it reports ``lazy_memo_bytes`` (its word-start masks, which
        ``max_guide_bytes`` bounds, and its states) and ``lazy_text_automaton``."""
    def allowed_tokens(self, state: int) -> npt.NDArray[np.int32]:
        """Sorted allowed token ids, EOS ids included when ``state`` is final."""
    def mask(self, state: int) -> npt.NDArray[np.uint32]:
        """Read-only ``uint32`` view of ``ceil(vocab_size/32)`` words (bit i of word i//32 = token i),
        zero-copy over the guide's mask cache (the array keeps the guide alive); a fresh copy for
        a mask of few tokens (cached as token ids, at most 1/8 of the mask's bytes) and once the
        cache has reached ``max_mask_cache_bytes``."""
    def next_state(self, state: int, token_id: int) -> int:
        """The state after ``token_id``; ``ValueError`` naming the token when it is not allowed or
        out of range. EOS from a final state returns ``state`` itself."""
    def is_final(self, state: int) -> bool: ...
    def count_sequences(self) -> Optional[int]:
        """Number of accepted token sequences (EOS not counted), ``None`` if infinite.
        Saturates at 2**64-1. Walks every state: ``NotImplementedError`` for a guide whose
        grammar nests without bound (its states never run out)."""
    def random_walk(self, seed: int, max_tokens: int = 64) -> list[int]:
        """A random accepted token sequence (EOS not included): uniform choices among allowed tokens,
        stopping at a final state with probability 1/4, and past ``max_tokens`` a shortest way to a
        final state."""
    def first_difference(self, other: "Guide") -> Optional[list[int]]:
        """``None`` when both guides accept the same token sequences (a walk of their product,
        comparing masks at every reachable pair of states), else a shortest token sequence after
        which their masks differ. Costs the product's transitions: for tests and diagnostics.
        ``NotImplementedError`` for a guide whose grammar nests without bound."""
    def to_bytes(self) -> bytes:
        """The guide in a versioned, checksummed binary format, keyed by the tokenizer's
        fingerprint; load it with ``Compiler.guide_from_bytes``. A lazy guide raises
        ``NotImplementedError``: ``materialize()`` it first. (Pickling a Guide raises
        ``TypeError`` saying so: it shares its tokenizer's data.)"""
    def matcher(self) -> "Matcher": ...

@final
class Matcher:
    """A per-sequence cursor over a Guide, with history for rollback."""

    @property
    def state(self) -> int: ...
    @property
    def num_accepted_tokens(self) -> int: ...
    def accept_token(self, token_id: int) -> bool:
        """Advance on ``token_id``; ``False`` (state unchanged) when not allowed.
        ``ValueError`` when the id is out of range. Accepting EOS terminates the matcher; after
        that only EOS is allowed (the mask of a finished batch row), and accepting it again
        returns True and changes nothing (``num_accepted_tokens`` included)."""
    def accept_tokens(self, token_ids: Sequence[int]) -> bool:
        """Accept tokens in order; stops at the first refused one and returns False."""
    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens; ``ValueError`` past the start."""
    def reset(self) -> None: ...
    def is_accepting(self) -> bool:
        """EOS is allowed now."""
    def is_terminated(self) -> bool:
        """EOS was accepted."""
    def allowed_tokens(self) -> npt.NDArray[np.int32]: ...
    def forced_tokens(self) -> list[int]:
        """The longest run of tokens each of which is the only allowed choice (EOS excluded unless
        it is the only choice, in which case the run ends with it). Does not move the matcher."""
    def fill_next_token_bitmask(self, bitmask: npt.NDArray[np.int32], index: int = 0) -> None:
        """Write the allowed-token mask into row ``index`` of an int32 C-contiguous array of shape
        ``(batch, ceil(vocab_size/32))``; ``ValueError`` for a wrong shape, dtype or layout.
        A terminated matcher allows only EOS. Only row ``index`` is written, so several threads
        may fill different rows of one bitmask at once (a first visit releases the GIL once its
        work passes a millisecond); filling one row from two threads at once is the caller's
        race."""
