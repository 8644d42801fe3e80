#!/usr/bin/env bash
# Installs what Leasehold needs from the system's packages and is not an npm dependency:
# Chromium (Playwright cannot download its own browser here) and, if no Redis answers and none
# is installed, redis-server. Idempotent: does nothing when both are there.
set -euo pipefail

need=()
if [ -z "${BROWSER_EXECUTABLE:-}" ] && ! command -v chromium >/dev/null 2>&1 \
  && ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1; then
  need+=(chromium)
fi
if ! command -v redis-server >/dev/null 2>&1 && [ -z "${REDIS_URL:-}" ]; then
  need+=(redis-server)
fi
if [ ${#need[@]} -eq 0 ]; then
  echo "setup: Chromium and Redis are available."
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
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "setup: done."
