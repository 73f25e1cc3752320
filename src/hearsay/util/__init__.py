"""Small utilities any module may import: config (strict JSON -> frozen configs), files (atomic
writes, strict JSON), hashing (sha256, SHA256SUMS, the git sha) and progress (a stage's progress
lines). Each is stdlib (+ pydantic for config) and imports no other hearsay module.
"""
