#!/usr/bin/env python3
"""The structure of spack.yaml and the in-repo Spack recipe, without Spack: the required
specs with their variants, Slurm and PMIx as non-buildable externals, a view, Lmod module
generation, dlperf developed from this checkout through spack/ (repo.yaml + package.py).
    spack_yaml_test.py SOURCE_DIR
Each problem is reported on one line; exit 1 if any. Exit 77 (skipped) without python3-yaml."""
import ast
import os
import sys

try:
    import yaml
except ImportError:
    print("python3-yaml not installed (scripts/setup-debian.sh --tests installs it); skipped")
    sys.exit(77)

src = sys.argv[1]
problems = []


def check(ok, what):
    if not ok:
        problems.append(what)


def spec_named(specs, name):
    """The first spec whose package name is `name` ('openmpi@4.1 fabrics=ucx' -> 'openmpi')."""
    for s in specs:
        head = s.split()[0]
        for sep in "@+~%":
            head = head.split(sep)[0]
        if head == name:
            return s
    return None


with open(os.path.join(src, "spack.yaml")) as f:
    doc = yaml.safe_load(f)
check(isinstance(doc, dict) and "spack" in doc, "spack.yaml: top-level key 'spack' missing")
env = doc.get("spack", {}) if isinstance(doc, dict) else {}
specs = env.get("specs", [])
check(isinstance(specs, list) and all(isinstance(s, str) for s in specs), "spack.yaml: spack.specs must be a list of strings")

required = {
    "dlperf": ["+cuda", "cuda_arch="],
    "cuda": [],
    "cudnn": [],
    "nccl": ["cuda_arch="],
    "openmpi": ["fabrics=ucx", "schedulers=slurm", "+cuda"],
    "ucx": ["+cuda", "+verbs", "+rdmacm"],
    "hdf5": [],
    "boost": ["+program_options"],
    "onednn": [],
    "libjpeg-turbo": [],
    "cmake": [],
}
for name, variants in required.items():
    s = spec_named(specs, name)
    check(s is not None, f"spack.yaml: spec '{name}' missing from spack.specs")
    for v in variants:
        check(s is None or v in s, f"spack.yaml: spec '{name}' lacks '{v}' (got '{s}')")

packages = env.get("packages", {})
for ext in ("slurm", "pmix"):
    p = packages.get(ext, {})
    check(p.get("buildable") is False, f"spack.yaml: packages.{ext}.buildable must be false (the site's {ext})")
    exts = p.get("externals", [])
    check(bool(exts) and all("spec" in e and "prefix" in e for e in exts), f"spack.yaml: packages.{ext}.externals needs spec and prefix")
    check(bool(exts) and all(e["spec"].startswith(ext) for e in exts), f"spack.yaml: packages.{ext}.externals spec must name {ext}")

check("view" in env and env["view"] not in (False, None), "spack.yaml: spack.view missing or disabled")
modules = env.get("modules", {}).get("default", {})
check("lmod" in modules.get("enable", []), "spack.yaml: modules.default.enable must include lmod")
check("core_compilers" in modules.get("lmod", {}), "spack.yaml: modules.default.lmod.core_compilers missing")

dev = env.get("develop", {}).get("dlperf", {})
check(dev.get("path") in (".", "./"), "spack.yaml: develop.dlperf.path must be . (this checkout)")
check(str(dev.get("spec", "")).startswith("dlperf@"), "spack.yaml: develop.dlperf.spec must pin a version (dlperf@=main)")
repos = env.get("repos", [])
check(any(os.path.abspath(os.path.join(src, r)) == os.path.abspath(os.path.join(src, "spack")) for r in repos),
      "spack.yaml: repos must include ./spack (the dlperf recipe)")

with open(os.path.join(src, "spack", "repo.yaml")) as f:
    repo = yaml.safe_load(f)
check(bool(repo.get("repo", {}).get("namespace")), "spack/repo.yaml: repo.namespace missing")

recipe = os.path.join(src, "spack", "packages", "dlperf", "package.py")
tree = ast.parse(open(recipe).read(), recipe)
classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Dlperf"]
check(len(classes) == 1, "package.py: class Dlperf missing")
if classes:
    bases = {b.id for b in classes[0].bases if isinstance(b, ast.Name)}
    check({"CMakePackage", "CudaPackage"} <= bases, f"package.py: Dlperf must derive from CMakePackage and CudaPackage (got {bases})")
    deps = set()
    for node in ast.walk(classes[0]):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "depends_on" and node.args:
            a = node.args[0]
            if isinstance(a, ast.Constant):
                deps.add(a.value.split("@")[0].split("+")[0].split("~")[0].split()[0])
    for d in ("mpi", "hdf5", "boost", "onednn", "libjpeg-turbo", "cmake", "cuda", "cudnn", "nccl"):
        check(d in deps, f"package.py: depends_on('{d}...') missing")
    names = {n.name for n in ast.walk(classes[0]) if isinstance(n, ast.FunctionDef)}
    check("cmake_args" in names, "package.py: cmake_args missing")

for p in problems:
    print(p)
if problems:
    sys.exit(1)
print(f"spack.yaml: {len(specs)} specs, externals slurm and pmix, view, lmod modules, dlperf developed from ./spack: ok")
