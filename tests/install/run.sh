#!/usr/bin/env bash
# Installs splitzip into a prefix, moves the prefix elsewhere, and builds and runs small consumers against it, through
# find_package(splitzip) and through pkg-config: once for the static library and once for the shared one, each with
# the transfer library when it was built (UCX found).
#
# Usage: tests/install/run.sh [STATIC_BUILD_DIR]
#   STATIC_BUILD_DIR  an already built static build to install (scripts/test.sh passes its release build); without
#                     it a minimal static build is made in build-install-static. The shared build is always made, in
#                     build-install-shared (library and transfer library only, no CUDA).
# Work files go to build-install-test/. Exits non-zero on the first failure.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$root/build-install-test
jobs=${JOBS:-$(nproc)}
consumer=$root/tests/install/consumer
rm -rf "$work"
mkdir -p "$work"

configure_lib() {  # build dir, BUILD_SHARED_LIBS
  cmake -S "$root" -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS="$2" -DSPLITZIP_ENABLE_CUDA=OFF \
    -DSPLITZIP_BUILD_CLI=OFF -DSPLITZIP_BUILD_TESTS=OFF -DSPLITZIP_BUILD_BENCH=OFF -DSPLITZIP_BUILD_FUZZ=OFF \
    -DSPLITZIP_BUILD_PYTHON=OFF >/dev/null
  cmake --build "$1" -- -j"$jobs" >/dev/null
}

check_variant() {  # name (static|shared), build dir
  local name=$1 build=$2
  echo "== install: $name library from $build"
  # Installed at one place, used from another: nothing may remember the install prefix.
  cmake --install "$build" --prefix "$work/$name/staged" >/dev/null
  mv "$work/$name/staged" "$work/$name/prefix"
  local prefix=$work/$name/prefix
  local pc
  pc=$(dirname "$(find "$prefix" -name splitzip.pc | head -n1)")
  [[ -n "$pc" ]] || { echo "no splitzip.pc under $prefix"; exit 1; }
  local with_transfer=OFF
  [[ -f "$prefix/include/splitzip/transfer.hpp" ]] && with_transfer=ON
  if [[ $name == static ]]; then
    ! find "$prefix" -name 'libsplitzip*.so*' | grep -q . || { echo "a static install holds a shared library"; exit 1; }
  else
    find "$prefix" -name 'libsplitzip.so*' | grep -q . || { echo "a shared install without libsplitzip.so"; exit 1; }
  fi

  # find_package
  cmake -S "$consumer" -B "$work/$name/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    -DWITH_TRANSFER="$with_transfer" >/dev/null
  cmake --build "$work/$name/cmake" >/dev/null
  "$work/$name/cmake/consumer"
  [[ $with_transfer == OFF ]] || "$work/$name/cmake/transfer_consumer"

  # pkg-config: the prefix comes from the .pc file's place, so it is the moved prefix
  export PKG_CONFIG_PATH=$pc
  local got want
  got=$(cd "$(pkg-config --variable=prefix splitzip)" && pwd -P)
  want=$(cd "$prefix" && pwd -P)
  [[ $got == "$want" ]] || { echo "pkg-config prefix $got, expected $want"; exit 1; }
  # Only the CUDA runtime's own directory (a dependency, not the install prefix) may name a build-machine path.
  if pkg-config --cflags --libs --static splitzip | sed -E 's#-L[^ ]*/cuda[^ ]*##g' |
      grep -q "$work/$name/staged\|/usr/local"; then
    echo "pkg-config names the install-time prefix: $(pkg-config --cflags --libs --static splitzip)"
    exit 1
  fi
  local static_flag="" rpath=""
  if [[ $name == static ]]; then
    static_flag=--static
  else
    rpath="-Wl,-rpath,$(pkg-config --variable=libdir splitzip)"
  fi
  # shellcheck disable=SC2046,SC2086  # pkg-config output is a list of flags
  cc -std=c99 -o "$work/$name/consumer_pc" "$consumer/consumer.c" \
    $(pkg-config --cflags $static_flag --libs splitzip) $rpath
  "$work/$name/consumer_pc"
  if [[ $with_transfer == ON ]]; then
    # shellcheck disable=SC2046,SC2086
    c++ -std=c++17 -o "$work/$name/transfer_pc" "$consumer/transfer_consumer.cpp" \
      $(pkg-config --cflags $static_flag --libs splitzip-transfer) $rpath
    "$work/$name/transfer_pc"
  fi
  unset PKG_CONFIG_PATH
  echo "== install: $name ok (find_package and pkg-config$([[ $with_transfer == ON ]] && echo ', with transfer'))"
}

static_build=${1:-}
if [[ -z $static_build ]]; then
  static_build=$root/build-install-static
  configure_lib "$static_build" OFF
fi
check_variant static "$static_build"
configure_lib "$root/build-install-shared" ON
check_variant shared "$root/build-install-shared"
echo "install: all consumers built and ran"
