"""The scoring engines: what runs a model over prepared waves. cpu_engine (onnxruntime on the
CPUs this process may use; numpy only, the deploy image's), torch_engine (a detector's logits,
parity A and B) and feed (the next batches' inputs prepared by worker processes).

This package's __init__ imports nothing: `hearsay.engines.cpu_engine` stays torch-free.
"""
