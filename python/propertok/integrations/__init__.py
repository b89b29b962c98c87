"""Adapters from propertok guides to inference libraries.

Each adapter lives in its own submodule and imports its library only there, so ``import
propertok`` never imports transformers or torch:

* ``propertok.integrations.transformers``: a ``LogitsProcessor`` for ``model.generate``.

Engines with their own structured-output backend (vLLM, SGLang, TensorRT-LLM) need no adapter:
they use the bitmask functions of ``propertok`` directly (see docs/engines.md).
"""
