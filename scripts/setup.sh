#!/usr/bin/env bash
# Installs the Debian packages the build needs (Lua 5.4 and SQLite static
# archives, CMake, Ninja) if they are missing.  The CUDA toolkit (nvcc,
# NVRTC headers and library) must already be installed.
set -euo pipefail
need=()
dpkg -s liblua5.4-dev >/dev/null 2>&1 || need+=(liblua5.4-dev)
dpkg -s libsqlite3-dev >/dev/null 2>&1 || need+=(libsqlite3-dev)
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v pkg-config >/dev/null || need+=(pkgconf) # cpu/install's pkg-config consumer
command -v python3 >/dev/null || need+=(python3)    # cpu/python
if [ ${#need[@]} -gt 0 ]; then
  sudo_="" ; [ "$(id -u)" = 0 ] || sudo_=sudo
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${need[@]}"
fi
