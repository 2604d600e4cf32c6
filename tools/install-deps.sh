#!/usr/bin/env bash
# Installs what cohort needs to build, test and benchmark, from Debian's packages.
# Only packages that are missing are installed; run as root (or with sudo available).
set -euo pipefail

packages=(
  meson ninja-build pkg-config g++ git
  libucx-dev ucx-utils
  catch2 libspdlog-dev libfmt-dev libcli11-dev libdlpack-dev libbenchmark-dev nlohmann-json3-dev
  openmpi-bin libopenmpi-dev libgloo-dev
  python3 python3-dev python3-numpy procps cmake pybind11-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: everything is installed"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
