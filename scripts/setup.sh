#!/usr/bin/env bash
# Installs what Leasehold needs from the system's packages and is not an npm dependency:
# Chromium and its headless shell (Playwright cannot download its own browser here), redis-server if none is installed,
# and the deployment checks' tools: promtool (Debian's prometheus package, which also
# brings the server the dashboard test scrapes with), docker-compose (validates the compose file)
# and kubectl (builds the Kubernetes manifests; Debian's kubernetes-client package); curl and jq
# for the README's examples (a test runs them as written).
# Idempotent: does nothing when all are there.
set -euo pipefail

need=()
if [ -z "${BROWSER_EXECUTABLE:-}" ] && ! command -v chromium >/dev/null 2>&1 \
  && ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1; then
  need+=(chromium)
fi
# Chromium's headless shell: the same engine without the desktop browser, which a headless browser
# worker (and the tests) launch first where it is installed — under half the CPU per page. Wanted
# where apt-get can bring it; the full browser serves where it cannot.
if [ -z "${BROWSER_EXECUTABLE:-}" ] && ! command -v chromium-headless-shell >/dev/null 2>&1 \
  && [ ! -x /usr/lib/chromium/chromium-headless-shell ] && command -v apt-get >/dev/null 2>&1; then
  need+=(chromium-headless-shell)
fi
if ! command -v redis-server >/dev/null 2>&1 && [ -z "${REDIS_URL:-}" ]; then
  need+=(redis-server)
fi
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
# The README's examples (run as written by a test) use curl and jq.
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v jq >/dev/null 2>&1 || need+=(jq)
if [ ${#need[@]} -eq 0 ]; then
  echo "setup: Chromium, Redis, the deployment checks' tools, curl and jq are available."
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: please install ${need[*]} with your system's package manager (or set BROWSER_EXECUTABLE / REDIS_URL)." >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
    echo "setup: run as root: apt-get install -y ${need[*]}" >&2
    exit 1
  fi
fi
echo "setup: installing ${need[*]} from Debian's packages"
"${sudo[@]}" apt-get update -qq
# The prometheus package would start its own server; the fleet's checks start theirs when asked.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee /usr/sbin/policy-rc.d >/dev/null
  "${sudo[@]}" chmod +x /usr/sbin/policy-rc.d
  trap '"${sudo[@]}" rm -f /usr/sbin/policy-rc.d' EXIT
fi
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "setup: done."
