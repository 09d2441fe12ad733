#!/usr/bin/env python3
"""The structure of spack.yaml and the in-repo Spack recipe, without Spack (which is not a
Debian package; what this cannot check is `spack concretize` itself): every spec a string
(an unquoted 'hwloc@2:' is a YAML mapping), the required specs with their variants, oneDNN
held to the 2.x API the code uses, UCX with the InfiniBand transports the job profiles name
(+rc, +dc, +ud, +mlx5_dv), Slurm and PMIx as non-buildable externals, reuse, a view, Lmod
modules in one Core tree (hierarchy: [], dlperf a core spec), dlperf developed from this
checkout through a Spack 1.x repository (spack/spack_repo/<namespace>/repo.yaml with a v2
package API, packages/dlperf/package.py importing its build systems from spack_repo.builtin)
and the recipe depending on every library the CMake build finds.
    spack_yaml_test.py SOURCE_DIR
Each problem is reported on one line; exit 1 if any. Exit 77 (skipped) without python3-yaml."""
import ast
import os
import re
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
        if not isinstance(s, str):
            continue  # reported above: every spec must be a string
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
    "ucx": ["+cuda", "+verbs", "+rdmacm", "+rc", "+dc", "+ud", "+mlx5_dv"],
    "hdf5": [],
    "boost": ["+program_options"],
    "nlohmann-json": [],
    "onednn": [],
    "hwloc": [],
    "nlohmann-json": [],
    "libjpeg-turbo": [],
    "cmake": [],
}
for name, variants in required.items():
    s = spec_named(specs, name)
    check(s is not None, f"spack.yaml: spec '{name}' missing from spack.specs")
    for v in variants:
        check(s is None or v in s, f"spack.yaml: spec '{name}' lacks '{v}' (got '{s}')")



def onednn_2x(spec):
    """True when a spec pins oneDNN inside 2.x (@2.6:2, @2.7.3, @=2.7.3, @2:2.7 ...)."""
    m = re.search(r"@=?([0-9.]*)(?::([0-9.]*))?", spec or "")
    if not m:
        return False
    lo, hi = m.group(1), m.group(2)
    if m.group(0).find(":") < 0:  # one version or a prefix: 2, 2.7, 2.7.3
        return lo.split(".")[0] == "2"
    return bool(hi) and hi.split(".")[0] == "2" and (not lo or lo.split(".")[0] == "2")


check(onednn_2x(spec_named(specs, "onednn")),
      f"spack.yaml: onednn must be held to the 2.x API the code uses, e.g. onednn@2.6:2 (got '{spec_named(specs, 'onednn')}')")

packages = env.get("packages", {})
req = packages.get("onednn", {}).get("require", "")
check(onednn_2x(req if isinstance(req, str) else " ".join(req)),
      "spack.yaml: packages.onednn.require must hold oneDNN to 2.x as well (site configs may ask for onednn elsewhere)")
req = packages.get("ucx", {}).get("require", "")
for v in ("+rc", "+verbs"):
    check(v in (req if isinstance(req, str) else " ".join(req)), f"spack.yaml: packages.ucx.require lacks {v}")
check(env.get("concretizer", {}).get("reuse") is True, "spack.yaml: concretizer.reuse must be true (use the site's installs and externals)")
for ext in ("slurm", "pmix"):
    p = packages.get(ext, {})
    check(p.get("buildable") is False, f"spack.yaml: packages.{ext}.buildable must be false (the site's {ext})")
    exts = p.get("externals", [])
    check(bool(exts) and all("spec" in e and "prefix" in e for e in exts), f"spack.yaml: packages.{ext}.externals needs spec and prefix")
    check(bool(exts) and all(e["spec"].startswith(ext) for e in exts), f"spack.yaml: packages.{ext}.externals spec must name {ext}")

