"""Tests of the dpfl Python client against a real dpfl-server.

The tests build nothing: $DPFL_SERVER_BIN must name a built dpfl-server
binary (scripts/test-python.sh builds one and runs these tests). The module
starts it once on a free loopback port with a fresh database in a temporary
directory, an admin and an auditor token, ``--data-dir`` Fashion-MNIST
($DPFL_DATA_DIR, default /usr/share/datasets/fashion-mnist) and
``--max-running-jobs 1`` (so that a second submission while a job runs
is refused with 429), runs small real DP jobs on it (logreg, a few rounds:
well under a second each), and stops it at the end. Without the binary or
the dataset the tests fail, saying so; nothing is skipped.

    DPFL_SERVER_BIN=/tmp/dpfl-server python3 -m unittest discover -s clients/python/tests -v
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import warnings
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)  # clients/python, which holds dpfl/
sys.path.insert(0, PACKAGE_ROOT)

import dpfl  # noqa: E402
from dpfl.errors import error_for_status  # noqa: E402

try:
    import numpy  # noqa: F401

    HAVE_NUMPY = True
except ImportError:
    HAVE_NUMPY = False

DATA_DIR = os.environ.get("DPFL_DATA_DIR", "/usr/share/datasets/fashion-mnist")
IDX_FILES = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]

ROUNDS = 4
DELTA = 1e-5
# A small real DP-FedAvg job: 600 users, Poisson rate q = 0.1 (about 60 a
# round), clip norm C = 0.5, noise multiplier z = 1.0; a fraction of a
# second on one core.
SMALL_JOB: Dict[str, Any] = {
    "name": "python client test",
    "dataset": "fashion-mnist",
    "model": "logreg",
    "population": {"size": 600, "partition": "dirichlet", "dirichlet_alpha": 1.0},
    "sampling": {"scheme": "poisson", "rate": 0.1},
    "rounds": ROUNDS,
    "client": {"epochs": 1, "batch_size": 20, "lr": 0.1},
    "dp": {"enabled": True, "clip_norm": 0.5, "noise_multiplier": 1.0, "delta": DELTA},
    "eval_every": 2,
    "seed": 7,
}
LOGREG_PARAMS = 784 * 10 + 10  # 7,850


def small_job(**changes: Any) -> Dict[str, Any]:
    """SMALL_JOB with top-level keys replaced."""
    spec = json.loads(json.dumps(SMALL_JOB))
    spec.update(changes)
    return spec


class Server:
    """A dpfl-server process on a loopback port."""

    def __init__(self, binary: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="dpfl-python-test-")
        self.token = secrets.token_hex(16)
        self.auditor_token = secrets.token_hex(16)
        self.log_path = os.path.join(self.dir, "server.log")
        self.url = "http://" + free_addr()
        env = dict(os.environ, DPFL_TOKEN=self.token, DPFL_AUDITOR_TOKEN=self.auditor_token)
        args = [
            binary,
            "--addr", self.url[len("http://"):],
            "--db", os.path.join(self.dir, "dpfl.db"),
            "--data-dir", DATA_DIR,
            "--workers", "2",
            "--max-running-jobs", "1",
        ]  # fmt: skip
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, env=env, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        probe = dpfl.Client(self.url, "", timeout=2)
        deadline = time.monotonic() + 30
        while True:
            try:
                probe.health()
                return
            except dpfl.DpflError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("dpfl-server (%s) exited with status %s before answering:\n%s" % (binary, self.proc.returncode, self.log()))
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("dpfl-server did not answer /healthz within 30 s:\n%s" % self.log())
            time.sleep(0.05)

    def client(self, token: Optional[str] = None, **kw: Any) -> dpfl.Client:
        """A client with the admin token (or ``token``)."""
        return dpfl.Client(self.url, self.token if token is None else token, **kw)

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")[-8000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def free_addr() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "127.0.0.1:%d" % s.getsockname()[1]


SERVER: Optional[Server] = None


def setUpModule() -> None:
    global SERVER
    binary = os.environ.get("DPFL_SERVER_BIN", "")
    if not binary:
        raise RuntimeError(
            "DPFL_SERVER_BIN is not set: these tests run against a real dpfl-server. Build one "
            "(go build -o /tmp/dpfl-server ./cmd/dpfl-server) and set DPFL_SERVER_BIN=/tmp/dpfl-server, "
            "or run scripts/test-python.sh, which does both"
        )
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        raise RuntimeError("DPFL_SERVER_BIN=%s is not an executable file" % binary)
    missing = [f for f in IDX_FILES if not os.path.isfile(os.path.join(DATA_DIR, f))]
    if missing:
        raise RuntimeError(
            "Fashion-MNIST is missing from %s (%s): apt-get install dataset-fashion-mnist, or set DPFL_DATA_DIR"
            % (DATA_DIR, ", ".join(missing))
        )
    SERVER = Server(binary)


def tearDownModule() -> None:
    if SERVER is not None:
        SERVER.stop()


def server() -> Server:
    assert SERVER is not None, "setUpModule did not start dpfl-server"
    return SERVER


def submit_when_free(c: dpfl.Client, spec: Any) -> Dict[str, Any]:
    """Submit, waiting up to 20 s while the server (--max-running-jobs 1)
    still finishes another test's job."""
    deadline = time.monotonic() + 20
    while True:
        try:
            return c.submit(spec)
        except dpfl.TooManyRequests:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def run_job(c: dpfl.Client, spec: Any, progress: Any = None) -> Dict[str, Any]:
    """Submit a job and watch it to its end; returns the final status."""
    st = submit_when_free(c, spec)
    return c.watch(st["id"], interval=0.1, progress=progress, timeout=120, stall=60)


