"""Token bitmasks in the xgrammar / llguidance convention, for numpy and (optionally) torch.

A bitmask is an ``int32`` array of shape ``(batch, ceil(vocab_size / 32))``: token ``i`` is allowed
in row ``r`` when bit ``i % 32`` of word ``i // 32`` is set (little-endian bit order inside the
32-bit word). Engines that already speak this convention (vLLM, SGLang, TensorRT-LLM via xgrammar or
llguidance) can use propertok without changes.

torch is never imported unless the caller asks for a torch tensor (``backend="torch"``); a torch
tensor passed in is recognised through ``sys.modules``, since a tensor cannot exist unless torch was
imported already.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

import numpy as np

__all__ = ["allocate_token_bitmask", "apply_token_bitmask_inplace", "fill_next_token_bitmask"]

_BACKENDS = ("numpy", "torch")


def allocate_token_bitmask(batch_size: int, vocab_size: int, *, backend: str = "numpy") -> Any:
    """A ``(batch_size, ceil(vocab_size / 32))`` int32 bitmask with every token allowed (-1).

    ``backend="numpy"`` (default) returns a ``numpy.ndarray``; ``backend="torch"`` a CPU
    ``torch.Tensor`` (ImportError when torch is not installed).
    """
    _check_positive_int("batch_size", batch_size)
    _check_positive_int("vocab_size", vocab_size)
    shape = (batch_size, _num_words(vocab_size))
    if backend == "numpy":
        return np.full(shape, -1, dtype=np.int32)
    if backend == "torch":
        try:
            import torch
        except ImportError as e:
            raise ImportError("backend='torch' needs PyTorch: pip install torch") from e
        return torch.full(shape, -1, dtype=torch.int32)
    raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")


def fill_next_token_bitmask(matcher: Any, bitmask: Any, index: int = 0) -> None:
    """Write ``matcher``'s allowed next tokens into row ``index`` of ``bitmask``.

    ``bitmask``: int32, C-contiguous, shape ``(batch, words)`` (a 1-D ``(words,)`` array counts as
    one row), a numpy array or a torch tensor. A CPU tensor is filled in place through a numpy view
    of its memory (no copy); a CUDA tensor gets a CPU row that is then copied to the device.
    """
    torch = _torch_if_tensor(bitmask)
    if torch is not None:
        if bitmask.dtype != torch.int32:
            raise ValueError(f"bitmask must have dtype torch.int32, got {bitmask.dtype}")
        rows = _rows("bitmask", bitmask, bitmask.dim())
        _check_index(index, rows.shape[0])
        if rows.device.type == "cpu":
            if not rows.is_contiguous():
                raise ValueError("bitmask must be contiguous (call .contiguous() on it first)")
            matcher.fill_next_token_bitmask(rows.numpy(), index)
        else:
            row = np.empty((1, rows.shape[1]), dtype=np.int32)
            matcher.fill_next_token_bitmask(row, 0)
            rows[index].copy_(torch.from_numpy(row[0]))
        return
    if not isinstance(bitmask, np.ndarray):
        raise TypeError(_not_an_array("bitmask", bitmask))
    if bitmask.dtype != np.int32:
        raise ValueError(f"bitmask must have dtype int32, got {bitmask.dtype}")
    if not bitmask.flags.c_contiguous:
        raise ValueError("bitmask must be C-contiguous (use numpy.ascontiguousarray)")
    if not bitmask.flags.writeable:
        raise ValueError("bitmask is read-only")
    rows = _rows("bitmask", bitmask, bitmask.ndim)
    _check_index(index, rows.shape[0])
    matcher.fill_next_token_bitmask(rows, index)


def apply_token_bitmask_inplace(
    logits: Any, bitmask: Any, vocab_size: Optional[int] = None
) -> None:
    """Set the logits of tokens the bitmask disallows to ``-inf``, in place.

    ``logits``: float, shape ``(V',)`` or ``(batch, V')``, a numpy array or a torch tensor (CPU or
    CUDA). ``bitmask``: int32 (or uint32) words, ``(words,)`` or ``(batch, words)`` with the same
    batch as the logits, numpy or torch. The mask covers ``vocab_size`` tokens (default
    ``32 * words``); bits past the logits width are ignored and logits past the mask's width are
    set to ``-inf`` (a token the mask says nothing about is never allowed; xgrammar leaves those
    unchanged).
    """
    torch = _torch_if_tensor(logits)
    if torch is not None:
        _apply_torch(torch, logits, bitmask, vocab_size)
        return
    if not isinstance(logits, np.ndarray):
        raise TypeError(_not_an_array("logits", logits))
    if logits.dtype.kind != "f":
        raise ValueError(f"logits must be floating point, got dtype {logits.dtype}")
    if not logits.flags.writeable:
        raise ValueError("logits is read-only")
    logit_rows = _rows("logits", logits, logits.ndim)
    words = _bitmask_as_numpy(bitmask)
    mask_rows = _rows("bitmask", words, words.ndim)
    _check_same_batch(logit_rows.shape[0], mask_rows.shape[0])
    width = _mask_width(mask_rows.shape[1], vocab_size)
    n = min(width, logit_rows.shape[1])
    words_u32 = np.ascontiguousarray(mask_rows).view(np.uint32).astype("<u4", copy=False)
    allowed = np.unpackbits(words_u32.view(np.uint8), axis=-1, bitorder="little")[:, :n]
    head = logit_rows[:, :n]
    head[allowed == 0] = -np.inf
    logit_rows[:, width:] = -np.inf


def _apply_torch(torch: Any, logits: Any, bitmask: Any, vocab_size: Optional[int]) -> None:
    """torch version of :func:`apply_token_bitmask_inplace`: unpacks the bits on the logits'
    device, so a CUDA step stays on the GPU apart from a small mask upload."""
    if not logits.is_floating_point():
        raise ValueError(f"logits must be floating point, got dtype {logits.dtype}")
    if _torch_if_tensor(bitmask) is not None:
        if bitmask.dtype != torch.int32:
            raise ValueError(f"bitmask must have dtype torch.int32, got {bitmask.dtype}")
        words = bitmask
    else:
        host = np.ascontiguousarray(_bitmask_as_numpy(bitmask)).view(np.int32)
        # torch.from_numpy warns on read-only memory (Guide.mask views are read-only): copy those.
        words = torch.from_numpy(host if host.flags.writeable else host.copy())
    logit_rows = _rows("logits", logits, logits.dim())
    mask_rows = _rows("bitmask", words, words.dim())
    _check_same_batch(logit_rows.shape[0], mask_rows.shape[0])
    width = _mask_width(mask_rows.shape[1], vocab_size)
    n = min(width, logit_rows.shape[1])
    # Only the words that cover the first n logits; a blocking copy, so the caller may refill a
    # (possibly pinned) CPU bitmask as soon as this returns.
    mask_rows = mask_rows[:, : _num_words(n)].to(device=logits.device)
    shifts = torch.arange(32, dtype=torch.int32, device=logits.device)
    bits = (mask_rows.unsqueeze(-1) >> shifts) & 1
    bits = bits.reshape(mask_rows.shape[0], 32 * mask_rows.shape[1])
    logit_rows[:, :n].masked_fill_(bits[:, :n] == 0, float("-inf"))
    if logit_rows.shape[1] > width:
        logit_rows[:, width:].fill_(float("-inf"))


def _torch_if_tensor(x: Any) -> Any:
    """The torch module when ``x`` is a torch tensor, else None (never imports torch)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return torch
    return None