check("view" in env and env["view"] not in (False, None), "spack.yaml: spack.view missing or disabled")
modules = env.get("modules", {}).get("default", {})
check("lmod" in modules.get("enable", []), "spack.yaml: modules.default.enable must include lmod")
lmod = modules.get("lmod", {})
check("core_compilers" in lmod, "spack.yaml: modules.default.lmod.core_compilers missing")
check(lmod.get("hierarchy") == [], "spack.yaml: modules.default.lmod.hierarchy must be [] (else dlperf sits under an MPI layer, not in Core)")
check("dlperf" in lmod.get("core_specs", []), "spack.yaml: modules.default.lmod.core_specs must list dlperf")

dev = env.get("develop", {}).get("dlperf", {})
check(dev.get("path") in (".", "./"), "spack.yaml: develop.dlperf.path must be . (this checkout)")
check(str(dev.get("spec", "")).startswith("dlperf@"), "spack.yaml: develop.dlperf.spec must pin a version (dlperf@=main)")
# Spack 1.x repositories: a mapping name -> path (or the older list of paths); $env is this
# directory. The path is spack_repo/<namespace> holding repo.yaml and packages/.
repos = env.get("repos", {})
paths = list(repos.values()) if isinstance(repos, dict) else list(repos)
paths = [os.path.normpath(os.path.join(src, p.replace("$env", src) if isinstance(p, str) else "")) for p in paths]
repo_dir = next((p for p in paths if os.path.isfile(os.path.join(p, "repo.yaml"))), None)
check(repo_dir is not None, f"spack.yaml: repos must name the in-repo package repository (a directory with repo.yaml); got {repos}")
recipe = None
if repo_dir:
    check(os.path.basename(os.path.dirname(repo_dir)) == "spack_repo",
          f"spack.yaml: the repository {repo_dir} must sit in a spack_repo/ directory (Spack 1.x layout)")
    with open(os.path.join(repo_dir, "repo.yaml")) as f:
        repo = yaml.safe_load(f).get("repo", {})
    check(repo.get("namespace") == os.path.basename(repo_dir), "repo.yaml: repo.namespace must equal its directory's name")
    check(re.fullmatch(r"v2\.\d+", str(repo.get("api", ""))) is not None,
          f"repo.yaml: repo.api must declare a Spack 1.x package API, v2.N (got {repo.get('api')})")
    recipe = os.path.join(repo_dir, "packages", "dlperf", "package.py")
    check(os.path.isfile(recipe), f"{recipe} missing")
check(not os.path.exists(os.path.join(src, "spack", "packages")), "spack/packages: the pre-1.0 layout is left behind")

tree = ast.parse(open(recipe).read(), recipe) if recipe and os.path.isfile(recipe) else ast.Module(body=[], type_ignores=[])
# Spack 1.x: build systems are in the builtin repository, not in spack.package.
imports = {(n.module, a.name) for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
for mod, name in (("spack_repo.builtin.build_systems.cmake", "CMakePackage"), ("spack_repo.builtin.build_systems.cuda", "CudaPackage"),
                  ("spack.package", "*")):
    check((mod, name) in imports, f"package.py: 'from {mod} import {name}' missing (Spack 1.x package API)")
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
    for d in ("mpi", "hdf5", "boost", "onednn", "hwloc", "nlohmann-json", "libjpeg-turbo", "pkgconfig", "cmake", "cuda", "cudnn", "nccl"):
        check(d in deps, f"package.py: depends_on('{d}...') missing")
    onednn = [n.args[0].value for n in ast.walk(classes[0]) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "depends_on"
              and n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value.startswith("onednn")]
    check(bool(onednn) and all(onednn_2x(d) for d in onednn), f"package.py: depends_on('onednn...') must hold it to 2.x (got {onednn})")
    names = {n.name for n in ast.walk(classes[0]) if isinstance(n, ast.FunctionDef)}
    check("cmake_args" in names, "package.py: cmake_args missing")

for p in problems:
    print(p)
if problems:
    sys.exit(1)
print(f"spack.yaml: {len(specs)} specs, oneDNN 2.x, UCX +rc, externals slurm and pmix, reuse, view, lmod modules in Core, "
      f"dlperf developed from {os.path.relpath(repo_dir, src)} (Spack 1.x layout): ok")
