#!/usr/bin/python3
"""Checks the runs a multi-node job wrote, with h5py alone (docs/trace-schema.md), as a user
would read them: every run complete, spread over the expected number of hosts with the right
number of ranks on each, local ranks 0..R-1 on every host, every rank's host named in the trace,
the data-parallel replicas bit-identical after training (one parameter checksum per rank).

  check_multinode_runs.py [--host-regex RE] [--job-id ID] [--incomplete N] --expect MODEL:NODES:RANKS_PER_NODE:RUNS ... FILE...

Each --expect asks for exactly RUNS complete runs of MODEL on NODES x RANKS_PER_NODE; a run
matching no --expect is an error. --incomplete N: exactly N runs are not complete (a fault
ended them); they are listed with their status and reason, not checked further. --job-id ID:
every run (complete or not) was run by Slurm job ID, as in a job's own results.d/<job>_<ID>.h5.
Prints one line per run; exits 1 with the reasons on failure.
"""
import argparse
import collections
import re
import sys

import h5py


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def check_run(name, run, host_re, job_id):
    """Returns (key, problems, summary) for one run group."""
    a = run.attrs
    model, nodes, per_node, world = text(a["model"]), int(a["nodes"]), int(a["devices_per_node"]), int(a["world_size"])
    key = (model, nodes, per_node)
    problems = []
    status = text(a["status"])
    if status != "complete":
        problems.append(f"status {status} ({text(a['status_reason'])})")
    if world != nodes * per_node:
        problems.append(f"world_size {world} != nodes {nodes} x devices_per_node {per_node}")
    if not text(a["slurm_job_id"]):
        problems.append("no slurm_job_id: not run under Slurm")
    elif job_id is not None and text(a["slurm_job_id"]) != job_id:
        problems.append(f"slurm_job_id {text(a['slurm_job_id'])}: not job {job_id}, whose file this is")
    for needed in ("rank_host", "local_rank", "param_checksum", "iterations_completed"):
        if needed not in run:
            problems.append(f"dataset {needed} missing")
    if problems:
        return key, problems, ""

    hosts = [text(h) for h in run["rank_host"][:]]
    local = [int(x) for x in run["local_rank"][:]]
    sums = [int(x) for x in run["param_checksum"][:]]
    done = [int(x) for x in run["iterations_completed"][:]]
    if len(hosts) != world:
        problems.append(f"{len(hosts)} rank hosts for {world} ranks")
    bad = [h for h in hosts if not re.fullmatch(host_re, h)]
    if bad:
        problems.append(f"host names {sorted(set(bad))} are not this cluster's nodes ({host_re})")
    by_host = collections.OrderedDict()
    for r, h in enumerate(hosts):
        by_host.setdefault(h, []).append(r)
    if len(by_host) != nodes:
        problems.append(f"ranks on {len(by_host)} hosts {list(by_host)}, expected {nodes}")
    for h, ranks in by_host.items():
        if len(ranks) != per_node:
            problems.append(f"host {h} has ranks {ranks}, expected {per_node} ranks per node")
        if sorted(local[r] for r in ranks) != list(range(len(ranks))) or [local[r] for r in ranks] != sorted(local[r] for r in ranks):
            problems.append(f"host {h}: local ranks {[local[r] for r in ranks]} of ranks {ranks}, expected 0..{len(ranks) - 1} in rank order")
    attr_hosts = [text(h) for h in a["hosts"]]
    if attr_hosts != list(by_host):
        problems.append(f"attribute hosts {attr_hosts} != the ranks' hosts in rank order {list(by_host)}")
    if len(set(sums)) != 1 or sums[0] == 0:
        problems.append("replicas differ or checksum missing: " + ", ".join(f"rank {r}: {s:#018x}" for r, s in enumerate(sums)))
    planned = int(a["iterations"])
    if any(d != planned for d in done):
        problems.append(f"iterations completed {done}, planned {planned}")
    placement = "; ".join(f"{h}: ranks {ranks} local {[local[r] for r in ranks]}" for h, ranks in by_host.items())
    summary = f"{name}: {model} {nodes}x{per_node} job {text(a['slurm_job_id'])} complete; {placement}; replicas {sums[0]:#018x}"
    return key, problems, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host-regex", default=r".+")
    ap.add_argument("--expect", action="append", default=[], help="MODEL:NODES:RANKS_PER_NODE:RUNS")
    ap.add_argument("--incomplete", type=int, default=0, help="runs a fault ended (not complete)")
    ap.add_argument("--job-id", help="the Slurm job every run must come from")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    expected = {}
    for e in args.expect:
        model, nodes, per_node, runs = e.split(":")
        expected[(model, int(nodes), int(per_node))] = int(runs)

    failures, counts, incomplete = [], collections.Counter(), 0
    for path in args.files:
        with h5py.File(path, "r") as f:
            for name, run in f["runs"].items():
                status = text(run.attrs["status"])
                if status != "complete" and incomplete < args.incomplete:
                    incomplete += 1
                    print(f"{path}:{name}: {status} (not checked): {text(run.attrs['status_reason'])}")
                    if args.job_id is not None and text(run.attrs["slurm_job_id"]) != args.job_id:
                        failures.append(f"{path}:{name}: slurm_job_id {text(run.attrs['slurm_job_id'])}, not job {args.job_id}")
                    continue
                key, problems, summary = check_run(name, run, args.host_regex, args.job_id)
                counts[key] += 1
                if key not in expected:
                    problems.append(f"unexpected configuration {key}")
                for p in problems:
                    failures.append(f"{path}:{name}: {p}")
                if not problems:
                    print(f"{path}:{summary}")
    if incomplete != args.incomplete:
        failures.append(f"{args.incomplete} runs a fault ended expected, found {incomplete}")
    for key, n in expected.items():
        if counts[key] != n:
            failures.append(f"{n} runs of {key[0]} on {key[1]} nodes x {key[2]} ranks expected, found {counts[key]}")
    for f in failures:
        print("FAIL " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
