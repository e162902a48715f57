#!/usr/bin/env python3
"""The documentation test: a page cannot drift from the program.

Every fenced code block of README.md and docs/*.md in a language a reader might run (sh, bash, python, cpp, c,
cmake) carries a marker, an HTML comment alone on the line before its opening fence:

  <!-- doc: run -->           a shell block, run with bash (errexit, pipefail) from the repository root after
                              `. scripts/mpi_env.sh`, on CPU ranks, after scripts/build.sh
  <!-- doc: package -->       a block that test/package/check_package.sh builds and runs (the C++ trainer)
  <!-- doc: skip REASON -->   not run here, and why: it needs a GPU or a cluster, it is a fragment, or CI runs it
                              elsewhere (say where)

Blocks without a language (pictures, output) need none.

usage: check_docs.py [--run] [--root DIR] [FILE ...]
  FILE defaults to README.md and docs/*.md under the root (default: this repository). Lists every block with its
  marker; with --run, runs the `run` blocks, each within --timeout seconds (600). Exits 1 when a block is unmarked
  or marked in a way it does not know, when a skip gives no reason, or when a run block fails.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

MARKED_LANGUAGES = {"sh", "bash", "python", "cpp", "c", "cmake"}
MARKER = re.compile(r"^<!-- doc: (run|package|skip)(?: (.*?))? -->$")


class Block:
    def __init__(self, path, line, language, marker, reason, text):
        self.path, self.line, self.language = path, line, language
        self.marker, self.reason, self.text = marker, reason, text

    def where(self):
        return f"{self.path}:{self.line}"


def blocks_of(path, root):
    """Every fenced block of `path` with the marker on the line before it (None where there is none)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    relative = os.path.relpath(path, root)
    found, index = [], 0
    while index < len(lines):
        opening = re.match(r"^```(\S*)\s*$", lines[index])
        if not opening:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        previous = lines[index - 1].strip() if index > 0 else ""
        marker = MARKER.match(previous)
        found.append(Block(relative, index + 1, opening.group(1), marker.group(1) if marker else None,
                           (marker.group(2) or "").strip() if marker else "", "\n".join(lines[index + 1:end])))
        index = end + 1
    return found


def problems_of(block):
    if block.language not in MARKED_LANGUAGES:
        return []
    if block.marker is None:
        return [f"{block.where()}: a {block.language} block without a marker (<!-- doc: run|package|skip REASON -->)"]
    if block.marker == "skip" and not block.reason:
        return [f"{block.where()}: a skipped block must say why"]
    if block.marker == "run" and block.language not in ("sh", "bash"):
        return [f"{block.where()}: only shell blocks run; mark a {block.language} block package or skip"]
    return []


def run(block, root, timeout):
    script = "set -euo pipefail\ncd \"$DOC_ROOT\"\n. scripts/mpi_env.sh\n" + block.text + "\n"
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as handle:
        handle.write(script)
    environment = dict(os.environ, DOC_ROOT=root)
    try:
        result = subprocess.run(["bash", handle.name], cwd=root, env=environment, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=timeout, text=True)
        output, code = result.stdout, result.returncode
    except subprocess.TimeoutExpired as expired:
        output, code = (expired.stdout or b"").decode(errors="replace"), f"timeout after {timeout} s"
    finally:
        os.unlink(handle.name)
    return code, output


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    parser.add_argument("--run", action="store_true", help="run the blocks marked run")
    parser.add_argument("--timeout", type=int, default=600)
    arguments = parser.parse_args()
    root = os.path.abspath(arguments.root)
    files = arguments.files or [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))

    blocks = [block for path in files for block in blocks_of(path, root)]
    failures = [problem for block in blocks for problem in problems_of(block)]
    for block in blocks:
        if block.language in MARKED_LANGUAGES:
            print(f"{block.where()}: {block.language} {block.marker or 'UNMARKED'} {block.reason}".rstrip())
    if arguments.run:
        for block in blocks:
            if block.marker != "run" or problems_of(block):
                continue
            print(f"running {block.where()}:\n  " + block.text.replace("\n", "\n  "), flush=True)
            code, output = run(block, root, arguments.timeout)
            if code != 0:
                tail = "\n".join(output.rstrip().split("\n")[-20:])
                failures.append(f"{block.where()}: the block failed (exit {code}); its last lines:\n{tail}")
            else:
                print(f"  ok ({len(output.splitlines())} lines of output)", flush=True)
    for failure in failures:
        print(f"check_docs: FAIL {failure}", file=sys.stderr)
    counts = {kind: sum(1 for b in blocks if b.marker == kind) for kind in ("run", "package", "skip")}
    print(f"# {len(blocks)} blocks in {len(files)} files: {counts['run']} run, {counts['package']} package, "
          f"{counts['skip']} skipped; {'FAIL' if failures else 'PASS'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
