#!/bin/sh
# Installs the build into a scratch prefix, builds test/package against it with find_package, runs it on 2 ranks.
#   check_package.sh BUILD_DIR SOURCE_DIR MPIEXEC
set -eu
build=$1 source=$2 mpiexec=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$source" -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$scratch/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/consumer" >/dev/null
"$mpiexec" -np 2 --oversubscribe "$scratch/consumer/consumer"
