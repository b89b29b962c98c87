#!/usr/bin/env python3
"""propertok vs outlines-core, llguidance and xgrammar on the same regexes, in one run.

Run it with the benchmark-only environment of ``benches/setup_peers.sh`` (never a runtime or test
dependency of propertok):

    bash benches/setup_peers.sh
    /tmp/propertok-bench-venv/bin/python benches/compare.py                 # full run (~1 h on 2 cores)
    /tmp/propertok-bench-venv/bin/python benches/compare.py --glaive 5 --github 3 --tokenizers mistral7b

Inputs: the outlines-core regexes of JSONSchemaBench (``shared/data/jsonschemabench_regex.jsonl``),
a seeded sample of ``--glaive`` rows of the Glaiveai2K subset plus ``--github`` rows of the Github_*
subsets (rows whose regex is stored). Every library compiles the *same regex string*: propertok
``Compiler.compile_regex``, outlines-core ``Index(regex, Vocabulary)``, llguidance
``LLMatcher(tokenizer, LLMatcher.grammar_from_regex(regex))``, xgrammar
``GrammarCompiler.compile_regex(regex)`` (cache disabled, ``max_threads=2``).

Per regex and library, in a separate worker process per library (one at a time, so they never
compete for the 2 cores; a compile past ``--timeout`` kills the worker, counted as a timeout):

* compile time (wall clock around the compile call);
* memory: resident-set growth over the compile (``VmRSS`` after minus before, after ``malloc_trim``),
  the peak during it (``VmHWM`` reset through ``/proc/self/clear_refs``) and the growth after the
  mask walks (propertok and llguidance fill their mask caches lazily); xgrammar's own
  ``memory_size_bytes`` too;
* mask time per step along canonical token paths: valid JSON documents of the schema
  (``jsonschemabench_valid_instances.jsonl``), serialized with ``json.dumps``, kept when the regex
  matches them, tokenized by the real tokenizer as a continuation (``tests/support/oracle.py``: no special
  tokens, no SentencePiece "▁" prepended). At each step the library fills one row of a preallocated
  int32 ``(1, ceil(V/32))`` bitmask (timed), the path token is checked in it, and the token is
  accepted (timed separately); at the end the EOS bit is checked;
* optionally (``--samples K``): K token sequences drawn uniformly from each library's masks
  (``--sample-len`` tokens at most, or up to EOS), checked against the tokenizer: the share that is
  not canonical. Canonical BPE token sequences are prefix-closed, so a non-canonical prefix has no
  canonical completion.

``--busy-thread`` runs a spinning Python thread beside each worker's measured work, as an
engine's other Python threads would: a library that releases the GIL during a call waits to take
it back, up to the interpreter's switch interval (5 ms).

Writes ``--json`` (per-item records and summaries) and ``--markdown`` (the tables of
``benches/RESULTS.md``'s "Peer comparison" section) and prints the markdown.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import gc
import json
import multiprocessing as mp
import os
import platform
import random
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PROPERTOK_SHARED", str(REPO.parent / "shared"))).resolve()
DATA = SHARED / "data"
TOKENIZERS = {"mistral7b": "Mistral-7B", "llama3": "Llama 3", "qwen2": "Qwen2", "o200k": "o200k"}
LIBS = ["propertok-cartesian", "propertok-lazy", "propertok-prefetch", "propertok-eager", "propertok-auto", "propertok-agnostic", "outlines-core", "llguidance", "xgrammar"]
PEERS = ["outlines-core", "llguidance", "xgrammar"]
OURS = ["propertok-cartesian", "propertok-lazy", "propertok-prefetch", "propertok-eager", "propertok-auto", "propertok-agnostic"]


# `propertok-prefetch`'s `Compiler(prefetch_seconds=...)` (`--prefetch-seconds`; workers inherit
# it through the environment).
PREFETCH_SECONDS = float(os.environ.get("PROPERTOK_BENCH_PREFETCH_SECONDS", "0.001"))
# `--cache-dir`: the measured propertok Compilers' `cache_dir` (the tokenizer DFA and the lazy
# guides' slice group sets, as a server with `$PROPERTOK_CACHE_DIR` has them); none by default,
# so that setup is a cold build and every slice group set is walked in the run.
CACHE_DIR = os.environ.get("PROPERTOK_BENCH_CACHE_DIR") or None
# `--busy-thread`: each worker runs a second Python thread that never blocks (an engine's other
# Python work), so that a library which releases the GIL waits to take it back, up to the
# switch interval (5 ms).
BUSY_THREAD = os.environ.get("PROPERTOK_BENCH_BUSY_THREAD") == "1"


def tokenizer_path(tok: str) -> Path:
    return SHARED / "tokenizers" / tok / "tokenizer.json"


def load_oracle_module():
    sys.path.insert(0, str(REPO / "tests" / "support"))
    import oracle  # noqa: E402  (tests/support/oracle.py: the real tokenizer, continuation semantics)

    return oracle


# ----------------------------------------------------------------------------------------------
# memory helpers (Linux)
# ----------------------------------------------------------------------------------------------

_LIBC = None


def _trim():
    """Returns freed memory to the OS before a resident-set reading: glibc's ``malloc_trim``, and
    for propertok, whose extension allocates through mimalloc, its ``_release_freed_memory``."""
    global _LIBC
    gc.collect()
    try:
        if _LIBC is None:
            _LIBC = ctypes.CDLL("libc.so.6")
        _LIBC.malloc_trim(0)
    except OSError:
        pass
    core = sys.modules.get("propertok._core")
    if core is not None and hasattr(core, "_release_freed_memory"):
        core._release_freed_memory()


def _status_kb(pid="self"):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    k, v = line.split(":")
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def _reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# ----------------------------------------------------------------------------------------------
# adapters: one per library, the same five operations
# ----------------------------------------------------------------------------------------------


class Adapter:
    """setup() once; compile(regex) -> handle; matcher(handle) -> m; fill(m); accept(m, t) -> bool."""

    info: dict

    def __init__(self, tok: str, eos_ids: list[int], vocab_size: int):
        self.tok, self.eos_ids, self.vocab_size = tok, eos_ids, vocab_size
        self.info = {}

    def after_setup(self):
        """Untimed extra measurements after setup() (none by default)."""


class PropertokAdapter(Adapter):
    def __init__(self, tok, eos_ids, vocab_size, method):
        super().__init__(tok, eos_ids, vocab_size)
        # "cartesian" takes the default (lazy since stop 65, eager before); "lazy" and
        # "eager" ask for one explicitly, so a run compares them whatever the default is.
        # "prefetch" is "lazy" with ``Compiler(prefetch_seconds=--prefetch-seconds)``.
        lazy = {"lazy": True, "prefetch": True, "eager": False}.get(method)
        self.method, self.options = ("cartesian", {"lazy": lazy}) if lazy is not None else (method, {})
        self.compiler_options = {"prefetch_seconds": PREFETCH_SECONDS} if method == "prefetch" else {}
        if CACHE_DIR:
            self.compiler_options["cache_dir"] = CACHE_DIR

    def setup(self):
        import numpy as np
        import propertok as pt

        self.vocab = pt.Vocabulary.from_file(str(tokenizer_path(self.tok)))
        self.compiler = pt.Compiler(self.vocab, **self.compiler_options)
        if self.method != "agnostic":
            # Builds the tokenizer DFA alone; NotImplementedError for tokenizers the canonical
            # methods cannot make exact yet.
            self.info["tokenizer_dfa_construction"] = self.compiler.tokenizer_dfa_construction
        # Warm-up with the options measured: builds the token tries (and, for a lazy guide, the
        # tokenizer's lazy parts, which the first timed compile paid before, 100-170 ms).
        self.compiler.compile_regex("a", method=self.method, **self.options)
        self.bm = np.zeros((1, (self.vocab.vocab_size + 31) // 32), dtype=np.int32)

    def after_setup(self):
        """Untimed: the tokenizer DFA's statistics and the disk cache's figures (a second cold
        build, then a load), reported beside the setup time, not in it."""
        import propertok as pt

        if self.method != "agnostic":
            self.info["tokenizer_dfa"] = self.compiler.tokenizer_dfa_stats()
            self._measure_cache(pt, self.vocab)

    def _measure_cache(self, pt, vocab):
        """Tokenizer DFA through the disk cache: a cold build that writes it, then a fresh
        Compiler that loads it: the load itself (``build_seconds`` of a hit) and the time from
        the fresh Compiler to its first compiled guide, which adds the pre-tokenizer's tables
        (skipped when this propertok has no cache_dir)."""
        import shutil
        import tempfile

        d = tempfile.mkdtemp(prefix="propertok-bench-cache-")
        options = {k: v for k, v in self.compiler_options.items() if k != "cache_dir"}
        try:
            try:
                pt.Compiler(vocab, cache_dir=d, **options).tokenizer_dfa_stats()
            except TypeError:
                return
            t0 = time.perf_counter()
            c = pt.Compiler(vocab, cache_dir=d, **options)
            c.compile_regex("a", method=self.method, **self.options)
            self.info["cache_to_first_guide_s"] = time.perf_counter() - t0
            stats = c.tokenizer_dfa_stats()
            self.info["cache_load_s"] = stats.get("build_seconds")
            self.info["cache_status"] = stats.get("cache")
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def compile(self, regex):
        return self.compiler.compile_regex(regex, method=self.method, **self.options)

    def describe(self, g):
        return {
            "num_states": g.num_states,
            "method": g.method,
            "lazy": getattr(g, "is_lazy", False),
            "mask_bytes": (g.vocab_size + 31) // 32 * 4,
        }

    def matcher(self, g):
        return g.matcher()

    def fill_fn(self, m):
        f, bm = m.fill_next_token_bitmask, self.bm
        return lambda: f(bm, 0)

    def accept(self, m, t):
        return m.accept_token(t)


class OutlinesAdapter(Adapter):
    def setup(self):
        import numpy as np
        import outlines_core

        oracle = load_oracle_module()
        doc = json.loads(tokenizer_path(self.tok).read_text(encoding="utf-8"))
        table = oracle.token_bytes_table(doc)
        special = {a["id"] for a in doc.get("added_tokens") or [] if a.get("special")}
        by_bytes: dict[bytes, list[int]] = {}
        for tid, b in enumerate(table):
            if b is not None and tid not in special:
                by_bytes.setdefault(b, []).append(tid)
        t0 = time.perf_counter()
        self.vocab = outlines_core.Vocabulary(self.eos_ids[0], by_bytes)
        self.info["vocabulary_constructor_s"] = time.perf_counter() - t0
        self.oc = outlines_core
        self.bm = np.zeros((1, (self.vocab_size + 31) // 32), dtype=np.int32)
        self.oc.Index("a", self.vocab)

    def compile(self, regex):
        return self.oc.Index(regex, self.vocab)

    def describe(self, idx):
        return {}

    def matcher(self, idx):
        return self.oc.Guide(idx)

    def fill_fn(self, g):
        f, ptr, n = g.write_mask_into, self.bm.ctypes.data, self.bm.size
        return lambda: f(ptr, n, 4)

    def accept(self, g, t):
        try:
            g.advance(t, return_tokens=False)
            return True
        except ValueError:
            return False


class LLGuidanceAdapter(Adapter):
    def setup(self):
        import llguidance
        import numpy as np

        self.llg = llguidance
        # The original tokenizer.json text, as llguidance.hf.from_tokenizer would pass it.
        self.tokenizer = llguidance.LLTokenizer(
            tokenizer_path(self.tok).read_text(encoding="utf-8"), n_vocab=self.vocab_size, eos_token=self.eos_ids
        )
        self.bm = np.zeros((1, (self.vocab_size + 31) // 32), dtype=np.int32)
        self.compile("a")

    def compile(self, regex):
        m = self.llg.LLMatcher(self.tokenizer, self.llg.LLMatcher.grammar_from_regex(regex), log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return m

    def describe(self, m):
        return {}

    def matcher(self, m):
        return m  # the compiled object is the matcher (lazy: it compiles as it goes)

    def fill_fn(self, m):
        f, ptr, n = m.unsafe_compute_mask_ptr, self.bm.ctypes.data, self.bm.size * 4
        return lambda: f(ptr, n)

    def accept(self, m, t):
        return m.consume_token(t)


class XGrammarAdapter(Adapter):
    def setup(self):
        warnings.filterwarnings("ignore")
        import torch
        import transformers
        import xgrammar

        self.xgr = xgrammar
        hf = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_path(self.tok)))
        info = xgrammar.TokenizerInfo.from_huggingface(hf, vocab_size=self.vocab_size, stop_token_ids=self.eos_ids)
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=os.cpu_count() or 2, cache_enabled=False)
        self.info["vocab_type"] = str(info.vocab_type)
        self.bm = torch.zeros((1, (self.vocab_size + 31) // 32), dtype=torch.int32)
        self.compile("a")

    def compile(self, regex):
        return self.compiler.compile_regex(regex)

    def describe(self, cg):
        return {"self_reported_bytes": cg.memory_size_bytes}

    def matcher(self, cg):
        return self.xgr.GrammarMatcher(cg)

    def fill_fn(self, m):
        f, bm = m.fill_next_token_bitmask, self.bm
        return lambda: f(bm, 0)

    def accept(self, m, t):
        return m.accept_token(t)


def make_adapter(lib, tok, eos_ids, vocab_size) -> Adapter:
    if lib.startswith("propertok-"):
        return PropertokAdapter(tok, eos_ids, vocab_size, lib.split("-", 1)[1])
    return {"outlines-core": OutlinesAdapter, "llguidance": LLGuidanceAdapter, "xgrammar": XGrammarAdapter}[lib](
        tok, eos_ids, vocab_size
    )


# ----------------------------------------------------------------------------------------------
# worker process
# ----------------------------------------------------------------------------------------------


def _bit(bm_row, t) -> bool:
    return bool((int(bm_row[t >> 5]) >> (t & 31)) & 1)


def worker_main(lib, tok, eos_ids, vocab_size, conn):
    warnings.filterwarnings("ignore")
    os.environ.pop("PROPERTOK_CACHE_DIR", None)  # setup times are cold builds; the cache is timed apart
    import numpy as np

    try:
        t0 = time.perf_counter()
        ad = make_adapter(lib, tok, eos_ids, vocab_size)
        ad.setup()
        setup_s = time.perf_counter() - t0
        ad.after_setup()
        conn.send(("ready", setup_s, ad.info))
    except NotImplementedError as e:
        conn.send(("unsupported", f"NotImplementedError: {e}"))
        return
    except Exception as e:  # noqa: BLE001
        conn.send(("setup_error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
        return
    if BUSY_THREAD:
        import threading

        def spin():
            while True:
                pass

        threading.Thread(target=spin, daemon=True).start()
    bm = ad.bm
    row = bm[0] if not hasattr(bm, "numpy") else bm.numpy()[0]  # a view on the same memory
    eos = list(eos_ids)
    can_peak = _reset_peak()
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        if msg[0] == "retain":
            conn.send(("retained",) + _retain(ad, msg[1], msg[2], lib))
            continue
        _, regex, paths, n_samples, sample_len, seed = msg
        # -- compile ------------------------------------------------------------------------
        _trim()
        before = _status_kb()
        _reset_peak()
        gc.disable()
        try:
            t0 = time.perf_counter()
            handle = ad.compile(regex)
            compile_s = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001
            gc.enable()
            conn.send(("compile_error", f"{type(e).__name__}: {str(e)[:300]}"))
            continue
        gc.enable()
        after = _status_kb()
        mem = {
            "rss_delta_kb": after.get("VmRSS", 0) - before.get("VmRSS", 0),
            "peak_delta_kb": (after.get("VmHWM", 0) - before.get("VmRSS", 0)) if can_peak else None,
        }
        desc = {}
        try:
            desc = ad.describe(handle)
        except Exception:  # noqa: BLE001
            pass
        conn.send(("compiled", compile_s, mem, desc))
        # -- mask walks along canonical paths ----------------------------------------------------
        fills, accepts, first_mask, rejects, eos_ok, eos_bad, path_steps = [], [], [], 0, 0, 0, []
        pc = time.perf_counter_ns
        for pi, path in enumerate(paths):
            gc.disable()
            t0 = pc()
            m = ad.matcher(handle) if (pi == 0 or lib != "llguidance") else None
            if m is None:  # llguidance: the compiled object is the matcher; start a fresh one
                m = ad.compile(regex)
            fill = ad.fill_fn(m)
            ok = True
            local = []
            for i, t in enumerate(path):
                a = pc()
                fill()
                b = pc()
                local.append(b - a)
                if i == 0:
                    first_mask.append((b - t0) / 1e9 + (compile_s if pi == 0 else 0.0))
                if not _bit(row, t):
                    rejects += 1
                    ok = False
                    break
                a = pc()
                acc = ad.accept(m, t)
                accepts.append(pc() - a)
                if not acc:
                    rejects += 1
                    ok = False
                    break
            if ok:
                a = pc()
                fill()
                local.append(pc() - a)
                if any(_bit(row, e) for e in eos):
                    eos_ok += 1
                else:
                    eos_bad += 1
            gc.enable()
            fills.extend(local)
            path_steps.append(len(local))
        _trim()
        after_walk = _status_kb()
        mem_walk = after_walk.get("VmRSS", 0) - before.get("VmRSS", 0)
        conn.send(("walked", fills, accepts, first_mask, rejects, eos_ok, eos_bad, mem_walk))
        # -- uniform samples -----------------------------------------------------------------------
        samples = []
        if n_samples:
            rng = np.random.default_rng(seed)
            for _ in range(n_samples):
                m = ad.matcher(handle) if lib != "llguidance" else ad.compile(regex)
                fill = ad.fill_fn(m)
                seq, done = [], False
                while len(seq) < sample_len:
                    fill()
                    allowed = np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab_size])
                    if len(allowed) == 0:
                        break
                    t = int(allowed[rng.integers(len(allowed))])
                    if t in eos:
                        done = True
                        break
                    if not ad.accept(m, t):
                        break
                    seq.append(t)
                samples.append((seq, done))
        del handle
        conn.send(("sampled", samples))


def _retain(ad, regexes, paths_list, lib):
    """Compile every regex and keep all guides alive: resident-set growth per guide, after the
    compiles and after one walk along each guide's canonical paths (lazy mask caches filled)."""
    _trim()
    before = _status_kb().get("VmRSS", 0)
    keep = []
    for rx, paths in zip(regexes, paths_list):
        try:
            keep.append((ad.compile(rx), paths))
        except Exception:  # noqa: BLE001
            pass
    _trim()
    mid = _status_kb().get("VmRSS", 0)
    matchers = []
    for h, paths in keep:
        for path in paths[:1]:
            m = ad.matcher(h)
            fill = ad.fill_fn(m)
            for t in path:
                fill()
                if not ad.accept(m, t):
                    break
            fill()
            matchers.append(m)
    _trim()
    after = _status_kb().get("VmRSS", 0)
    n = len(keep)
    del keep, matchers
    return n, (mid - before) / max(n, 1), (after - before) / max(n, 1)


