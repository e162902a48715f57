#!/usr/bin/env bash
# The Python package as a user installs it: `pip install .` from the repository into a fresh virtual environment,
# and `pip wheel .` installed into another, each followed by the README's Python snippet (the one that sums
# numpy.ones over 2 ranks) under mpirun, warnings as errors, from outside the source tree and without PYTHONPATH or
# GRADAGG_LIBRARY, so that only the installed library can be found. pip fetches NumPy and scikit-build-core from PyPI.
#   test/python/package_install_test.sh SOURCE_DIR MPIEXEC
# The C++ code is built without CUDA here (the CMake build tests that); on a GPU machine `pip install .` finds nvcc.
set -euo pipefail
root=$(cd "$1" && pwd) mpiexec=$2
python=${GRADAGG_PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH GRADAGG_LIBRARY PYTHONWARNINGS  # -W error below is for gradagg, not for pip
cpu_only=(--config-settings=cmake.define.GRADAGG_ENABLE_CUDA=OFF)

# The snippet: the Python code of the README's `python3 -c '...'` block that uses gradagg.Aggregator.
"$python" - "$root/README.md" "$work/snippet.py" <<'PYTHON'
import re, sys
with open(sys.argv[1]) as readme:
    blocks = [b for b in re.findall(r"python3 -c '\n(.*?)'\n", readme.read(), re.S) if "gradagg.Aggregator" in b]
if not blocks:
    sys.exit("FAILED: no python3 -c '...' block with gradagg.Aggregator in README.md")
with open(sys.argv[2], "w") as snippet:
    snippet.write(blocks[0] + "\n")
PYTHON

run_snippet() {  # VENV: the snippet on 2 ranks with that environment's Python
  (cd "$work" && "$mpiexec" -np 2 "$1/bin/python" -W error "$work/snippet.py") ||
    { echo "FAILED: the README's snippet under $1"; exit 1; }
  "$1/bin/python" -c 'import gradagg, os; assert os.path.exists(os.path.join(os.path.dirname(gradagg.__file__),
"libgradagg_c.so")), "the library is not inside the installed package"'
}

"$python" -m venv "$work/installed"
"$work/installed/bin/pip" install --quiet "${cpu_only[@]}" "$root"
run_snippet "$work/installed"
echo "pip install . : PASS"

"$work/installed/bin/pip" wheel --quiet --no-deps "${cpu_only[@]}" -w "$work/dist" "$root"
"$python" -m venv "$work/from_wheel"
"$work/from_wheel/bin/pip" install --quiet "$work"/dist/gradagg-*.whl
run_snippet "$work/from_wheel"
echo "pip wheel . : PASS"
