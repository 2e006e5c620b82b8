"""Submit the demo DP-FedAvg job, watch it, print test accuracy and (ε, δ).

    export DPFL_SERVER=http://127.0.0.1:8080 DPFL_TOKEN=...   # as for dpfl-client
    PYTHONPATH=clients/python python3 clients/python/examples/demo.py [examples/demo-job.json]
"""

import sys

import dpfl

spec = sys.argv[1] if len(sys.argv) > 1 else "examples/demo-job.json"
client = dpfl.Client()  # $DPFL_SERVER, $DPFL_TOKEN

job = client.submit(spec)
print(f"submitted {job['id']}: {job['spec']['name']}")

last_eval = None


def progress(st):
    """Print a line whenever a new test evaluation appears."""
    global last_eval
    ev = st.get("latest_evaluated")
    if ev and ev["round"] != last_eval:
        last_eval = ev["round"]
        print(f"  round {ev['round']:4d}/{st['spec']['rounds']}  "
              f"test accuracy {ev['test']['accuracy']:.4f}  ε {ev['epsilon']:.3f}")


final = client.watch(job["id"], interval=0.25, progress=progress)
print(f"{final['state']}: {final.get('message', '')}")

report = client.privacy(job["id"])
print(f"test accuracy {dpfl.test_accuracy(final):.4f}")
print(f"(ε, δ) = ({report['epsilon']:.3f}, {report['delta']:g}) by the {report['accountant']} accountant, "
      f"{len(report['events'])} ledger events, {report['adjacency']} adjacency")

model = client.model(job["id"])
W, b = model.layers()  # logreg on Fashion-MNIST: W is 10×784, b 10
print(f"model {model.model}: {model.num_params} parameters "
      f"({type(model.params).__name__}), W {W.shape}, b {b.shape}, "
      f"hash matches certificate: {model.matches_certificate()}")
