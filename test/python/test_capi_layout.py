"""The Python package's ctypes declarations (python/gradagg/_capi.py) against the C header they copy
(aggregator/include/gradagg/gradagg_c.h): every struct the package declares has the header's fields, in the
header's order, with the matching C types, and the API version is the header's. A field added to the header and
not to Python (or the other way round) fails here instead of shifting every later field at run time.

  python3 test_capi_layout.py HEADER      (GRADAGG_LIBRARY: the C API's library, which _capi loads)
Prints "python_capi_layout: PASS" when they agree.
"""
import ctypes
import re
import sys

from gradagg import _capi

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


def main():
    text = open(sys.argv[1]).read()
    failures = []
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
