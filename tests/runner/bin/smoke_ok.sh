#!/usr/bin/env bash
# Summary: the image's smoke check, passing (tests; the real one is container/trainer/smoke_check.sh)
echo "smoke: ok"
