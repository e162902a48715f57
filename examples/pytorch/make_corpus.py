"""Builds a text corpus for train_gpt.py --corpus from source files already on the machine, so that a run reads more
fresh text than the Python standard library's 8 MB (which an 85M GPT starts to overfit after about 900 steps): every
file whose name ends in one of --suffixes under each ROOT, walked in sorted order, deduplicated by content, joined as
bytes in the order of their contents' SHA-256 (a fixed shuffle: any stretch of the corpus, train_gpt.py's validation
tail included, mixes every source alike). Prints the corpus's size and SHA-256, for the record of the runs that read
it.

    python3 examples/pytorch/make_corpus.py corpus.bin                 # the default roots below
    python3 examples/pytorch/make_corpus.py corpus.bin --roots /usr/include /usr/lib/python3 --min-bytes 200M

The default roots are this Python's standard library and site-packages (PyTorch's own sources among them) and the C
and C++ headers under /usr/include and /usr/local/cuda/include. It exits non-zero when the corpus is smaller than
--min-bytes.
"""
import argparse
import hashlib
import os
import site
import sys
import sysconfig

SUFFIXES = (".py", ".h", ".hpp", ".hh", ".cuh", ".inl")


def byte_count(text):
    """'200M', '1G', '512K' or a plain number of bytes."""
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    digits = text[:-1] if scale > 1 else text
    if not digits.isdigit():
        raise argparse.ArgumentTypeError(f"a byte count such as 200M, not {text!r}")
    return int(digits) * scale


def default_roots():
    paths = sysconfig.get_paths()
    roots = [paths["stdlib"], paths["purelib"], paths["platlib"], *site.getsitepackages(), "/usr/include",
             "/usr/local/cuda/include"]
    unique = []
    for root in roots:
        real = os.path.realpath(root)
        if os.path.isdir(real) and real not in unique:
            unique.append(real)
    return unique


def files_under(roots, suffixes):
    """Every matching regular file under the roots, each once, in a fixed order: root by root, paths sorted."""
    seen = set()
    for root in roots:
        found = []
        for folder, folders, names in os.walk(root):
            folders.sort()
            found.extend(os.path.join(folder, name) for name in names if name.endswith(suffixes))
        for path in sorted(found):
            real = os.path.realpath(path)
            if real not in seen and os.path.isfile(real):
                seen.add(real)
                yield real


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", help="the corpus file to write")
    parser.add_argument("--roots", nargs="+", default=None, help="folders to read (default: see above)")
    parser.add_argument("--suffixes", nargs="+", default=list(SUFFIXES), help="file name endings to take")
    parser.add_argument("--min-bytes", type=byte_count, default=0, help="fail when the corpus is smaller")
    args = parser.parse_args(argv)
    roots = args.roots or default_roots()
    contents = {}  # SHA-256 -> path: each content once (a file vendored or installed twice is taken once)
    for path in files_under(roots, tuple(args.suffixes)):
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue  # unreadable: left out, the same way on every run of this machine
        if data:
            contents.setdefault(hashlib.sha256(data).digest(), path)
    digest, total, files = hashlib.sha256(), 0, 0
    with open(args.output, "wb") as out:
        for key in sorted(contents):
            with open(contents[key], "rb") as f:
                data = f.read()
            out.write(data)
            digest.update(data)
            total += len(data)
            files += 1
    print(f"make_corpus: {args.output}: {total} bytes from {files} files, sha256 {digest.hexdigest()}; "
          f"roots {' '.join(roots)}")
    if total < args.min_bytes:
        print(f"make_corpus: {total} bytes is less than --min-bytes {args.min_bytes}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
