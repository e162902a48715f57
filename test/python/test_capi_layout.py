"""The Python package's ctypes declarations (python/gradagg/_capi.py) against the C header they copy
(include/gradagg/gradagg_c.h): every struct the package declares has the header's fields, in the
header's order, with the matching C types, and the API version is the header's. A field added to the header and
not to Python (or the other way round) fails here instead of shifting every later field at run time. The options are
written once more in C++ (gradagg/options.h, AggregatorOptions): the C struct must carry every one of its members (in
snake_case; `transport` is the C API's cuda_aware_mpi), and gradagg.Aggregator's keyword arguments must be exactly
the C struct's fields.

  python3 test_capi_layout.py HEADER [OPTIONS_H]   (GRADAGG_LIBRARY: the C API's library, which _capi loads)
Prints "python_capi_layout: PASS" when they agree.
"""
import ctypes
import re
import sys

from gradagg import _capi, options

RENAMED = {"transport": "cuda_aware_mpi"}  # AggregatorOptions member -> gradagg_options field, where they differ

C_TYPES = {"int": ctypes.c_int, "size_t": ctypes.c_size_t, "double": ctypes.c_double, "uint64_t": ctypes.c_uint64,
           "void*": ctypes.c_void_p, "double*": ctypes.POINTER(ctypes.c_double),
           "uint64_t*": ctypes.POINTER(ctypes.c_uint64)}
STRUCTS = {"gradagg_options": _capi.Options, "gradagg_tensor": _capi.Tensor, "gradagg_header": _capi.Header,
           "gradagg_stats": _capi.Stats}


def header_fields(text, name):
    """(field, C type) of `typedef struct NAME { ... } NAME;` in declaration order."""
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), text, re.S)
    if body is None:
        raise AssertionError(f"{name}: not in the header")
    fields = []
    for declaration in re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S).split(";"):
        words = declaration.replace("*", "* ").split()  # "void *data" and "void* data" alike
        if not words:
            continue
        c_type, names = words[0], words[1:]
        if names and names[0] == "*":
            c_type, names = c_type + "*", names[1:]
        fields += [(n.strip(","), c_type) for n in names if n.strip(",")]
    return fields


def cpp_option_members(text):
    """The members of `struct AggregatorOptions { ... };` in gradagg/options.h, in snake_case."""
    body = re.search(r"struct AggregatorOptions \{(.*?)\n\};", text, re.S)
    if body is None:
        raise AssertionError("struct AggregatorOptions: not in options.h")
    names = re.findall(r"^\s+[\w:<>]+\s+(\w+)\s*=", re.sub(r"//[^\n]*", "", body.group(1)), re.M)
    return [RENAMED.get(n, re.sub(r"(?<!^)([A-Z])", r"_\1", n).lower()) for n in names]


def main():
    text = open(sys.argv[1]).read()
    failures = []
    c_options = [field for field, _ in header_fields(text, "gradagg_options")]
    if len(sys.argv) > 2:
        members = cpp_option_members(open(sys.argv[2]).read())
        if sorted(members) != sorted(c_options):
            failures.append(f"options.h's AggregatorOptions has {sorted(members)}, gradagg_options {sorted(c_options)}")
    if sorted(options.OPTION_FIELDS) != sorted(c_options):
        failures.append(f"gradagg.options.OPTION_FIELDS {sorted(options.OPTION_FIELDS)}, "
                        f"the header's {sorted(c_options)}")
    version = int(re.search(r"#define GRADAGG_C_API_VERSION (\d+)", text).group(1))
    if version != _capi.C_API_VERSION:
        failures.append(f"C_API_VERSION {_capi.C_API_VERSION}, the header's {version}")
    for name, structure in STRUCTS.items():
        theirs = header_fields(text, name)
        ours = [(field, kind) for field, kind in structure._fields_]
        if [f for f, _ in theirs] != [f for f, _ in ours]:
            failures.append(f"{name}: the header has {[f for f, _ in theirs]}, Python {[f for f, _ in ours]}")
            continue
        for (field, c_type), (_, kind) in zip(theirs, ours):
            expected = C_TYPES.get(c_type)
            if expected is None or ctypes.sizeof(expected) != ctypes.sizeof(kind) or expected._type_ != kind._type_:
                failures.append(f"{name}.{field}: the header's {c_type}, Python's {kind.__name__}")
    for failure in failures:
        print(f"python_capi_layout: {failure}")
    if failures:
        print("python_capi_layout: FAILED")
        return 1
    print(f"python_capi_layout: PASS ({len(STRUCTS)} structs, API version {version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
