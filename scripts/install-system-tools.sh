#!/usr/bin/env bash
# System tools some features and tests use, from Debian's packages:
#   graphviz  `dot`, which renders `tracec dump --format dot|html`;
#   chromium  a headless browser the graph-view test opens the HTML page in.
# Safe to run again (apt-get skips what is installed); uses sudo only when
# not root.
set -euo pipefail
PKGS=(graphviz chromium)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "system tools already installed: ${PKGS[*]}"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
