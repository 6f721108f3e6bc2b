#!/usr/bin/env bash
# Installs the Debian packages Collc needs (only the missing ones), then
# configures and builds it with CMake and Ninja. Sourced by main.sh and
# test.sh; safe to run again (quick when everything is in place).
#
#   BUILD_DIR   build directory (default: build)
#   BUILD_TYPE  CMake build type (default: RelWithDebInfo)
#   CMAKE_ARGS  extra CMake arguments, e.g. -DCOLL_ENABLE_CUDA=OFF
set -euo pipefail

COLL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$COLL_ROOT/build}"
BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}"

COLL_PACKAGES=(
  cmake ninja-build g++ ccache python3 clang-format
  antlr4 libantlr4-runtime-dev
  llvm-16-dev llvm-16-tools libzstd-dev zlib1g-dev
  googletest libgtest-dev libgmock-dev
  openmpi-bin libopenmpi-dev libgloo-dev libucx-dev
  python3-torch libtorch-dev python3-dev pybind11-dev
  chromium
)

coll_install_packages() {
  local missing=()
  for pkg in "${COLL_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  echo "setup: installing ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

coll_build() {
  # ccache: paths relative to the checkout, so a fresh clone elsewhere still
  # hits the cache.
  export CCACHE_BASEDIR="$COLL_ROOT"
  export CCACHE_NOHASHDIR=1
  local extra=()
  if [ -n "${CMAKE_ARGS:-}" ]; then
    read -r -a extra <<<"$CMAKE_ARGS"
  fi
  cmake -S "$COLL_ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
    ${extra[@]+"${extra[@]}"} >/dev/null
  cmake --build "$BUILD_DIR"
}

coll_install_packages
coll_build
