#!/usr/bin/env bash
# Installs, from Debian's packages, whatever gradagg's build and tests need and this machine lacks.
# Needs root (or sudo) only when something is missing. Debian 12 or newer.
set -euo pipefail

packages=(cmake make g++ python3 libopenmpi-dev openmpi-bin libboost-program-options-dev
          libgtest-dev libgmock-dev libbenchmark-dev libhwy-dev zlib1g-dev dataset-fashion-mnist
          python3-numpy python3-mpi4py python3-torch python3-matplotlib python3-venv slurm-wlm munge
          libopenblas0-pthread)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: everything is installed"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "install_deps: need root to install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
