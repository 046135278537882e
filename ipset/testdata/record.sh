#!/usr/bin/env bash
# Records the real kernel's ipset behaviour for the golden tests in
# ../golden_test.go: loads scenario.restore into a fresh network namespace,
# then writes `ipset save`, `ipset list` and the exit status of
# `ipset test` for every line of probes.txt. Run as root.
set -euo pipefail
cd "$(dirname "$0")"
ns="pw-ipset-rec-$$"
ip netns add "$ns"
trap 'ip netns del "$ns"' EXIT
run() { ip netns exec "$ns" "$@"; }
run ipset restore < scenario.restore
run ipset save > save.golden
run ipset list > list.golden
while read -r set elem; do
	rc=0
	run ipset test "$set" "$elem" > /dev/null 2>&1 || rc=$?
	printf '%s %s %d\n' "$set" "$elem" "$rc"
done < probes.txt > probes.golden
ipset version | head -1 > version.golden
