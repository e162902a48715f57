#!/usr/bin/env python3
"""The kernels that write whole 16-byte groups to a peer GPU's memory do it with 16-byte vector stores.

nvcc (CUDA 13.0) once compiled these stores, plain assignments of a float4 or uint4 built from four floats, into four
4-byte stores; over NVLink those are partial writes, and the quantizer's decode into a peer's copy ran at a third
less than a copy (bench/NOTES.md). This compiles the sources to PTX and fails when a listed kernel has no vector store.

    check_vector_stores.py NVCC SOURCE_ROOT [ARCH]      (ARCH: the CUDA architecture, 90 by default)
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# (source, nvcc flags of its CMake target, a fragment of the kernel's mangled name, what it is)
QUANTIZER = ["--fmad=false"]  # quantize/CMakeLists.txt
KERNELS = [
    ("quantize/cuda/cuda_quantizer.cu", QUANTIZER, "DecodeBucketsKernelIfLi1ELb0ELb1E",
     "the decode into every GPU's copy (float32, 1 bit)"),
    ("intra_node/cuda/two_shot_launch.cu", [], "TwoShotKernelIfLi4ELb1ELb1E",
     "the two-shot's stores to every rank (float32, 4 GPUs)"),
    ("intra_node/cuda/all_push_launch.cu", [], "AllPushKernelIfLi4ELb1E",
     "all-push's pushes and results (float32, 4 GPUs)"),
]
VECTOR_STORE = re.compile(r"^\s*(?:@!?%p\d+\s+)?st\.global(?:\.\w+)*\.v4\.", re.MULTILINE)
ENTRY = re.compile(r"^(?:\.(?:visible|weak)\s+)?\.entry\s+", re.MULTILINE)


def kernel_bodies(ptx):
    """Maps each .entry's mangled name to its text up to the next entry."""
    parts = ENTRY.split(ptx)
    bodies = {}
    for part in parts[1:]:
        name = re.match(r"[\w$]+", part).group(0)
        bodies[name] = part
    return bodies


def compile_ptx(nvcc, root, source, flags, arch, out):
    command = [nvcc, "-ptx", "-O3", *flags, "-std=c++17", f"-arch=sm_{arch}", f"-I{root}", f"-I{root / 'include'}",
               str(root / source), "-o", str(out)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"check_vector_stores: nvcc failed on {source}:\n{result.stderr}")
    return out.read_text()


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    nvcc, root = sys.argv[1], Path(sys.argv[2])
    # CMAKE_CUDA_ARCHITECTURES: "90", "90-real", "80;90" name one; "native", "all" or nothing: sm_90 (the H100/H200).
    first = sys.argv[3].split(";")[0].split("-")[0] if len(sys.argv) > 3 else ""
    arch = first if re.fullmatch(r"\d+[af]?", first) else "90"
    failures = []
    with tempfile.TemporaryDirectory() as scratch:
        ptx = {}
        for source, flags, fragment, what in KERNELS:
            if source not in ptx:
                ptx[source] = kernel_bodies(compile_ptx(nvcc, root, source, flags, arch, Path(scratch) / "out.ptx"))
            matches = [body for name, body in ptx[source].items() if fragment in name]
            if not matches:
                failures.append(f"{source}: no kernel named like {fragment} ({what})")
            elif not any(VECTOR_STORE.search(body) for body in matches):
                failures.append(f"{source}: {what} has no 16-byte vector store in its PTX")
            else:
                print(f"ok: {what}")
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
