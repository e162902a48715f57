#!/bin/sh
# Installs the build into a scratch prefix, builds test/package against it with find_package, runs both consumers
# on 2 ranks, and checks that no installed library needs the MPI C++ bindings.
#   check_package.sh BUILD_DIR SOURCE_DIR MPIEXEC
set -eu
build=$1 source=$2 mpiexec=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$source" -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$scratch/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/consumer" >/dev/null
"$mpiexec" -np 2 --oversubscribe "$scratch/consumer/consumer"
"$mpiexec" -np 2 --oversubscribe "$scratch/consumer/c_consumer"
# Nothing installed may reference the MPI C++ bindings (MPI::Comm and friends), which not every MPI has.
if nm -C "$scratch"/prefix/lib*/libgradagg*.a "$scratch"/prefix/lib*/libgradagg*.so 2>/dev/null | grep -q ' U MPI::'; then
  echo "check_package: the installed libraries reference MPI's C++ bindings" >&2
  exit 1
fi
