#!/usr/bin/env bash
# Installs what building and testing splitzip needs on Debian 12 / Ubuntu: only Debian packages.
# Does nothing for packages already present, so it is cheap to call again. Needs root (or sudo) for apt-get.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git
      libxxhash-dev libgtest-dev googletest libcli11-dev nlohmann-json3-dev
      libzstd-dev liblz4-dev libucx-dev
      clang-14 libclang-rt-14-dev
      python3 python3-venv python3-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "deps: ok"
