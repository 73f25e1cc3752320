"""The detector (torch): XLS-R's kept layers, the layer weights, the pooling and the head
(hearsay.detector.model), its packed attention (packing) and the stable sigmoid every scorer
turns a logit into a score with (logits: numpy only, the deploy scorer imports it).

This package's __init__ imports nothing: `hearsay.detector.logits` stays torch-free.
"""
