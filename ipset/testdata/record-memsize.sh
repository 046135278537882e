#!/usr/bin/env bash
# Records `ipset list` of memsize.restore (written by
# `go test -run TestWriteMemsizeScenario . -args -write-memsize`) from the
# real kernel for TestGoldenMemsize: exact "Size in memory", hashsize after
# resizes, bucketsize and member (bucket) order. Run as root.
set -euo pipefail
cd "$(dirname "$0")"
ns="pw-ipset-msrec-$$"
ip netns add "$ns"
trap 'ip netns del "$ns"' EXIT
ip netns exec "$ns" ipset restore < memsize.restore
ip netns exec "$ns" ipset list > memsize.golden
ip netns exec "$ns" ipset destroy
