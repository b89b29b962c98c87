"""Adapters from propertok guides to inference libraries.

Each adapter lives in its own submodule and imports its library only there, so ``import
propertok`` never imports transformers or torch:

* ``propertok.integrations.transformers``: a ``LogitsProcessor`` for ``model.generate``.
* ``propertok.integrations.vllm``: a vLLM V1 logits processor (entry point
  ``vllm.logits_processors``), per-request constraints in ``SamplingParams.extra_args``.
* ``propertok.integrations.sglang``: an SGLang grammar backend registered as ``propertok``.

Other engines can use the bitmask functions of ``propertok`` directly (see docs/engines.md).
"""
