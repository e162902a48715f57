#!/usr/bin/env python3
"""Fails when a project include runs up or sideways against gradagg's layers (docs/layout.md).

  include     the public API, installed as is (include/gradagg: declarations that include only each other and MPI)
  common      -> include; the vocabulary every layer shares (element types and ranges, CUDA helpers)
  quantize    -> common, include
  mpi         -> common, include
  intra_node  -> mpi, common, include
  aggregator  -> intra_node, mpi, quantize, common, include
  apps        -> aggregator, intra_node, mpi, quantize, common, include

An include is looked up as the compiler does, in the include roots include/ and the repository's root, and belongs
to the folder it is found in. One that names no folder of the project (a file beside the includer, a system header)
is not checked, and neither is test/, which may reach every layer.

  test/layering/check_layers.py [ROOT]        prints each violation as FILE:LINE: ..., exits 1 if there is any
"""
import os
import re
import sys

ALLOWED = {
    "include": {"include"},
    "common": {"common", "include"},
    "quantize": {"quantize", "common", "include"},
    "mpi": {"mpi", "common", "include"},
    "intra_node": {"intra_node", "mpi", "common", "include"},
    "aggregator": {"aggregator", "intra_node", "mpi", "quantize", "common", "include"},
    "apps": {"apps", "aggregator", "intra_node", "mpi", "quantize", "common", "include"},
}
SOURCES = (".h", ".cc", ".cu", ".cuh", ".cpp", ".hpp")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of_include(root, name):
    """The layer an include names, or None when it names no project folder."""
    if os.path.isfile(os.path.join(root, "include", name)):
        return "include"
    first = name.split("/", 1)[0]
    return first if first in ALLOWED else None


def violations(root):
    found = []
    for layer in sorted(ALLOWED):
        for directory, _, files in os.walk(os.path.join(root, layer)):
            for file in sorted(files):
                if not file.endswith(SOURCES):
                    continue
                path = os.path.join(directory, file)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        match = INCLUDE.match(line)
                        if not match:
                            continue
                        target = layer_of_include(root, match.group(1))
                        if target is not None and target not in ALLOWED[layer]:
                            where = os.path.relpath(path, root)
                            found.append(f"{where}:{number}: {layer}/ includes \"{match.group(1)}\" of {target}/ "
                                         f"(allowed: {', '.join(sorted(ALLOWED[layer]))})")
    return found


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    found = violations(root)
    for line in found:
        print(line)
    print(f"check_layers: {len(found)} include(s) against the layers" if found else "check_layers: layers respected")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