class JobTest(unittest.TestCase):
    """A small DP job, submitted as a dict and watched to completion."""

    job: Dict[str, Any]
    final: Dict[str, Any]
    seen: List[Dict[str, Any]]

    @classmethod
    def setUpClass(cls) -> None:
        c = server().client()
        cls.seen = []
        cls.job = submit_when_free(c, SMALL_JOB)
        cls.final = c.watch(cls.job["id"], interval=0.05, progress=cls.seen.append, timeout=120, stall=60)

    def setUp(self) -> None:
        self.c = server().client()

    def test_submit_returns_the_stored_spec(self) -> None:
        self.assertTrue(self.job["id"].startswith("job-"), self.job["id"])
        self.assertIn(self.job["state"], ("pending", "running", "completed"))
        spec = self.job["spec"]
        self.assertEqual(spec["model"], "logreg")
        self.assertEqual(spec["rounds"], ROUNDS)
        self.assertEqual(spec["dp"]["delta"], DELTA)
        self.assertEqual(spec["dp"]["clip_norm"], 0.5)
        self.assertEqual(spec["dp"]["noise_multiplier"], 1.0)
        self.assertEqual(spec["sampling"]["rate"], 0.1)
        self.assertEqual(spec["population"]["size"], 600)
        self.assertNotIn("warnings", self.job)

    def test_watch_ends_completed_and_reports_progress(self) -> None:
        self.assertEqual(self.final["state"], "completed", self.final.get("message"))
        self.assertEqual(self.final["round"], ROUNDS)
        self.assertTrue(dpfl.is_terminal(self.final))
        self.assertGreaterEqual(len(self.seen), 1)
        self.assertEqual(self.seen[-1], self.final, "the last status progress saw is the one watch returns")
        rounds = [st["round"] for st in self.seen]
        self.assertEqual(rounds, sorted(rounds), "rounds never go back")
        self.assertTrue(all(not dpfl.is_terminal(st) for st in self.seen[:-1]))

    def test_status(self) -> None:
        st = self.c.status(self.job["id"])
        self.assertEqual(st["id"], self.job["id"])
        self.assertEqual(st["state"], "completed")
        self.assertEqual(st["round"], ROUNDS)
        acc = dpfl.test_accuracy(st)
        self.assertIsNotNone(acc)
        assert acc is not None
        self.assertGreater(acc, 0.1, "better than chance on 10 classes")
        self.assertLessEqual(acc, 1.0)
        self.assertEqual(st["latest_evaluated"]["test"]["examples"], 10000)
        eps = dpfl.latest_epsilon(st)
        self.assertIsNotNone(eps)
        # Under DP the counts are not released (docs/privacy.md).
        self.assertNotIn("reported", st["latest"])

    def test_privacy(self) -> None:
        rep = self.c.privacy(self.job["id"])
        self.assertEqual(rep["job_id"], self.job["id"])
        self.assertTrue(rep["private"])
        self.assertTrue(math.isfinite(rep["epsilon"]) and rep["epsilon"] > 0, rep.get("epsilon"))
        self.assertEqual(rep["delta"], DELTA)
        self.assertEqual(rep["rounds"], ROUNDS)
        self.assertEqual(len(rep["events"]), ROUNDS)
        self.assertEqual(rep["extra_events"], 0)
        self.assertIn(rep["accountant"], ("rdp", "pld"))
        self.assertEqual(rep["adjacency"], "add_remove")
        best = rep["accounting"]["best"]
        self.assertEqual(best["epsilon"], rep["epsilon"])
        for est in (rep["accounting"]["rdp"], rep["accounting"]["pld"]):
            if est.get("valid"):
                self.assertGreaterEqual(est["epsilon"], rep["epsilon"])
        self.assertEqual([e["seq"] for e in rep["events"]], list(range(1, ROUNDS + 1)))
        ev = rep["events"][0]["event"]
        self.assertEqual(ev["type"], "PoissonSampledDpEvent")
        self.assertEqual(ev["sampling_probability"], 0.1)
        self.assertEqual(ev["event"], {"type": "GaussianDpEvent", "noise_multiplier": 1.0})
        self.assertEqual(dpfl.latest_epsilon(self.c.status(self.job["id"])), rep["epsilon"])

    def test_metrics_and_rounds(self) -> None:
        met = self.c.metrics(self.job["id"])
        self.assertEqual([m["round"] for m in met], list(range(1, ROUNDS + 1)))
        self.assertEqual(met[-1]["epsilon"], self.c.privacy(self.job["id"])["epsilon"])
        self.assertEqual([m["round"] for m in met if "test" in m], [2, 4])
        eps = [m["epsilon"] for m in met]
        self.assertEqual(eps, sorted(eps), "ε grows with the rounds")
        self.assertEqual(len(self.c.rounds(self.job["id"])), ROUNDS)

    def test_model(self) -> None:
        m = self.c.model(self.job["id"])
        self.assertEqual(m.job_id, self.job["id"])
        self.assertEqual(m.model, "logreg")
        self.assertEqual(m.round, ROUNDS)
        self.assertEqual(m.num_params, LOGREG_PARAMS)
        self.assertEqual(len(m.params), LOGREG_PARAMS)
        self.assertEqual(m.shape, (LOGREG_PARAMS,))
        self.assertTrue(all(math.isfinite(float(v)) for v in m.params))
        self.assertTrue(m.matches_certificate(), "the parameters hash to the certificate's model_sha256")
        cert = m.certificate or {}
        self.assertEqual(cert.get("delta"), DELTA)
        self.assertEqual(cert.get("epsilon"), self.c.privacy(self.job["id"])["epsilon"])
        W, b = m.layers()
        self.assertEqual((W.name, W.shape, b.name, b.shape), ("W", (10, 784), "b", (10,)))
        with self.assertRaises(ValueError):
            m.layers(input_dim=60)
        if HAVE_NUMPY:
            import numpy as np

            self.assertIsInstance(m.params, np.ndarray)
            self.assertEqual(m.params.dtype, np.float32)
            self.assertEqual(m.params.shape, (LOGREG_PARAMS,))
            self.assertEqual(W.values.shape, (10, 784))
            self.assertTrue(np.shares_memory(W.values, m.params))
        else:
            self.assertIsInstance(m.params, list)
        plain = self.c.model(self.job["id"], as_numpy=False)
        self.assertIsInstance(plain.params, list)
        self.assertIsInstance(plain.params[0], float)
        self.assertEqual(plain.sha256(), m.sha256())
        self.assertEqual([float(v) for v in m.params], plain.params)
        self.assertEqual(len(plain.layers()[0].values), 7840)

    def test_list(self) -> None:
        jobs = self.c.list()
        ids = [j["id"] for j in jobs]
        self.assertIn(self.job["id"], ids)
        mine = jobs[ids.index(self.job["id"])]
        self.assertEqual(mine["state"], "completed")

    def test_auditor_token_reads(self) -> None:
        aud = server().client(server().auditor_token)
        self.assertIn(self.job["id"], [j["id"] for j in aud.list()])
        self.assertEqual(aud.privacy(self.job["id"])["rounds"], ROUNDS)

    def test_cli(self) -> None:
        env = dict(os.environ, DPFL_SERVER=server().url, DPFL_TOKEN=server().token, PYTHONPATH=PACKAGE_ROOT)
        out = subprocess.run([sys.executable, "-m", "dpfl", "list"], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(self.job["id"] + " completed round %d/%d" % (ROUNDS, ROUNDS), out.stdout)
        out = subprocess.run([sys.executable, "-m", "dpfl", "status", "job-nope"], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 1)
        self.assertIn("404 Not Found", out.stderr)


class BudgetTest(unittest.TestCase):
    """Shared budgets: create, get, a job charged to one, and their errors."""

    def setUp(self) -> None:
        self.c = server().client()
        self.name = "py-" + secrets.token_hex(4)

    def test_create_get_and_charge(self) -> None:
        rep = self.c.create_budget(self.name, 8.0, DELTA)
        self.assertEqual(rep["name"], self.name)
        self.assertEqual(rep["epsilon_budget"], 8.0)
        self.assertEqual(rep["delta"], DELTA)
        self.assertEqual(rep["jobs"], [])
        self.assertEqual(rep["events"], 0)
        self.assertEqual(rep["remaining"], 8.0)
        self.assertEqual(self.c.budget(self.name)["epsilon_budget"], 8.0)
        with self.assertRaises(dpfl.Conflict) as cm:
            self.c.create_budget(self.name, 8.0, DELTA)
        self.assertEqual(cm.exception.status, 409)
        self.assertIn("already exists", cm.exception.message)

        # A job charged to it, submitted from a JSON file.
        spec = small_job(rounds=2, dp=dict(SMALL_JOB["dp"], budget=self.name))
        path = os.path.join(server().dir, "budget-job.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(spec, f)
        final = run_job(self.c, path)
        self.assertEqual(final["state"], "completed", final.get("message"))
        rep = self.c.budget(self.name)
        self.assertEqual(rep["jobs"], [final["id"]])
        self.assertEqual(rep["events"], 2)
        self.assertTrue(math.isfinite(rep["epsilon"]) and 0 < rep["epsilon"] < 8.0)
        self.assertAlmostEqual(rep["remaining"], 8.0 - rep["epsilon"])
        self.assertEqual(rep["running"], 0)

    def test_list(self) -> None:
        # GET /v1/budgets: every budget's report, the one this test made
        # among them, equal to its own GET /v1/budgets/{name}.
        self.c.create_budget(self.name, 8.0, DELTA)
        listed = {b["name"]: b for b in self.c.budgets()}
        self.assertIn(self.name, listed)
        self.assertEqual(listed[self.name], self.c.budget(self.name))

    def test_errors(self) -> None:
        with self.assertRaises(dpfl.NotFound):
            self.c.budget("no-such-budget")
        with self.assertRaises(dpfl.ValidationError) as cm:
            self.c.create_budget(self.name, 8.0, 2.0)
        self.assertEqual(cm.exception.errors, [dpfl.FieldError("delta", "range", "must be in (0, 1), got 2")])
        with self.assertRaises(dpfl.ValidationError) as cm:
            self.c.create_budget("bad name", 8.0, DELTA)
        self.assertEqual((cm.exception.field, cm.exception.rule_of("name")), ("name", "format"))
        with self.assertRaises(dpfl.Forbidden):
            server().client(server().auditor_token).create_budget(self.name, 8.0, DELTA)
        with self.assertRaises(dpfl.NotFound):
            self.c.budget(self.name)  # nothing was created


class ErrorsTest(unittest.TestCase):
    """The server's refusals as typed errors."""

    def setUp(self) -> None:
        self.c = server().client()

    def test_bad_field_is_a_validation_error_naming_field_and_rule(self) -> None:
        before = len(self.c.list())
        spec = small_job(dp=dict(SMALL_JOB["dp"], noise_multiplier=-1))
        with self.assertRaises(dpfl.ValidationError) as cm:
            self.c.submit(spec)
        e = cm.exception
        self.assertIsInstance(e, dpfl.HTTPError)
        self.assertIsInstance(e, dpfl.DpflError)
        self.assertEqual(e.status, 400)
        self.assertEqual(e.field, "dp.noise_multiplier")
        self.assertEqual(len(e.errors), 1)
        self.assertEqual(e.errors[0].field, "dp.noise_multiplier")
        self.assertEqual(e.errors[0].rule, "range")
        self.assertIn("got -1", e.errors[0].message)
        self.assertIn("dp.noise_multiplier", str(e))
        self.assertEqual(len(self.c.list()), before, "a refused submission stores nothing")

    def test_every_broken_rule_in_order(self) -> None:
        spec = small_job(model="resnet", dp=dict(SMALL_JOB["dp"], delta=1.5))
        with self.assertRaises(dpfl.ValidationError) as cm:
            self.c.submit(spec)
        self.assertEqual(
            [(f.field, f.rule) for f in cm.exception.errors],
            [("model", "one_of"), ("dp.delta", "range")],
        )
        self.assertEqual(cm.exception.fields, ["model", "dp.delta"])
        self.assertEqual(cm.exception.field, "model")

    def test_unknown_key_and_bad_body(self) -> None:
        with self.assertRaises(dpfl.ValidationError) as cm:
            self.c.submit({"rouds": 3})
        self.assertEqual(cm.exception.errors[0][:2], ("rouds", "unknown"))
        with self.assertRaises(dpfl.ValidationError) as cm:
            self.c.submit(b"not json")
        self.assertEqual(cm.exception.errors[0][:2], ("body", "format"))
        with self.assertRaises(ValueError):
            self.c.submit({"dp": {"delta": float("nan")}})

    def test_deprecated_key_warns(self) -> None:
        spec = small_job(rounds=1)
        spec["population"] = {"clients": 600, "partition": "iid"}
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            st = submit_when_free(self.c, spec)
        self.c.watch(st["id"], interval=0.1, timeout=120)
        self.assertTrue(st.get("warnings"), "the server names the renamed key")
        self.assertTrue(any(issubclass(w.category, dpfl.DeprecatedSpecKey) and "population.clients" in str(w.message) for w in ws), [str(w.message) for w in ws])

    def test_wrong_or_missing_token_is_unauthorized(self) -> None:
        for token in ("wrong-" + secrets.token_hex(8), ""):
            with self.assertRaises(dpfl.Unauthorized) as cm:
                server().client(token).list()
            self.assertEqual(cm.exception.status, 401)
            self.assertIn("token", cm.exception.message)
        with self.assertRaises(dpfl.Unauthorized):
            server().client("wrong").submit(SMALL_JOB)

    def test_auditor_token_is_forbidden_to_submit(self) -> None:
        with self.assertRaises(dpfl.Forbidden) as cm:
            server().client(server().auditor_token).submit(SMALL_JOB)
        self.assertEqual(cm.exception.status, 403)

    def test_unknown_job_is_not_found(self) -> None:
        for call in (self.c.status, self.c.privacy, self.c.model, self.c.metrics, self.c.cancel, self.c.watch):
            with self.assertRaises(dpfl.NotFound, msg=call.__name__) as cm:
                call("job-does-not-exist")
            self.assertEqual(cm.exception.status, 404)
            self.assertIn("not found", cm.exception.message)

    def test_capacity_cancel_and_conflict(self) -> None:
        # A long job fills the server's one place (--max-running-jobs 1).
        long = submit_when_free(self.c, small_job(rounds=100000, eval_every=100000))
        try:
            with self.assertRaises(dpfl.TooManyRequests) as cm:
                self.c.submit(small_job(rounds=1))
            self.assertEqual(cm.exception.status, 429)
            self.assertIsNone(cm.exception.retry_after)
            self.assertIn("--max-running-jobs", cm.exception.message)
        finally:
            self.c.cancel(long["id"])
        final = self.c.watch(long["id"], interval=0.05, timeout=60)
        self.assertEqual(final["state"], "cancelled")
        with self.assertRaises(dpfl.Conflict) as cm2:
            self.c.cancel(long["id"])
        self.assertIn("already cancelled", cm2.exception.message)
        rep = self.c.privacy(long["id"])
        self.assertEqual(len(rep["events"]), rep["rounds"] + rep["extra_events"], "an interrupted round is charged")

    def test_watch_timeout(self) -> None:
        long = submit_when_free(self.c, small_job(rounds=100000, eval_every=100000))
        try:
            with self.assertRaises(dpfl.WatchTimeout) as cm:
                self.c.watch(long["id"], interval=0.05, timeout=0.3)
            self.assertIsInstance(cm.exception, dpfl.Timeout)
            self.assertEqual(cm.exception.status["id"], long["id"])
            self.assertFalse(dpfl.is_terminal(cm.exception.status))
        finally:
            self.c.cancel(long["id"])
        self.c.watch(long["id"], interval=0.05, timeout=60)


class TransportTest(unittest.TestCase):
    """Failures below HTTP, and the mapping of statuses to errors."""

    def test_timeout(self) -> None:
        # A socket that listens but never answers.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(8)
            c = dpfl.Client("http://127.0.0.1:%d" % s.getsockname()[1], "t", timeout=0.3)
            start = time.monotonic()
            with self.assertRaises(dpfl.Timeout) as cm:
                c.list()
            self.assertLess(time.monotonic() - start, 10)
            self.assertIsInstance(cm.exception, TimeoutError)
            self.assertIsInstance(cm.exception, dpfl.DpflError)

    def test_unavailable_is_retried_for_reads_only(self) -> None:
        # A server that answers 503 + Retry-After (a store without quorum)
        # to the first request of each method, then 200.
        import http.server
        import threading

        seen: List[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self) -> None:
                n = self.headers.get("Content-Length")
                if n:
                    self.rfile.read(int(n))
                seen.append(self.command)
                if seen.count(self.command) == 1:
                    body = b'{"error": "the store is unavailable; retry shortly"}'
                    self.send_response(503)
                    self.send_header("Retry-After", "0.05")
                else:
                    body = b'{"jobs": []}' if self.command == "GET" else b'{"id": "job-1"}'
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = answer

            def log_message(self, *args: Any) -> None:
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        try:
            c = dpfl.Client("http://127.0.0.1:%d" % srv.server_address[1], "t", timeout=5)
            self.assertEqual(c.list(), [])
            self.assertEqual(seen, ["GET", "GET"])
            with self.assertRaises(dpfl.Unavailable) as cm:
                c.submit({"rounds": 1})
            self.assertEqual(cm.exception.retry_after, 0.05)
            self.assertEqual(seen.count("POST"), 1)  # a write's outcome is unknown: not resent
        finally:
            srv.shutdown()
            srv.server_close()

    def test_connection_refused(self) -> None:
        addr = free_addr()  # closed again: nothing listens there
        with self.assertRaises(dpfl.ConnectionFailed):
            dpfl.Client("http://" + addr, "t", timeout=5).list()

    def test_error_for_status(self) -> None:
        cases = [
            (400, dpfl.ValidationError),
            (401, dpfl.Unauthorized),
            (403, dpfl.Forbidden),
            (404, dpfl.NotFound),
            (409, dpfl.Conflict),
            (413, dpfl.RequestTooLarge),
            (429, dpfl.TooManyRequests),
            (500, dpfl.ServerError),
            (502, dpfl.ServerError),
            (503, dpfl.Unavailable),
            (418, dpfl.HTTPError),
        ]
        for status, cls in cases:
            e = error_for_status(status, {"error": "msg"}, "")
            self.assertIs(type(e), cls, status)
            self.assertEqual((e.status, e.message), (status, "msg"))
        e = error_for_status(500, {"error": "internal error (id ab12)", "error_id": "ab12"}, "")
        self.assertEqual(e.error_id, "ab12")
        e = error_for_status(409, {"error": "conflict: job x is already completed"}, "")
        self.assertEqual(str(e), "server said 409 Conflict: job x is already completed")
        e = error_for_status(502, {}, "<html>bad gateway</html>\n")
        self.assertEqual(e.message, "<html>bad gateway</html>")
        e = error_for_status(429, {"error": "slow down"}, "", retry_after=3.0)
        self.assertEqual(e.retry_after, 3.0)
        e = error_for_status(503, {"error": "the store is unavailable"}, "", retry_after=2.0)
        self.assertEqual(e.retry_after, 2.0)
        self.assertIsInstance(e, dpfl.ServerError)
        e = error_for_status(400, {"error": "protocol message refused", "field": "x"}, "")
        self.assertEqual(e.errors, [dpfl.FieldError("x", "", "protocol message refused")])

    def test_layer_shapes(self) -> None:
        mlp = dpfl.Model("j", "mlp", 1, 199210, [0.0] * 199210)
        self.assertEqual([s for _, s in mlp.layer_shapes()], [(200, 784), (200,), (200, 200), (200,), (10, 200), (10,)])
        cnn = dpfl.Model("j", "cnn", 1, 1199882, [0.0] * 1199882)
        self.assertEqual(dict(cnn.layer_shapes())["W3"], (128, 12 * 12 * 64))
        with self.assertRaises(ValueError):
            dpfl.Model("j", "transformer", 1, 3, [0.0] * 3).layer_shapes()

    def test_token_sources(self) -> None:
        path = os.path.join(tempfile.mkdtemp(), "token")
        try:
            with open(path, "w") as f:
                f.write("from-file\n")
            self.assertEqual(dpfl.Client("http://x", token_file=path)._token, "from-file")
        finally:
            shutil.rmtree(os.path.dirname(path))
        old = os.environ.get("DPFL_TOKEN"), os.environ.get("DPFL_SERVER")
        os.environ["DPFL_TOKEN"], os.environ["DPFL_SERVER"] = "from-env", "http://127.0.0.1:9/"
        try:
            c = dpfl.Client()
            self.assertEqual((c._token, c.server), ("from-env", "http://127.0.0.1:9"))
            self.assertNotIn("from-env", repr(c))
        finally:
            for k, v in zip(("DPFL_TOKEN", "DPFL_SERVER"), old):
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


if __name__ == "__main__":
    unittest.main()
