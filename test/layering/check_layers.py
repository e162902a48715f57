#!/usr/bin/env python3
"""Fails when a project include runs up or sideways against gradagg's layers (docs/layout.md).

  include     the public API, installed as is (include/gradagg: declarations that include only each other and MPI)
  common      -> include; the vocabulary every layer shares (element types and ranges, CUDA helpers)
  quantize    -> common, include
  mpi         -> common, include
  intra_node  -> mpi, common, include
  aggregator  -> intra_node, mpi, quantize, common, include
  apps        -> aggregator, intra_node, mpi, quantize, common, include

The Python package python/gradagg/ is checked too: the core (ctypes over the C API) imports nothing of its PyTorch
side gradagg/torch/ (only the older alias modules torch_*.py may), and the modules of gradagg/torch/ import each
other one way (no circle), none of them through the package's front, gradagg/torch/__init__.py.

An include is looked up as the compiler does, in the include roots include/ and the repository's root, and belongs
to the folder it is found in. One that names no folder of the project (a file beside the includer, a system header)
is not checked, and neither is test/, which may reach every layer.

  test/layering/check_layers.py [ROOT]        prints each violation as FILE:LINE: ..., exits 1 if there is any
"""
import ast
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


def python_imports(path, package, is_module):
    """The modules of gradagg a Python file imports, as dotted names ("gradagg.torch.common", "gradagg.torch"), with
    their lines, read as Python reads them (ast: imports over several lines, several names, relative levels).
    `is_module(name)` says whether a dotted name is a module file, so that `from . import x` counts as importing x,
    and `from . import Name` as importing the package."""
    with open(path, encoding="utf-8", errors="replace") as f:
        tree = ast.parse(f.read(), filename=path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                parts = package.split(".")
                source = ".".join(parts[:len(parts) - node.level + 1] + ([source] if source else []))
            for alias in node.names:
                name = f"{source}.{alias.name}"
                found.add((node.lineno, name if is_module(name) else source))
    return sorted(found)


def on_torch_side(module):
    """Whether a dotted module name is gradagg.torch or one of its modules (gradagg.torch_adam is not)."""
    return module == "gradagg.torch" or module.startswith("gradagg.torch.")


def python_violations(root):
    top = os.path.join(root, "python", "gradagg")
    if not os.path.isdir(top):
        return []
    found, edges = [], {}

    def is_module(name):
        path = os.path.join(root, "python", *name.split("."))
        return os.path.isfile(path + ".py") or os.path.isfile(os.path.join(path, "__init__.py"))

    for directory, _, files in os.walk(top):
        for file in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(directory, file)
            relative = os.path.relpath(path, os.path.join(root, "python"))[:-3].replace(os.sep, ".")
            module = relative[: -len(".__init__")] if relative.endswith(".__init__") else relative
            package = module if file == "__init__.py" else module.rsplit(".", 1)[0]
            in_torch = on_torch_side(module)
            for number, target in python_imports(path, package, is_module):
                where = f"{os.path.relpath(path, root)}:{number}"
                if not on_torch_side(target):
                    continue
                if not in_torch and not file.startswith("torch_"):
                    found.append(f"{where}: the core imports {target} of its PyTorch side")
                elif in_torch and module != "gradagg.torch" and target == "gradagg.torch":
                    found.append(f"{where}: {module} imports the package's front, gradagg.torch")
                elif in_torch and module != "gradagg.torch":
                    edges.setdefault(module, set()).add(target)
    # A circle among gradagg/torch's modules: a module that reaches itself.
    for start in sorted(edges):
        seen, stack = set(), list(edges[start])
        while stack:
            current = stack.pop()
            if current == start:
                found.append(f"python/{start.replace('.', '/')}.py: its imports come back to it (a circle)")
                break
            if current not in seen:
                seen.add(current)
                stack.extend(edges.get(current, ()))
    return found


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    found = violations(root) + python_violations(root)
    for line in found:
        print(line)
    print(f"check_layers: {len(found)} include(s) against the layers" if found else "check_layers: layers respected")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
