# Copyright: (c) 2026, sm120.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build what the real-GPU harness carries to the H200 host: one xz archive of the packages it lacks.

The device tool carries at most 64 MiB a call, the working tree included, and the host reaches no package
index. So the wheels of carry.txt (CPython 3.12, manylinux x86_64, as pinned, no dependency resolution) are
downloaded here, installed into one folder with ``pip install --target``, pruned of what the triton
attention path never loads, and packed with xz into ``.real-gpu/site.tar.xz`` (an ignored path the call
names in ``carry``). It prints each wheel's size, what was left out and why, and the archive's size.

    python3 benchmarks/real_gpu/build_carry.py            # .real-gpu/site.tar.xz
    python3 benchmarks/real_gpu/build_carry.py --python 3.11 --out /tmp/hostsim-carry
        # the same pins for another Python: to try the imports on this machine first

Needs pip and xz; downloads once into --cache (about 450 MB, most of it sglang-kernel's FlashAttention 3).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_26_x86_64",
             "manylinux_2_24_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_5_x86_64",
             "manylinux1_x86_64")

# Left out of the installed folder: path pattern (relative to it) -> why. Each was checked against the wheel:
# sgl_kernel/__init__.py imports none of these, load_utils loads sm90/common_ops on capability 9.0, and only
# sgl_kernel/flash_attn.py (FlashAttention 3) imports flash_ops, which the triton attention backend never does.
PRUNE = {
    "sgl_kernel/flash_ops.abi3.so": "FlashAttention 3 (1.12 GB unpacked): only the fa3 attention backend loads it; "
                                    "the harness serves with --attention-backend triton",
    "sgl_kernel/sm100": "kernels built for SM100 (Blackwell); the host is SM90, which loads sgl_kernel/sm90",
    "sgl_kernel/infllm_ops*": "InfLLM sparse attention, not on the triton path",
    "xgrammar/lib": "libxgrammar.a (62 MB), a static library for linking C++ against; Python loads the bindings",
    "ansible_test": "ansible-test, the collection's sanity tool, which the harness does not run",
    "bin": "console scripts with this machine's interpreter in their #! line; the harness runs python3 -m",
}
# Shared libraries whose debug sections are most of their size (xgrammar's bindings: 53 MB, 3 MB stripped).
STRIP = ("xgrammar/*.so",)


def pins(path):
    """name==version lines of carry.txt, comments and blanks skipped; anything else refused by line."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if "==" not in line or any(c in line for c in "<>!~;[ "):
            raise SystemExit("%s:%d: %r is not name==version: every package the host lacks is pinned"
                             % (path, number, line))
        found.append(line)
    return found


def human(size):
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return "%.1f %s" % (size, unit) if unit != "B" else "%d B" % size
        size /= 1024.0
    return str(size)


def tree_size(path):
    if path.is_file() or path.is_symlink():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def pip(*args):
    command = [sys.executable, "-m", "pip", *args]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(command), result.stdout[-3000:] + result.stderr[-3000:]))
    return result


def platform_args(python):
    major, minor = python.split(".")
    args = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp",
            "--abi", "cp%s%s" % (major, minor), "--abi", "abi3", "--abi", "none"]
    for platform in PLATFORMS + ("any",):
        args += ["--platform", platform]
    return args


def download(requirements, cache, python):
    cache.mkdir(parents=True, exist_ok=True)
    pip("download", "-q", "--no-deps", "-d", str(cache), *platform_args(python), *requirements)
    wheels = []
    for requirement in requirements:
        name, version = requirement.split("==")
        stem = name.replace("-", "_").lower()
        matches = [w for w in cache.glob("*.whl")
                   if w.name.lower().startswith("%s-%s-" % (stem, version)) and _fits(w.name, python)]
        if not matches:
            raise SystemExit("no wheel of %s for CPython %s in %s" % (requirement, python, cache))
        wheels.append(sorted(matches)[-1])
    return wheels


def _fits(filename, python):
    tag = "cp" + python.replace(".", "")
    pytag = filename[:-4].split("-")[-3]
    abi3 = pytag.startswith("cp") and "abi3" in filename and int(pytag[2:]) <= int(tag[2:])
    return pytag.startswith("py") or pytag == tag or abi3


def prune(site):
    """Remove PRUNE's paths; return [(path, size, why)]."""
    removed = []
    for pattern, why in PRUNE.items():
        for path in sorted(site.glob(pattern)) if any(c in pattern for c in "*?[") else [site / pattern]:
            if not path.exists():
                continue
            size = tree_size(path)
            shutil.rmtree(path) if path.is_dir() else path.unlink()
            removed.append((str(path.relative_to(site)), size, why))
    for pattern in STRIP:
        for path in sorted(site.glob(pattern)):
            before = path.stat().st_size
            if shutil.which("strip") and subprocess.run(["strip", "--strip-debug", str(path)], check=False).returncode == 0:
                removed.append((str(path.relative_to(site)) + " (debug sections)", before - path.stat().st_size,
                                "debug information, not code"))
    return removed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requirements", type=Path, default=HERE / "carry.txt")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache/sm120-sglang/real-gpu-wheels")
    parser.add_argument("--python", default="3.12", help="the host's Python (3.12 on the H200 host)")
    parser.add_argument("--out", type=Path, default=ROOT / ".real-gpu",
                        help="where site.tar.xz goes (.real-gpu, ignored by git, carried by the call)")
    parser.add_argument("--unpacked", action="store_true", help="also keep the installed folder as <out>/site")
    args = parser.parse_args(argv)

    requirements = pins(args.requirements)
    wheels = download(requirements, args.cache / ("cp" + args.python.replace(".", "")), args.python)
    print("%d wheels, CPython %s:" % (len(wheels), args.python))
    for wheel in sorted(wheels, key=lambda w: -w.stat().st_size):
        print("  %10s  %s" % (human(wheel.stat().st_size), wheel.name))
    print("  %10s  in all" % human(sum(w.stat().st_size for w in wheels)))

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="real-gpu-site.") as work:
        site = Path(work) / "site"
        pip("install", "-q", "--no-deps", "--no-compile", "--no-index", "--target", str(site),
            *platform_args(args.python), *map(str, wheels))
        installed = tree_size(site)
        removed = prune(site)
        print("left out:")
        for path, size, why in removed:
            print("  %10s  %s: %s" % (human(size), path, why))
        print("installed %s, %s after leaving those out" % (human(installed), human(tree_size(site))))
        archive = args.out / "site.tar.xz"
        partial = archive.with_suffix(".xz.partial")
        with tarfile.open(partial, "w:xz", preset=6) as tar:
            tar.add(site, arcname="site")
        os.replace(partial, archive)
        if args.unpacked:
            shutil.rmtree(args.out / "site", ignore_errors=True)
            shutil.copytree(site, args.out / "site", symlinks=True)
    print("%s: %s" % (archive, human(archive.stat().st_size)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
