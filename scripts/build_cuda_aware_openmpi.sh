#!/usr/bin/env bash
# Builds a CUDA-aware Open MPI from Debian's own source package into a prefix, for gradagg's CUDA-aware transport
# (MPI_Isend/MPI_Irecv straight from device memory). Debian's binary Open MPI is built without CUDA.
#
#   scripts/build_cuda_aware_openmpi.sh PREFIX [CUDA_HOME]     (CUDA_HOME defaults to /usr/local/cuda)
#
# The result shares the soname libmpi.so.40 with Debian's package, so gradagg's binaries, linked against Debian's,
# pick it up at run time from LD_LIBRARY_PATH=PREFIX/lib; run them with PREFIX/bin/mpirun. About 7 minutes on 2
# cores, 14 MB installed. Needs root for apt-get (a deb-src line for Debian's main archive is added if missing).
set -euo pipefail
if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -lt 1 ] && exit 2 || exit 0
fi
prefix=$(realpath -m "$1")
cuda=${2:-/usr/local/cuda}
[ -x "$cuda/bin/nvcc" ] || { echo "build_cuda_aware_openmpi: no CUDA toolkit at $cuda" >&2; exit 1; }
if [ -x "$prefix/bin/ompi_info" ] && "$prefix/bin/ompi_info" --parsable --all 2>/dev/null |
    grep -q 'mpi_built_with_cuda_support:value:true'; then
  echo "build_cuda_aware_openmpi: $prefix already holds a CUDA-aware Open MPI"
  exit 0
fi

if ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  cat >/etc/apt/sources.list.d/gradagg-deb-src.sources <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends dpkg-dev >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
apt-get source --download-only openmpi >/dev/null
# Upstream's tarball as Debian ships it: Debian's patches touch configure.ac, which would need automake to rebuild.
mkdir src
tar -xf openmpi_*.orig.tar.* -C src --strip-components=1
cd src
./configure --prefix="$prefix" --with-cuda="$cuda" --disable-mpi-fortran --disable-oshmem --without-ucx \
  --without-verbs --without-ofi --without-psm2 --disable-static >configure.log 2>&1 ||
  { tail -30 configure.log >&2; exit 1; }
make -j"$(nproc)" install >make.log 2>&1 || { tail -30 make.log >&2; exit 1; }
"$prefix/bin/ompi_info" --parsable --all | grep 'mpi_built_with_cuda_support:value'
du -sh "$prefix"
