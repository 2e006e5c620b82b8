"""A tiny command line over :class:`dpfl.Client` (``python3 -m dpfl``).

    python3 -m dpfl submit examples/demo-job.json [--watch]
    python3 -m dpfl watch JOB
    python3 -m dpfl list
    python3 -m dpfl status JOB
    python3 -m dpfl privacy JOB
    python3 -m dpfl model JOB [--out FILE]
    python3 -m dpfl budget create NAME --epsilon-budget E --delta D
    python3 -m dpfl budget get NAME

It reads ``$DPFL_SERVER``, ``$DPFL_TOKEN`` and ``$DPFL_CA`` (or
``--server`` and ``--token-file``) as dpfl-client does, prints JSON (``list``
and ``watch`` print one line per job or poll), and exits 1 with the
server's message on an error. dpfl-client (Go) is the full command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, List, Optional

from . import Client, DpflError, ValidationError, latest_epsilon, test_accuracy


def _line(st: Any) -> str:
    acc, eps = test_accuracy(st), latest_epsilon(st)
    rounds = (st.get("spec") or {}).get("rounds", "?")
    parts = ["%s %s round %s/%s" % (st.get("id"), st.get("state"), st.get("round", 0), rounds)]
    if acc is not None:
        parts.append("test accuracy %.4f" % acc)
    if eps is not None:
        parts.append("ε %.3f" % eps)
    return "  ".join(parts)


def _print(obj: Any) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False))


def _watch(c: Client, job_id: str) -> int:
    seen: List[Optional[str]] = [None]

    def progress(st: Any) -> None:
        line = _line(st)
        if line != seen[0]:
            print(line, flush=True)
            seen[0] = line

    st = c.watch(job_id, progress=progress)
    if st.get("message"):
        print(st["message"])
    return 0 if st.get("state") == "completed" else 1


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``);
    returns the exit status."""
    p = argparse.ArgumentParser(prog="python3 -m dpfl", description="A tiny client of dpfl-server.")
    p.add_argument("--server", help="base URL (default $DPFL_SERVER, else http://127.0.0.1:8080)")
    p.add_argument("--token-file", help="file holding the API token (default $DPFL_TOKEN)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per HTTP exchange (default 60)")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("submit", help="create a job from a JSON spec file")
    s.add_argument("file")
    s.add_argument("--watch", action="store_true", help="then watch it until it ends")
    sub.add_parser("watch", help="poll a job until it ends").add_argument("job")
    sub.add_parser("list", help="list jobs")
    sub.add_parser("status", help="a job's status (JSON)").add_argument("job")
    sub.add_parser("privacy", help="a job's privacy report (JSON)").add_argument("job")
    m = sub.add_parser("model", help="a job's latest model (JSON: architecture, round, params)")
    m.add_argument("job")
    m.add_argument("--out", help="write it here instead of stdout")
    b = sub.add_parser("budget", help="create or show a shared privacy budget")
    bsub = b.add_subparsers(dest="bcmd", required=True)
    bc = bsub.add_parser("create")
    bc.add_argument("name")
    bc.add_argument("--epsilon-budget", type=float, required=True, help="ε_max")
    bc.add_argument("--delta", type=float, required=True, help="δ")
    bsub.add_parser("get").add_argument("name")
    a = p.parse_args(argv)

    c = Client(a.server, token_file=a.token_file, timeout=a.timeout)
    try:
        if a.cmd == "submit":
            st = c.submit(a.file)
            print(st["id"], flush=True)
            return _watch(c, st["id"]) if a.watch else 0
        if a.cmd == "watch":
            return _watch(c, a.job)
        if a.cmd == "list":
            for st in c.list():
                print(_line(st))
            return 0
        if a.cmd == "status":
            _print(c.status(a.job))
        elif a.cmd == "privacy":
            _print(c.privacy(a.job))
        elif a.cmd == "model":
            mod = c.model(a.job, as_numpy=False)
            out = {"job_id": mod.job_id, "model": mod.model, "round": mod.round, "num_params": mod.num_params, "params": mod.params}
            if a.out:
                with open(a.out, "w", encoding="utf-8") as f:
                    json.dump(out, f)
                print("wrote %s (%s, %d parameters, round %d)" % (a.out, mod.model, mod.num_params, mod.round))
            else:
                print(json.dumps(out))
        elif a.cmd == "budget":
            _print(c.create_budget(a.name, a.epsilon_budget, a.delta) if a.bcmd == "create" else c.budget(a.name))
        return 0
    except ValidationError as e:
        print("python3 -m dpfl: %s" % e, file=sys.stderr)
        for fe in e.errors:
            print("  %s (%s): %s" % (fe.field, fe.rule, fe.message), file=sys.stderr)
        return 1
    except (DpflError, OSError) as e:
        print("python3 -m dpfl: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
