"""The propertok processor with its ``apply`` timed, for the overhead measurement.

Loaded by the engine core as ``timed_processor:TimedPropertokLogitsProcessor``. Every call
records (start, duration, constrained rows, batch rows); the records go to the JSON file named by
``$PROPERTOK_TIMINGS_OUT`` every 16 calls (the engine core is a separate process).
"""

from __future__ import annotations

import json
import os
import time

from propertok.integrations.vllm import PropertokLogitsProcessor


class TimedPropertokLogitsProcessor(PropertokLogitsProcessor):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._records = []
        self._out = os.environ.get("PROPERTOK_TIMINGS_OUT")

    def apply(self, logits, ctx=None):
        start = time.perf_counter()
        constrained = sum(1 for i in self.rows if i < logits.shape[0])
        out = super().apply(logits)
        self._records.append((start, time.perf_counter() - start, constrained, int(logits.shape[0])))
        if self._out and len(self._records) % 16 == 0:
            tmp = self._out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(self._records, f)
            os.replace(tmp, self._out)
        return out
