#!/usr/bin/env bash
# Installs the Python package (python/gradagg) with pip, carrying the C API's shared library (libgradagg_c.so) inside
# it. Builds first if build/ has no library. Extra arguments go to pip, e.g. --user, or --break-system-packages for
# Debian's own Python outside a virtual environment.
#   scripts/install_python_package.sh [PIP_ARGUMENTS...]
# Without installing: PYTHONPATH=python GRADAGG_LIBRARY=build/lib/libgradagg_c.so python3 ... (the tests do this).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
library="$root/build/lib/libgradagg_c.so"
[ -f "$library" ] || "$root/scripts/build.sh"
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
cp -r "$root/python/." "$staging/"
cp "$library" "$staging/gradagg/"
"$python" -m pip install "$@" "$staging"
echo "installed: $("$python" -c 'import gradagg, os; print(os.path.dirname(gradagg.__file__))')"
