#!/usr/bin/env bash
# Summary: the image's smoke check, failing (tests)
echo "smoke: CUDA not visible" >&2
exit 1
