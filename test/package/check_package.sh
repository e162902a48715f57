#!/bin/sh
# The installed package as a user meets it. Installs the build twice, into a scratch prefix and, staged with DESTDIR
# under another prefix, into a folder it was not installed for (a relocated install), and against each builds, found
# through CMAKE_PREFIX_PATH alone:
#   cxx/  a C++-only project with no definitions or MPI of its own, run on 2 ranks;
#   c/    a C-only project through the C API, run on 2 ranks;
#   the documented CMakeLists.txt and trainer.cc, taken verbatim from docs/cpp-api.md's "The C++ API", run on 2 ranks
#         as 2 emulated nodes at 32 bits, where the sum is exact, and its output compared with what the page says.
# A shared build (LIBRARY_KIND shared) must install no layer archive, and its targets must name neither Highway nor
# the CUDA toolkit; no installed library may reference MPI's C++ bindings.
#   check_package.sh BUILD_DIR|PREFIX PACKAGE_TEST_DIR DOC_PAGE MPIEXEC shared|static
set -eu
build=$1 tests=$2 page=$3 mpiexec=$4 kind=$5
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "check_package: $*" >&2; exit 1; }

# The page's blocks: the first of the given language in the section "## The C++ API".
page_block() {
  awk -v fence="\`\`\`$1" '/^## / { inside = ($0 == "## The C++ API") }
    inside && $0 == fence { copying = 1; next }
    copying && $0 == "```" { exit }
    copying { print }' "$page"
}
mkdir "$scratch/readme"
page_block cmake >"$scratch/readme/CMakeLists.txt"
page_block cpp >"$scratch/readme/trainer.cc"
[ -s "$scratch/readme/CMakeLists.txt" ] || fail "no cmake block under '## The C++ API' in $page"
[ -s "$scratch/readme/trainer.cc" ] || fail "no cpp block under '## The C++ API' in $page"
expected="weights[0] 3, bias[0] 3, samples 64, loss 1"
grep -qF "\`$expected\`" "$page" || fail "the page no longer says what its trainer prints ('$expected')"

if [ -f "$build/cmake_install.cmake" ]; then
  cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
  DESTDIR="$scratch/staged" cmake --install "$build" --prefix /opt/gradagg-package-test >/dev/null
  mv "$scratch/staged/opt/gradagg-package-test" "$scratch/moved"
else  # an installed prefix carried to another machine (bench/rounds/package.sh): copied to two places
  [ -f "$build/include/gradagg/aggregator.h" ] || fail "$build is neither a build folder nor an installed prefix"
  cp -a "$build" "$scratch/prefix"
  cp -a "$build" "$scratch/moved"
fi

for prefix in "$scratch/prefix" "$scratch/moved"; do
  echo "check_package: consumers of $prefix"
  for project in "$tests/cxx" "$tests/c" "$scratch/readme"; do
    name=$(basename "$project")
    cmake -S "$project" -B "$scratch/build-$name" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
      >"$scratch/configure.log" 2>&1 || { cat "$scratch/configure.log" >&2; fail "$name does not configure"; }
    cmake --build "$scratch/build-$name" >"$scratch/build.log" 2>&1 ||
      { cat "$scratch/build.log" >&2; fail "$name does not build"; }
  done
  "$mpiexec" -np 2 --oversubscribe "$scratch/build-cxx/consumer"
  "$mpiexec" -np 2 --oversubscribe "$scratch/build-c/c_consumer"
  output=$(GRADAGG_BITS=32 GRADAGG_RANKS_PER_NODE=1 "$mpiexec" -np 2 --oversubscribe "$scratch/build-readme/trainer")
  echo "documented trainer: $output"
  [ "$output" = "$expected" ] || fail "the documented trainer printed '$output', not '$expected'"
  rm -rf "$scratch"/build-*
done

libs=$(ls -d "$scratch"/prefix/lib*)
if [ "$kind" = shared ]; then
  if ls "$libs"/libgradagg*.a >/dev/null 2>&1; then fail "a shared build installed archives: $(ls "$libs"/*.a)"; fi
  if grep -lE 'hwy|CUDA::' "$libs"/cmake/gradagg/gradaggTargets*.cmake; then
    fail "the shared package's targets name Highway or the CUDA toolkit"
  fi
fi
# Nothing installed may reference the MPI C++ bindings (MPI::Comm and friends), which not every MPI has.
if nm -C "$libs"/libgradagg*.a "$libs"/libgradagg*.so 2>/dev/null | grep -q ' U MPI::'; then
  fail "the installed libraries reference MPI's C++ bindings"
fi
echo "check_package: $kind package PASS"
