"""Adapters that plug SplitZip into serving engines, one module per engine:

    splitzip.integrations.vllm      SplitZipConnector, a vLLM v1 KV connector (KVConnectorBase_V1)
    splitzip.integrations.sglang    SplitZipBackend, a P/D compression backend over SGLang's staging buffer
    splitzip.integrations.lmcache   SplitZipSerializer / SplitZipDeserializer and the "splitzip" serde factory
    splitzip.integrations.transport where the vLLM connector puts its compressed KV (in-process, shared storage, UCX)
    splitzip.integrations.nixl      NixlStore, the same store over NIXL between two processes (host or GPU memory)

Nothing here is imported by ``import splitzip``, and no module imports its engine until it is itself imported: each
resolves the engine's base classes when it is loaded and, where the engine is not installed, falls back to a minimal
local definition of the same interface, so the adapters can be used and tested without the engine.
docs/INTEGRATION.md has the configuration line, the costs and the savings of each.
"""
