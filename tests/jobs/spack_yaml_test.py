#!/usr/bin/env python3
"""The structure of spack.yaml and the in-repo Spack recipe, without Spack (which is not a
Debian package; what this cannot check is `spack concretize` itself): every spec a string
(an unquoted 'hwloc@2:' is a YAML mapping), the required specs with their variants, cuda_arch
named once, Open MPI 4.1 to 5 keeping mpirun, oneDNN 2.x and 3.x (Debian 12 and 13), UCX with the InfiniBand transports the job profiles name
(+rc, +dc, +ud, +mlx5_dv), Slurm and PMIx as non-buildable externals, reuse, a view, Lmod
modules in one Core tree (hierarchy: [], dlperf a core spec), dlperf developed from this
checkout through a Spack 1.x repository (spack/spack_repo/<namespace>/repo.yaml with a v2
package API, packages/dlperf/package.py importing its build systems from spack_repo.builtin)
and the recipe depending on every library the CMake build finds, each lower bound equal to the
minimum CMake checks (issue 27 item 10, issue 23 item 3).
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
    "dlperf": ["+cuda", "cuda_arch=="],
    "cuda": [],
    "cudnn": [],
    "nccl": ["+cuda"],
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



def version_tuple(v):
    return tuple(int(x) for x in v.split(".") if x.isdigit())


def version_range(spec):
    """(low, high) of a spec's version ('@2.6:3' -> ((2, 6), (3,)); '@2.7' -> ((2, 7), (2, 7));
    '@3:' -> ((3,), None)); None without a version."""
    m = re.search(r"@=?([0-9.]*)(:?)([0-9.]*)", spec or "")
    if not m:
        return None
    lo, colon, hi = m.group(1), m.group(2), m.group(3)
    if not colon:
        return (version_tuple(lo), version_tuple(lo))
    return (version_tuple(lo) if lo else (), version_tuple(hi) if hi else None)


def admits(spec, version):
    """Whether a spec's version range admits `version` (Spack: '@2.6:3' admits 3.7, '@2.7' 2.7.4)."""
    r = version_range(spec)
    if r is None:
        return True
    v = version_tuple(version)
    lo, hi = r
    return v >= lo and (hi is None or v[: len(hi)] <= hi)


def same_version(a, b):
    """2 and 2.0 are one version."""
    n = max(len(a), len(b))
    return a + (0,) * (n - len(a)) == b + (0,) * (n - len(b))


# oneDNN: Debian 12's 2.7 and Debian 13's 3.7 (Spack's default line) both (issue 23 item 3).
for where, spec in (("spack.specs", spec_named(specs, "onednn")),
                    ("packages.onednn.require", str(env.get("packages", {}).get("onednn", {}).get("require", "")))):
    for v in ("2.7.3", "3.7.2"):
        check(admits(spec, v), f"spack.yaml: {where} must admit oneDNN {v} (got '{spec}')")
# Open MPI 4.1 (Debian 12) and 5 (Debian 13, most sites).
for v in ("4.1.4", "5.0.7"):
    check(admits(spec_named(specs, "openmpi"), v), f"spack.yaml: openmpi must admit {v} (got '{spec_named(specs, 'openmpi')}')")
# cuda_arch in one place: one spec line names it (propagated with ==), nothing else does.
raw = [ln.split("#")[0] for ln in open(os.path.join(src, "spack.yaml"))]
arch_lines = [ln.strip() for ln in raw if "cuda_arch" in ln]
check(len(arch_lines) == 1 and "cuda_arch==" in arch_lines[0],
      f"spack.yaml: cuda_arch must be set once, propagated from the dlperf spec (cuda_arch==NN); found {arch_lines}")

packages = env.get("packages", {})
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
check(all("@" not in str(c) for c in lmod.get("core_compilers", [])),
      f"spack.yaml: core_compilers must not pin a compiler version (got {lmod.get('core_compilers')})")
# Open MPI 4.1 with schedulers=slurm needs +legacylaunchers (else Spack replaces mpirun by a stub
# that README's mpirun hits); 5 has no such variant, so requiring it for every version ruled 5 out.
req = packages.get("openmpi", {}).get("require", "")
groups = req if isinstance(req, list) else [req]
plain = " ".join(g for g in groups if isinstance(g, str))
conditional = [g.get("any_of", []) + g.get("one_of", []) for g in groups if isinstance(g, dict)]
check("+legacylaunchers" not in plain, "spack.yaml: packages.openmpi.require must not ask +legacylaunchers of every version: Open MPI 5 has no such variant")
check("schedulers=slurm" not in plain or any("+legacylaunchers" in c and "@5:" in c for c in conditional),
      "spack.yaml: packages.openmpi.require needs any_of: ['@5:', '+legacylaunchers'] (mpirun kept on 4.1)")
check("+legacylaunchers" not in (spec_named(specs, "openmpi") or ""), "spack.yaml: the openmpi spec must not ask +legacylaunchers (no such variant on 5)")
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
    specs_of = {}
    for n in ast.walk(classes[0]):
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "depends_on" and n.args and isinstance(n.args[0], ast.Constant):
            v = n.args[0].value
            specs_of.setdefault(v.split("@")[0].split("+")[0].split("~")[0].split()[0], []).append(v)
    # Each depends_on's lower bound is the minimum the CMake build checks: lower, Spack may pick
    # a version CMake refuses; higher, it refuses versions the build supports.
    cmake_text = open(os.path.join(src, "CMakeLists.txt")).read() + open(os.path.join(src, "cmake", "DlperfDependencies.cmake")).read()
    minimums = {
        "cmake": r"cmake_minimum_required\(VERSION ([0-9.]+)",
        "onednn": r"dnnl_VERSION VERSION_LESS ([0-9.]+)",
        "nlohmann-json": r"find_package\(nlohmann_json ([0-9.]+)",
        "hwloc": r"hwloc>=([0-9.]+)",
        "libjpeg-turbo": r"DLPERF_JPEG_VERSION VERSION_LESS ([0-9.]+)",
    }
    checked = 0
    for dep, pattern in minimums.items():
        m = re.search(pattern, cmake_text)
        check(m is not None, f"CMake: no minimum version found for {dep} ({pattern})")
        if not m:
            continue
        want = version_tuple(m.group(1))
        for where, spec in [("package.py: depends_on", s) for s in specs_of.get(dep, [])] + [("spack.yaml: spec", spec_named(specs, dep))]:
            if not spec:
                continue
            r = version_range(spec)
            check(r is not None and same_version(r[0], want),
                  f"{where} '{spec}': lower bound differs from CMake's minimum {m.group(1)} for {dep}")
            checked += 1
    check(checked >= 10, f"only {checked} version bounds compared with CMake's")
    for spec in specs_of.get("onednn", []):
        for v in ("2.7.3", "3.7.2"):
            check(admits(spec, v), f"package.py: depends_on('{spec}') must admit oneDNN {v} (Debian 12 and 13)")
    names = {n.name for n in ast.walk(classes[0]) if isinstance(n, ast.FunctionDef)}
    check("cmake_args" in names, "package.py: cmake_args missing")

for p in problems:
    print(p)
if problems:
    sys.exit(1)
print(f"spack.yaml: {len(specs)} specs, cuda_arch once, oneDNN 2.x and 3.x, Open MPI 4.1-5 with mpirun, recipe minimums = CMake's, UCX +rc, externals slurm and pmix, reuse, view, lmod modules in Core, "
      f"dlperf developed from {os.path.relpath(repo_dir, src)} (Spack 1.x layout): ok")
