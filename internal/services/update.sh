#!/bin/sh
# Refreshes etc-services from the machine's /etc/services (Debian netbase)
# and records the netbase version it came from. Run with go generate.
set -eu
cd "$(dirname "$0")"
cp /etc/services etc-services
dpkg-query -W -f '${Package} ${Version}\n' netbase > etc-services.version
