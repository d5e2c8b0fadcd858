#!/usr/bin/env bash
# cpu/install: what an engine's build sees of an installed flashsampling.
# `cmake --install` of this build into a fresh prefix; a consumer program
# (consumer/) built against it by find_package(flashsampling) and, where
# pkg-config is present, by `pkg-config flashsampling`; each run under the
# fake driver (tests/fakecuda) with FS_LOG=1.  Checked:
#   1. the installed files are where the install rules say;
#   2. both consumers run and name a kernel from the *installed* shipped
#      defaults (FS_LOG's "shipped defaults: <prefix>/share/...");
#   3. the installed tools (the static library) run, and fs-demo reads them
#      too, also when started by name through PATH (fs-tune list is given the
#      installed copy by --db: it only has to run);
#   4. with the installed copy gone the library falls back to the source
#      tree's, and FS_DEFAULTS_DB overrides both (the lookup order of
#      runtime/tuned.c's defaults_path).
# Usage: test_install.sh BUILD_DIR SOURCE_DIR CMAKE LIBDIR [GENERATOR [C_COMPILER]]
# (SOURCE_DIR as CMake has it: the library prints its fallback path from it;
# LIBDIR: CMAKE_INSTALL_LIBDIR, relative to the prefix.)
set -euo pipefail
build=$(realpath "$1") src=$2 cmake=$3 libdir=$4 gen=${5:-Ninja} cc=${6:-cc}
unset FS_DEFAULTS_DB FS_VARIANT FS_TUNING_DB # the lookup under test, not the caller's
tmp=$(realpath "$(mktemp -d)"); trap 'rm -rf "$tmp"' EXIT
pfx=$tmp/prefix
fail() { echo "FAIL: $*"; exit 1; }
# cmake --install rewrites the build's install_manifest.txt: keep a real one
manifest=$build/install_manifest.txt
[ -f "$manifest" ] && cp "$manifest" "$tmp/manifest"
"$cmake" --install "$build" --prefix "$pfx" > "$tmp/install.log" 2>&1 || fail "cmake --install: $(cat "$tmp/install.log")"
if [ -f "$tmp/manifest" ]; then cp "$tmp/manifest" "$manifest"; else rm -f "$manifest"; fi
for f in "$libdir/pkgconfig/flashsampling.pc" include/flashsampling.h "$libdir/libflashsampling.so" bin/fs-tune bin/fs-bench bin/fs-demo \
         share/flashsampling/defaults.db "$libdir/cmake/flashsampling/flashsamplingConfig.cmake"; do
  [ -e "$pfx/$f" ] || fail "not installed: $f"
done
echo "ok 1: installed under $pfx ($libdir)"

fake() { FS_FAKE_CUDA=1 FS_LOG=1 FS_TUNING_DB=off LD_LIBRARY_PATH="$build/tests/fakecuda:$pfx/$libdir" "$@" 2>&1; }
expect() { # expect WHAT OUTPUT PATTERN
  grep -qF -- "$3" <<< "$2" || fail "$1: no \"$3\" in:
$2"
}
installed=$pfx/share/flashsampling/defaults.db
"$cmake" -S "$src/tests/install/consumer" -B "$tmp/c" -G "$gen" -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$pfx" > "$tmp/c.log" 2>&1 ||
  fail "find_package consumer: configure: $(cat "$tmp/c.log")"
"$cmake" --build "$tmp/c" > "$tmp/c.log" 2>&1 || fail "find_package consumer: build: $(cat "$tmp/c.log")"
out=$(fake "$tmp/c/consumer") || fail "find_package consumer: $out"
expect "find_package consumer" "$out" "shipped defaults: $installed"
expect "find_package consumer" "$out" "variant fsamp_bf16_sm90a_"
echo "ok 2a: find_package consumer: $(grep '^variant' <<< "$out")"
if command -v pkg-config > /dev/null; then
  flags=$(PKG_CONFIG_PATH="$pfx/$libdir/pkgconfig" pkg-config --cflags --libs flashsampling) ||
    fail "pkg-config flashsampling"
  # shellcheck disable=SC2086
  "$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/pc" "$src/tests/install/consumer/main.c" $flags ||
    fail "pkg-config consumer: cc $flags"
  out=$(fake "$tmp/pc") || fail "pkg-config consumer: $out"
  expect "pkg-config consumer" "$out" "shipped defaults: $installed"
  echo "ok 2b: pkg-config consumer ($flags)"
else
  echo "SKIPPED 2b: no pkg-config on PATH (scripts/setup.sh installs pkgconf)"
fi
out=$(fake "$pfx/bin/fs-tune" list --db "$installed") || fail "installed fs-tune list: $out"
expect "installed fs-tune list" "$out" "-> fsamp_"
out=$(fake "$pfx/bin/fs-demo" --batch 256 --iters 1 --check 0) || true # the fake runs no kernel
expect "installed fs-demo" "$out" "shipped defaults: $installed"
# started by name through PATH (dladdr would name it by argv[0] alone)
out=$(cd "$tmp" && PATH="$pfx/bin:$PATH" fake fs-demo --batch 256 --iters 1 --check 0) || true
expect "installed fs-demo through PATH" "$out" "shipped defaults: $installed"
echo "ok 3: the installed tools read $installed (by path and through PATH)"
mv "$installed" "$tmp/moved.db"
out=$(fake "$tmp/c/consumer") || fail "consumer without the installed defaults: $out"
expect "consumer without the installed defaults" "$out" "shipped defaults: $src/tuning-db/defaults/defaults.db"
out=$(FS_DEFAULTS_DB="$tmp/moved.db" fake "$tmp/c/consumer") || fail "consumer with FS_DEFAULTS_DB: $out"
expect "consumer with FS_DEFAULTS_DB" "$out" "shipped defaults: $tmp/moved.db"
echo "ok 4: without the installed copy: the source tree's; FS_DEFAULTS_DB first"