class Worker:
    def __init__(self, lib, tok, eos_ids, vocab_size, args):
        self.lib, self.tok, self.eos_ids, self.vocab_size, self.args = lib, tok, eos_ids, vocab_size, args
        self.proc = None
        self.setup_s = None
        self.info = {}
        self.unsupported = None

    def start(self):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=worker_main, args=(self.lib, self.tok, self.eos_ids, self.vocab_size, child), daemon=True
        )
        self.proc.start()
        child.close()
        msg = self._wait(self.args.setup_timeout)
        if msg is None:
            self.unsupported = f"setup did not finish in {self.args.setup_timeout} s"
            self.kill()
        elif msg[0] == "ready":
            if self.setup_s is None:
                self.setup_s, self.info = msg[1], msg[2]
        else:
            self.unsupported = msg[1]
            self.kill()

    def _wait(self, timeout):
        """The next message, or None after ``timeout`` seconds or past the memory limit."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                if self.conn.poll(min(0.2, left)):
                    return self.conn.recv()
            except (EOFError, OSError):
                return ("died", f"worker exited with code {self.proc.exitcode}")
            if not self.proc.is_alive() and not self.conn.poll(0):
                return ("died", f"worker exited with code {self.proc.exitcode}")
            rss = _status_kb(self.proc.pid).get("VmRSS", 0)
            if rss > self.args.max_rss_gb * 1024 * 1024:
                return ("oom", f"resident set past {self.args.max_rss_gb} GB")

    def kill(self):
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.proc = None

    def run(self, regex, paths, seed):
        """One item: a record dict."""
        if self.proc is None:
            self.start()
            if self.proc is None:
                return {"status": "unavailable"}
        self.conn.send(("item", regex, paths, self.args.samples, self.args.sample_len, seed))
        msg = self._wait(self.args.timeout)
        if msg is None:
            self.kill()
            return {"status": "timeout", "compile_s": None}
        if msg[0] in ("died", "oom"):
            self.kill()
            return {"status": msg[0], "error": msg[1]}
        if msg[0] == "compile_error":
            return {"status": "error", "error": msg[1]}
        _, compile_s, mem, desc = msg
        rec = {"status": "ok", "compile_s": compile_s, **mem, **desc}
        msg = self._wait(self.args.walk_timeout)
        if msg is None or msg[0] != "walked":
            self.kill()
            rec["walk_status"] = "timeout" if msg is None else msg[0]
            return rec
        _, fills, accepts, first_mask, rejects, eos_ok, eos_bad, mem_walk = msg
        if fills:
            rec["fill_max_ns"] = max(fills)
            rec["fill_p99_ns"] = pct(fills, 99)
            rec["fill_sum_ns"] = sum(fills)
        rec.update(
            fill_ns=fills, accept_ns=accepts, first_mask_s=first_mask, path_rejects=rejects,
            eos_ok=eos_ok, eos_missing=eos_bad, rss_after_walk_kb=mem_walk,
        )
        msg = self._wait(self.args.walk_timeout)
        if msg is None or msg[0] != "sampled":
            self.kill()
            rec["sample_status"] = "timeout" if msg is None else msg[0]
            return rec
        rec["samples"] = msg[1]
        return rec

    def retain(self, regexes, paths_list, timeout):
        """(guides kept, KB per guide after compile, KB per guide after the walks) or None."""
        if self.proc is None:
            self.start()
            if self.proc is None:
                return None
        self.conn.send(("retain", regexes, paths_list))
        msg = self._wait(timeout)
        if msg is None or msg[0] != "retained":
            self.kill()
            return None
        return msg[1:]

    def stop(self):
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(("stop",))
                self.proc.join(5)
            except (OSError, BrokenPipeError):
                pass
        self.kill()


# ----------------------------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------------------------


def sample_is_canonical(orc, seq):
    """Whether the tokenizer encodes ``seq``'s text as ``seq``; ``None`` when the text ends inside
    a UTF-8 character (it has no encoding to compare)."""
    try:
        orc.decode(seq).decode("utf-8")
    except (UnicodeDecodeError, KeyError):
        return None
    return orc.is_canonical(seq)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def sample_items(n_glaive, n_github, seed, ids=None):
    rows = [r for r in read_jsonl(DATA / "jsonschemabench_regex.jsonl") if r.get("regex")]
    if ids:
        want = set(ids)
        return [r for r in rows if r["id"] in want]
    rows.sort(key=lambda r: r["id"])
    glaive = [r for r in rows if r["subset"] == "Glaiveai2K"]
    github = [r for r in rows if r["subset"].startswith("Github_")]
    rng = random.Random(seed)
    out = rng.sample(glaive, min(n_glaive, len(glaive))) + rng.sample(github, min(n_github, len(github)))
    return out


def canonical_paths(items, oracle_mod, tok, docs_per_schema):
    """{id: [token path, ...]}: canonical encodings of valid documents that the regex matches."""
    import propertok as pt

    instances = {r["id"]: r["instances"] for r in read_jsonl(DATA / "jsonschemabench_valid_instances.jsonl")}
    orc = oracle_mod.Oracle.from_file(tokenizer_path(tok), name=tok)
    out, skipped = {}, {"no_instances": 0, "regex_rejects": 0, "not_representable": 0, "byte_dfa_error": 0}
    for r in items:
        paths = []
        docs = instances.get(r["id"], [])
        if not docs:
            skipped["no_instances"] += 1
        try:
            dfa = pt.ByteDfa(r["regex"])
        except Exception:  # noqa: BLE001
            skipped["byte_dfa_error"] += 1
            out[r["id"]] = []
            continue
        for inst in docs:
            if len(paths) >= docs_per_schema:
                break
            text = json.dumps(inst)
            if not dfa.matches(text.encode("utf-8")):
                skipped["regex_rejects"] += 1
                continue
            ids = orc.canonical(text)
            if orc.decode(ids) != text.encode("utf-8"):
                skipped["not_representable"] += 1
                continue
            paths.append(ids)
        out[r["id"]] = paths
    return out, skipped, orc


# ----------------------------------------------------------------------------------------------
# statistics and tables
# ----------------------------------------------------------------------------------------------


def pct(values, q):
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def fmt_ms(s):
    if s is None:
        return "–"
    ms = s * 1000
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 1 else f"{ms:.2f}"


def fmt_us(ns):
    if ns is None:
        return "–"
    us = ns / 1000
    return f"{us:,.0f}" if us >= 100 else f"{us:.1f}" if us >= 1 else f"{us:.2f}"


def fmt_ratio(r):
    if r is None:
        return "–"
    return f"{r:.3g}×"


def fmt_mb(kb):
    if kb is None:
        return "–"
    return f"{kb / 1024:.1f}"


def group_of(item_id):
    return "glaive" if item_id.startswith("Glaiveai2K/") else "github"


def summarize(records, items, libs):
    """records[lib][id] -> summary per lib and group ('all', 'glaive', 'github')."""
    out = {}
    for lib in libs:
        recs = records.get(lib, {})
        out[lib] = {}
        for group in ("all", "glaive", "github"):
            ids = [r["id"] for r in items if group == "all" or group_of(r["id"]) == group]
            rs = [recs[i] for i in ids if i in recs]
            ok = [r for r in rs if r.get("status") == "ok"]
            comp = [r["compile_s"] for r in ok]
            fills = [x for r in ok for x in r.get("fill_ns", [])]
            accepts = [x for r in ok for x in r.get("accept_ns", [])]
            first = [r["first_mask_s"][0] for r in ok if r.get("first_mask_s")]
            s = {
                "n": len(rs),
                "ok": len(ok),
                "errors": sum(r.get("status") == "error" for r in rs),
                "timeouts": sum(r.get("status") == "timeout" for r in rs),
                "died": sum(r.get("status") in ("died", "oom") for r in rs),
                "compile_median_s": pct(comp, 50),
                "compile_p90_s": pct(comp, 90),
                "compile_p99_s": pct(comp, 99),
                "compile_max_s": max(comp) if comp else None,
                "steps": len(fills),
                "paths": sum(len(r.get("first_mask_s", [])) for r in ok),
                "mask_median_ns": pct(fills, 50),
                "mask_p99_ns": pct(fills, 99),
                "mask_max_ns": max(fills) if fills else None,
                "accept_median_ns": pct(accepts, 50),
                "first_mask_median_s": pct(first, 50),
                "first_mask_p99_s": pct(first, 99),
                "path_rejects": sum(r.get("path_rejects", 0) for r in ok),
                "eos_missing": sum(r.get("eos_missing", 0) for r in ok),
                "rss_delta_median_mb": (pct([r["rss_delta_kb"] for r in ok], 50) or 0) / 1024 if ok else None,
                "peak_delta_median_mb": (
                    pct([r["peak_delta_kb"] for r in ok if r.get("peak_delta_kb") is not None], 50) or 0
                ) / 1024 if ok else None,
                "rss_after_walk_median_mb": (
                    pct([r["rss_after_walk_kb"] for r in ok if "rss_after_walk_kb" in r], 50) or 0
                ) / 1024 if ok else None,
                "self_reported_median_mb": (
                    pct([r["self_reported_bytes"] for r in ok if "self_reported_bytes" in r], 50) / 2**20
                    if any("self_reported_bytes" in r for r in ok) else None
                ),
                "num_states_median": pct([r["num_states"] for r in ok if "num_states" in r], 50),
                "direct_share": (
                    sum(r.get("method") == "direct" for r in ok) / len(ok) if ok and "method" in ok[0] else None
                ),
            }
            samp = [x for r in ok for x in r.get("samples_checked", [])]
            if samp:
                s["samples"] = len(samp)
                s["noncanonical_share"] = sum(1 for x in samp if x is False) / len(samp)
                s["samples_undecodable"] = sum(1 for x in samp if x is None)
            out[lib][group] = s
    return out


def paired_ratios(records, items, ours, peer, group="all"):
    """Ratios on the items both compiled (and walked): compile median, compile p99, mask median, mask p99."""
    a, b = records.get(ours, {}), records.get(peer, {})
    ids = [
        r["id"] for r in items
        if (group == "all" or group_of(r["id"]) == group)
        and a.get(r["id"], {}).get("status") == "ok" and b.get(r["id"], {}).get("status") == "ok"
    ]
    if not ids:
        return None
    ca, cb = [a[i]["compile_s"] for i in ids], [b[i]["compile_s"] for i in ids]
    fa = [x for i in ids for x in a[i].get("fill_ns", [])]
    fb = [x for i in ids for x in b[i].get("fill_ns", [])]
    first_a = [a[i]["first_mask_s"][0] for i in ids if a[i].get("first_mask_s")]
    first_b = [b[i]["first_mask_s"][0] for i in ids if b[i].get("first_mask_s")]
    # Compile plus every mask along the schema's documents (the work a decoder pays per request),
    # on the schemas where both walked the same paths.
    walked = [i for i in ids if "fill_sum_ns" in a[i] and "fill_sum_ns" in b[i] and len(a[i]["fill_ns"]) == len(b[i]["fill_ns"])]
    whole_a = [a[i]["compile_s"] + a[i]["fill_sum_ns"] / 1e9 for i in walked]
    whole_b = [b[i]["compile_s"] + b[i]["fill_sum_ns"] / 1e9 for i in walked]

    def ratio(x, y):
        return x / y if x is not None and y else None

    return {
        "n": len(ids),
        "compile_median": ratio(pct(ca, 50), pct(cb, 50)),
        "compile_p99": ratio(pct(ca, 99), pct(cb, 99)),
        "mask_median": ratio(pct(fa, 50), pct(fb, 50)),
        "mask_p99": ratio(pct(fa, 99), pct(fb, 99)),
        "first_mask_median": ratio(pct(first_a, 50), pct(first_b, 50)),
        "compile_and_masks_median": ratio(pct(whole_a, 50), pct(whole_b, 50)) if walked else None,
    }


def machine_info():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "platform": platform.platform(), "python": platform.python_version()}


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def versions():
    import importlib.metadata as md

    out = {}
    for name in ["propertok", "outlines-core", "llguidance", "xgrammar", "torch", "transformers", "tokenizers", "numpy"]:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    try:
        out["propertok_commit"] = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "rust", "python", "Cargo.toml"],
            capture_output=True, text=True,
        ).stdout.strip()
        out["propertok_worktree_dirty"] = bool(dirty)
    except OSError:
        pass
    try:
        # The extension this run imports (the bench venv's own install, or the checkout's).
        from propertok import _core

        out["propertok_extension"] = _core.__file__
        out["propertok_extension_built"] = datetime.datetime.fromtimestamp(
            Path(_core.__file__).stat().st_mtime
        ).isoformat(timespec="seconds")
    except (ImportError, OSError):
        pass
    return out


def markdown(run):
    lines = []
    add = lines.append
    a = run["args"]
    add(f"Run {run['date']} — command: `{run['command']}`  ")
    add(
        f"Machine: {run['machine']['nproc']} cores, {run['machine']['cpu']}, {run['machine']['platform']}, "
        f"Python {run['machine']['python']}.  "
    )
    add(f"Load (`uptime`) at start: `{run['uptime_start']}`; at end: `{run['uptime_end']}`.  ")
    v = run["versions"]
    add(
        "Versions: " + ", ".join(f"{k} {v[k]}" for k in ["propertok", "outlines-core", "llguidance", "xgrammar",
                                                       "torch", "transformers", "tokenizers", "numpy"] if v.get(k))
        + f"; propertok at commit {v.get('propertok_commit')}"
        + (" (work tree with uncommitted changes)" if v.get("propertok_worktree_dirty") else "")
        + (f", extension built {v['propertok_extension_built']}" if v.get("propertok_extension_built") else "")
        + ".  "
    )
    n_gl = sum(group_of(r["id"]) == "glaive" for r in run["items"])
    add(
        f"Inputs: {len(run['items'])} regexes ({n_gl} Glaiveai2K + {len(run['items']) - n_gl} Github_*, seed {a['seed']}); "
        f"per-compile timeout {a['timeout']} s; up to {a['docs']} documents per schema for mask paths."
    )
    add("")
    for tok, t in run["tokenizers"].items():
        libs = [lib for lib in run["libs"] if lib in t["summary"]]
        add(f"### {TOKENIZERS.get(tok, tok)}")
        add("")
        sk = t["path_skips"]
        add(
            f"Mask paths: {t['num_paths']} canonical token paths, {sum(sum(p) for p in t['paths_by_id'].values())} "
            f"tokens (documents skipped: {sk['regex_rejects']} not matched by the regex, {sk['not_representable']} "
            f"not representable; {sk['no_instances']} schemas without documents)."
        )
        add("")
        add("| library | one-time setup | notes |")
        add("| --- | --- | --- |")
        for lib in libs:
            w = t["workers"][lib]
            note = w.get("unsupported") or ""
            info = w.get("info") or {}
            if "tokenizer_dfa" in info:
                d = info["tokenizer_dfa"]
                note = (f"tokenizer DFA build {d.get('build_seconds', 0):.2f} s "
                        f"({info.get('tokenizer_dfa_construction')}, {int(d.get('num_classes', 0))} classes)")
                if "cache_load_s" in info:
                    note += f"; from the disk cache: {1000 * info['cache_load_s']:.0f} ms ({info.get('cache_status')})"
                if "cache_to_first_guide_s" in info:
                    note += f", fresh Compiler to its first guide {1000 * info['cache_to_first_guide_s']:.0f} ms"
            if note.startswith("NotImplementedError"):
                note = "not supported yet (canonical methods refuse byte-level BPE with a pre-tokenizer: issue 4)"
            add(f"| {lib} | {fmt_ms(w.get('setup_s'))} ms | {note} |")
        add("")
        for group in ("glaive", "github", "all"):
            label = {"glaive": "Glaiveai2K", "github": "Github_*", "all": "all"}[group]
            add(f"**Compile, {label}** (ms; percentiles over successful compiles; errors and timeouts counted apart)")
            add("")
            add("| library | ok / n | errors | timeouts | median | p90 | p99 | max | time to first mask, median |")
            add("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
            for lib in libs:
                s = t["summary"][lib][group]
                if t["workers"][lib].get("unsupported") and not s["ok"]:
                    add(f"| {lib} | not supported | | | | | | | |")
                    continue
                add(
                    f"| {lib} | {s['ok']} / {s['n']} | {s['errors']} | {s['timeouts'] + s['died']} | "
                    f"{fmt_ms(s['compile_median_s'])} | {fmt_ms(s['compile_p90_s'])} | {fmt_ms(s['compile_p99_s'])} | "
                    f"{fmt_ms(s['compile_max_s'])} | {fmt_ms(s['first_mask_median_s'])} |"
                )
            add("")
        add("**Mask per step** (µs, one row of a preallocated int32 bitmask, along canonical paths; "
            "Python call included)")
        add("")
        add("| library | inputs | steps | median | p99 | max | accept median | canonical tokens refused | EOS missing at end |")
        add("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for lib in libs:
            for group in ("glaive", "github", "all"):
                s = t["summary"][lib][group]
                if not s["ok"]:
                    continue
                add(
                    f"| {lib} | {group} | {s['steps']} | {fmt_us(s['mask_median_ns'])} | {fmt_us(s['mask_p99_ns'])} | "
                    f"{fmt_us(s['mask_max_ns'])} | {fmt_us(s['accept_median_ns'])} | {s['path_rejects']} | "
                    f"{s['eos_missing']} |"
                )
        add("")
        spikes = []
        for lib in libs:
            recs = t.get("records", {}).get(lib, {})
            worst = sorted(((rec.get("fill_max_ns", 0), i) for i, rec in recs.items() if rec.get("fill_max_ns")),
                           reverse=True)[:2]
            if worst:
                spikes.append(f"{lib} " + ", ".join(f"`{i}` {fmt_us(ns)} µs" for ns, i in worst))
        if spikes:
            add("Largest single mask times: " + "; ".join(spikes) + ".")
            add("")
        add("**Memory during compile, all inputs** (MB, medians of the worker's resident-set growth: after the compile "
            "without trimming, so freed temporaries count; peak (`VmHWM`); after the walks and `malloc_trim`, which "
            "undercounts when the allocator reuses pages freed by earlier items)")
        add("")
        add("| library | after compile | peak during compile | after the mask walks | self-reported | states (median) |")
        add("| --- | --- | --- | --- | --- | --- |")
        for lib in libs:
            s = t["summary"][lib]["all"]
            if not s["ok"]:
                continue
            selfrep = "–" if s["self_reported_median_mb"] is None else f"{s['self_reported_median_mb']:.2f}"
            states = "–" if s["num_states_median"] is None else f"{s['num_states_median']:.0f}"
            add(
                f"| {lib} | {s['rss_delta_median_mb']:.1f} | {s['peak_delta_median_mb']:.1f} | "
                f"{s['rss_after_walk_median_mb']:.1f} | {selfrep} | {states} |"
            )
        add("")
        ret = t.get("retained") or {}
        if ret:
            add("**Memory retained per guide** (MB: resident-set growth with the first "
                f"{next(iter(ret.values()))['guides']} Glaiveai2K guides alive at once, after `malloc_trim`, divided "
                "by their number; then after one canonical path walked through each, which fills lazy mask caches)")
            add("")
            add("| library | guides | per guide after compile | per guide after the walks |")
            add("| --- | --- | --- | --- |")
            for lib in libs:
                if lib in ret:
                    r = ret[lib]
                    add(f"| {lib} | {r['guides']} | {r['kb_per_guide'] / 1024:.2f} | {r['kb_per_guide_after_walk'] / 1024:.2f} |")
            add("")
        if any("noncanonical_share" in t["summary"][lib]["all"] for lib in libs):
            add(f"**Uniformly sampled token sequences that are not canonical** ({a['samples']} per regex, "
                f"≤ {a['sample_len']} tokens; undecodable = ends inside a UTF-8 character, not counted)")
            add("")
            add("| library | sequences | not canonical | undecodable |")
            add("| --- | --- | --- | --- |")
            for lib in libs:
                s = t["summary"][lib]["all"]
                if "noncanonical_share" in s:
                    add(f"| {lib} | {s['samples']} | {100 * s['noncanonical_share']:.1f} % | {s['samples_undecodable']} |")
            add("")
        add("**Ratios propertok / peer** (same run, paired on the regexes both compiled; < 1 means propertok is faster)")
        add("")
        add(
            "| propertok | peer | group | regexes | compile median | compile p99 | mask median | mask p99 | "
            "first mask median | compile + document masks, median |"
        )
        add("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for ours in [lib for lib in libs if lib in OURS]:
            for peer in [lib for lib in libs if lib in PEERS]:
                for group in ("glaive", "github", "all"):
                    r = t["ratios"].get(f"{ours}|{peer}|{group}")
                    if not r:
                        continue
                    add(
                        f"| {ours} | {peer} | {group} | {r['n']} | {fmt_ratio(r['compile_median'])} | "
                        f"{fmt_ratio(r['compile_p99'])} | {fmt_ratio(r['mask_median'])} | {fmt_ratio(r['mask_p99'])} | "
                        f"{fmt_ratio(r['first_mask_median'])} | {fmt_ratio(r.get('compile_and_masks_median'))} |"
                    )
        add("")
        slow = t.get("slowest", [])
        if slow:
            add("Slowest or failed compiles: " + "; ".join(slow) + ".")
            add("")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizers", default="mistral7b,llama3")
    ap.add_argument("--prefetch-seconds", type=float, default=0.001,
                    help="propertok-prefetch's Compiler(prefetch_seconds=...) (default 0.001)")
    default_libs = [lib for lib in LIBS if lib != "propertok-prefetch"]
    ap.add_argument("--libs", default=",".join(default_libs), help="subset of " + ",".join(LIBS))
    ap.add_argument("--cache-dir", default="",
                    help="propertok's Compiler(cache_dir=...) in the measured workers (default: none, a cold "
                         "tokenizer DFA build and every slice group set walked in the run)")
    ap.add_argument("--busy-thread", action="store_true",
                    help="run a spinning Python thread beside each library's measured work (after setup)")
    ap.add_argument("--glaive", type=int, default=200, help="Glaiveai2K regexes (default 200)")
    ap.add_argument("--github", type=int, default=100, help="Github_* regexes (default 100)")
    ap.add_argument("--ids", default="", help="comma-separated schema ids instead of the sample")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--docs", type=int, default=2, help="documents (token paths) per schema")
    ap.add_argument("--timeout", type=float, default=30.0, help="per-compile timeout, seconds")
    ap.add_argument("--walk-timeout", type=float, default=60.0)
    ap.add_argument("--setup-timeout", type=float, default=300.0)
    ap.add_argument("--max-rss-gb", type=float, default=8.0, help="kill a worker past this resident set")
    ap.add_argument("--samples", type=int, default=4, help="uniform token sequences per regex and library (0: off)")
    ap.add_argument("--sample-len", type=int, default=32)
    ap.add_argument("--retain", type=int, default=100,
                    help="memory phase: keep this many Glaiveai2K guides alive at once (0: off)")
    ap.add_argument("--retain-timeout", type=float, default=900.0)
    ap.add_argument("--render", default="", help="only re-render the markdown of a saved --json file")
    ap.add_argument("--json", default=str(REPO / "benches" / "results" / "compare_latest.json"))
    ap.add_argument("--markdown", default=str(REPO / "benches" / "results" / "compare_latest.md"))
    args = ap.parse_args()
    os.environ["PROPERTOK_BENCH_PREFETCH_SECONDS"] = str(args.prefetch_seconds)
    os.environ["PROPERTOK_BENCH_CACHE_DIR"] = args.cache_dir
    os.environ["PROPERTOK_BENCH_BUSY_THREAD"] = "1" if args.busy_thread else ""

    if args.render:
        print(markdown(json.loads(Path(args.render).read_text(encoding="utf-8"))))
        return
    libs = [x for x in args.libs.split(",") if x]
    for lib in libs:
        if lib not in LIBS:
            ap.error(f"unknown library {lib!r}")
    items = sample_items(args.glaive, args.github, args.seed, [x for x in args.ids.split(",") if x])
    oracle_mod = load_oracle_module()
    import propertok as pt

    run = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": " ".join(["python", "benches/compare.py"] + sys.argv[1:]),
        "args": vars(args),
        "machine": machine_info(),
        "uptime_start": uptime(),
        "versions": versions(),
        "libs": libs,
        "items": [{"id": r["id"], "subset": r["subset"], "regex_len": r["regex_len"]} for r in items],
        "tokenizers": {},
    }
    print(f"{len(items)} regexes; libraries: {', '.join(libs)}; {run['uptime_start']}", flush=True)

    for tok in [x for x in args.tokenizers.split(",") if x]:
        v = pt.Vocabulary.from_file(str(tokenizer_path(tok)))
        eos_ids, vocab_size = list(v.eos_token_ids), v.vocab_size
        t0 = time.perf_counter()
        paths_by_id, skips, orc = canonical_paths(items, oracle_mod, tok, args.docs)
        print(f"[{tok}] {sum(map(len, paths_by_id.values()))} token paths in {time.perf_counter() - t0:.1f} s; "
              f"skipped {skips}", flush=True)
        workers = {}
        for lib in libs:
            w = Worker(lib, tok, eos_ids, vocab_size, args)
            w.start()
            workers[lib] = w
            print(f"[{tok}] {lib}: setup {w.setup_s if w.setup_s is None else round(w.setup_s, 3)} s "
                  f"{(w.unsupported or '')[:120]}", flush=True)
        records = {lib: {} for lib in libs}
        t_start = time.perf_counter()
        for k, r in enumerate(items):
            line = []
            for lib in libs:
                w = workers[lib]
                if w.unsupported and w.setup_s is None:
                    continue
                seed = (args.seed * 1_000_003 + k) & 0xFFFFFFFF
                rec = w.run(r["regex"], paths_by_id.get(r["id"], []), seed)
                samples = rec.pop("samples", [])
                if samples:
                    rec["samples_checked"] = [sample_is_canonical(orc, seq) for seq, _ in samples]
                records[lib][r["id"]] = rec
                c = rec.get("compile_s")
                line.append(f"{lib}={'%.1fms' % (c * 1000) if c is not None else rec['status']}")
            print(f"[{tok}] {k + 1}/{len(items)} {r['id']} (len {r['regex_len']}): {' '.join(line)}", flush=True)
        retained = {}
        if args.retain:
            glaive = [r for r in items if group_of(r["id"]) == "glaive"][: args.retain]
            for lib in libs:
                w = workers[lib]
                if w.unsupported and w.setup_s is None:
                    continue
                got = w.retain([r["regex"] for r in glaive], [paths_by_id.get(r["id"], []) for r in glaive],
                               args.retain_timeout)
                if got:
                    retained[lib] = {"guides": got[0], "kb_per_guide": got[1], "kb_per_guide_after_walk": got[2]}
                print(f"[{tok}] {lib}: retained {retained.get(lib)}", flush=True)
        for w in workers.values():
            w.stop()
        summary = summarize(records, items, libs)
        ratios = {}
        for ours in [lib for lib in libs if lib in OURS]:
            for peer in [lib for lib in libs if lib in PEERS]:
                for group in ("glaive", "github", "all"):
                    rr = paired_ratios(records, items, ours, peer, group)
                    if rr:
                        ratios[f"{ours}|{peer}|{group}"] = rr
        slowest = []
        for lib in libs:
            bad = [(i, rec) for i, rec in records[lib].items() if rec.get("status") not in ("ok", "unavailable")]
            for i, rec in bad[:5]:
                slowest.append(f"{lib} {rec['status']} on `{i}`" + (f" ({rec['error'][:80]})" if rec.get("error") else ""))
            oks = sorted(((rec["compile_s"], i) for i, rec in records[lib].items() if rec.get("status") == "ok"),
                         reverse=True)
            if oks:
                slowest.append(f"{lib} slowest `{oks[0][1]}` {fmt_ms(oks[0][0])} ms")
        run["tokenizers"][tok] = {
            "eos_ids": eos_ids,
            "vocab_size": vocab_size,
            "path_skips": skips,
            "num_paths": sum(map(len, paths_by_id.values())),
            "paths_by_id": {i: [len(p) for p in ps] for i, ps in paths_by_id.items()},
            "workers": {lib: {"setup_s": w.setup_s, "unsupported": w.unsupported, "info": w.info}
                        for lib, w in workers.items()},
            "summary": summary,
            "retained": retained,
            "ratios": ratios,
            "slowest": slowest,
            "seconds": time.perf_counter() - t_start,
            "records": {
                lib: {i: {k: v for k, v in rec.items() if k not in ("fill_ns", "accept_ns")} for i, rec in recs.items()}
                for lib, recs in records.items()
            },
        }
    run["uptime_end"] = uptime()
    md = markdown(run)
    for path, text in ((args.json, json.dumps(run, indent=1, default=str)), (args.markdown, md)):
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text + "\n", encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()
