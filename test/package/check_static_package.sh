#!/bin/sh
# The package built with -DGRADAGG_SHARED_LIBRARY=OFF (static archives; CPU only, to keep CI short), checked as
# check_package.sh checks the shared one.
#   check_static_package.sh SOURCE_DIR PACKAGE_TEST_DIR DOC_PAGE MPIEXEC
set -eu
source=$1 tests=$2 page=$3 mpiexec=$4
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
cmake -S "$source" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGRADAGG_SHARED_LIBRARY=OFF -DGRADAGG_ENABLE_CUDA=OFF \
  -DGRADAGG_BUILD_TESTS=OFF -DGRADAGG_BUILD_BENCHMARKS=OFF >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" --target gradagg gradagg_c gradagg_cli -j 2 >"$build/build.log" 2>&1 ||
  { cat "$build/build.log" >&2; exit 1; }
"$(dirname "$0")/check_package.sh" "$build" "$tests" "$page" "$mpiexec" static