def _bitmask_as_numpy(bitmask: Any) -> np.ndarray:
    """A numpy view (or CPU copy, for a device tensor) of int32/uint32 bitmask words."""
    torch = _torch_if_tensor(bitmask)
    if torch is not None:
        if bitmask.dtype != torch.int32:
            raise ValueError(f"bitmask must have dtype torch.int32, got {bitmask.dtype}")
        return bitmask.detach().cpu().numpy()
    if not isinstance(bitmask, np.ndarray):
        raise TypeError(_not_an_array("bitmask", bitmask))
    if bitmask.dtype not in (np.dtype(np.int32), np.dtype(np.uint32)):
        raise ValueError(f"bitmask must have dtype int32 (or uint32), got {bitmask.dtype}")
    return bitmask


def _not_an_array(name: str, value: Any) -> str:
    return f"{name} must be a numpy array or a torch tensor, got {type(value).__name__}"


def _rows(name: str, array: Any, ndim: int) -> Any:
    """``array`` as 2-D rows: a 1-D array is one row (a view, never a copy)."""
    if ndim == 2:
        return array
    if ndim == 1:
        return array[None, :]
    raise ValueError(f"{name} must be 1-D or 2-D (batch, ...), got {ndim} dimensions")


def _mask_width(num_words: int, vocab_size: Optional[int]) -> int:
    """How many token ids the mask describes."""
    if vocab_size is None:
        return 32 * num_words
    _check_positive_int("vocab_size", vocab_size)
    if vocab_size > 32 * num_words:
        raise ValueError(
            f"vocab_size={vocab_size} needs {_num_words(vocab_size)} words per row, "
            f"the bitmask has {num_words}"
        )
    return vocab_size


def _check_same_batch(logits_batch: int, mask_batch: int) -> None:
    if logits_batch != mask_batch:
        raise ValueError(
            f"batch mismatch: logits have {logits_batch} row(s), the bitmask {mask_batch}"
        )


def _check_index(index: int, batch: int) -> None:
    if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
        raise TypeError(f"index must be an int, got {type(index).__name__}")
    if not 0 <= index < batch:
        raise ValueError(f"index {index} out of range for a bitmask of {batch} row(s)")


def _check_positive_int(name: str, value: Any) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")


def _num_words(vocab_size: int) -> int:
    return (int(vocab_size) + 31) // 32
