#!/usr/bin/env python3
"""Check a dpfl audit bundle independently of dpfl, and recompute its ε
with Google's dp_accounting.

    python3 docs/audit_bundle.py BUNDLE.json [--key PUB]

It re-implements, from the standards, what `dpfl-client verify` checks:

1. the checkpoint's Ed25519 signature (a signed note of
   golang.org/x/mod/sumdb/note; needs the `cryptography` package, else it
   is skipped with a warning) under --key, else the bundle's own key;
2. every entry's inclusion proof against the checkpoint's root (RFC 9162
   §2.1.3.2, with RFC 6962 hashing: leaf = SHA-256(0x00 ‖ leaf),
   node = SHA-256(0x01 ‖ left ‖ right));
3. the job's chain (job_leaf 1, 2, …, each prev the previous index;
   charge seqs 1, 2, …; releases of rounds 1, 2, …) and that every entry
   records the SHA-256 of the bundle's spec;
4. ε recomputed from the charged events with dp_accounting's RDP and PLD
   accountants at the spec's δ − abort δ, compared with the claim.

It exits 1 naming the first problem. Only the standard library is needed
for steps 2 and 3; `pip install dp-accounting` for step 4.
"""

import argparse
import base64
import hashlib
import json
import sys


def fail(msg):
    print("FAILED:", msg)
    sys.exit(1)


def leaf_hash(data):
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_inclusion(index, size, leaf, proof, root):
    """RFC 9162 §2.1.3.2: does proof show leaf at index in the tree of size leaves with root?"""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf_hash(leaf)
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def open_checkpoint(signed, vkey):
    """Checks the note's signature by vkey ("<name>+<hash>+<base64 key>") and returns (origin, size, root)."""
    text, sep, sigs = signed.partition("\n\n")
    if not sep:
        fail("checkpoint is not a signed note")
    text += "\n"
    name, khash, kb64 = vkey.split("+", 2)  # names hold no "+"; base64 may
    key = base64.b64decode(kb64)
    if key[0] != 1 or len(key) != 33:
        fail("the key is not an Ed25519 note key")
    found = False
    for line in sigs.splitlines():
        if not line.startswith("\u2014 "):
            continue
        sname, sig64 = line[2:].split(" ")
        sig = base64.b64decode(sig64)
        if sname != name or sig[:4].hex() != khash:
            continue
        found = True
        try:
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        except ImportError:
            print("WARNING: the `cryptography` package is missing: signature NOT checked")
            break
        try:
            Ed25519PublicKey.from_public_bytes(key[1:]).verify(sig[4:], text.encode())
        except Exception:
            fail("invalid signature: the checkpoint or its signature was altered")
    if not found:
        fail("wrong key: the checkpoint carries no signature by %s+%s" % (name, khash))
    origin, size, root = text.split("\n")[:3]
    if origin != name:
        fail("checkpoint names log %r, the key is %r's" % (origin, name))
    return origin, int(size), base64.b64decode(root)


def to_dp_event(e, dp):
    """dpfl's DpEvent JSON → a dp_accounting event (docs/auditing.md, section 2)."""
    t = e["type"]
    if t == "GaussianDpEvent":
        return dp.GaussianDpEvent(e["noise_multiplier"])
    if t == "PoissonSampledDpEvent":
        return dp.PoissonSampledDpEvent(e["sampling_probability"], to_dp_event(e["event"], dp))
    if t == "SampledWithoutReplacementDpEvent":
        return dp.SampledWithoutReplacementDpEvent(e["source_dataset_size"], e["sample_size"], to_dp_event(e["event"], dp))
    if t == "SelfComposedDpEvent":
        return dp.SelfComposedDpEvent(to_dp_event(e["event"], dp), e["count"])
    if t == "ComposedDpEvent":
        return dp.ComposedDpEvent([to_dp_event(x, dp) for x in e["events"]])
    if t == "NoOpDpEvent":
        return dp.NoOpDpEvent()
    if t == "NonPrivateDpEvent":
        return dp.NonPrivateDpEvent()
    fail("unknown event type %r" % t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle")
    ap.add_argument("--key", help="the server's note verifier key (default: the bundle's own)")
    args = ap.parse_args()
    b = json.load(open(args.bundle))
    if b.get("format") != "dpfl-audit-bundle/1":
        fail("not a dpfl audit bundle")
    if not args.key:
        print("WARNING: no --key: checking with the bundle's own key proves only consistency")
    origin, size, root = open_checkpoint(b["checkpoint"], args.key or b["public_key"])
    print("checkpoint: log %r, %d leaves, root %s" % (origin, size, base64.b64encode(root).decode()))

    spec_hash = hashlib.sha256(b["spec"].encode()).hexdigest()
    charges, released, prev_index, last_charge = [], 0, None, None
    for i, entry in enumerate(b["entries"], 1):
        leaf_bytes = entry["leaf"].encode()
        proof = [base64.b64decode(h) for h in entry["proof"]]
        if not verify_inclusion(entry["index"], size, leaf_bytes, proof, root):
            fail("entry %d (log index %d) is not in the log" % (i, entry["index"]))
        leaf = json.loads(leaf_bytes)
        if leaf.get("job") != b["job"] or leaf.get("job_leaf") != i or leaf.get("prev") != prev_index:
            fail("entry %d breaks the job's chain (removed, inserted or reordered entry)" % i)
        if leaf["spec_sha256"] != spec_hash:
            fail("entry %d records another spec" % i)
        if leaf["kind"] == "charge":
            if leaf["seq"] != len(charges) + 1 or leaf["round"] != released + 1:
                fail("entry %d: charge seq %d of round %d out of place" % (i, leaf["seq"], leaf["round"]))
            charges.append(leaf["event"])
            last_charge = leaf
        elif leaf["kind"] == "release":
            if leaf["round"] != released + 1:
                fail("entry %d: release of round %d out of place" % (i, leaf["round"]))
            if charges and (last_charge is None or last_charge["round"] != leaf["round"] or leaf.get("charge_seq") != last_charge["seq"]):
                fail("entry %d: round %d released without its charge" % (i, leaf["round"]))
            released += 1
        prev_index = entry["index"]
    print("entries: %d, all in the log; %d charges, %d rounds released" % (len(b["entries"]), len(charges), released))

    claim = b["claim"]
    if claim["rounds"] != released or claim["events"] != len(charges):
        fail("the claim's %d rounds / %d events are not the log's" % (claim["rounds"], claim["events"]))
    if not charges:
        return
    dp_spec = json.loads(b["spec"])["dp"]
    delta = dp_spec["delta"] - dp_spec.get("abort_delta", 0)
    try:
        import dp_accounting as dp
        from dp_accounting import pld, rdp
    except ImportError:
        print("dp_accounting is not installed (pip install dp-accounting): ε not recomputed")
        return
    # Identical events compose once with a count: the same result, faster.
    counts = {}
    for e in charges:
        key = json.dumps(e, sort_keys=True)
        counts[key] = counts.get(key, 0) + 1
    # The neighbouring relation of the claim (section 2): a fixed cohort
    # (SampledWithoutReplacementDpEvent) and devices jobs are replace-one.
    rel = dp.NeighboringRelation.ADD_OR_REMOVE_ONE
    if claim.get("adjacency") == "replace_one":
        rel = dp.NeighboringRelation.REPLACE_ONE
    rdp_acc = rdp.RdpAccountant(neighboring_relation=rel)
    pld_acc = pld.PLDAccountant(neighboring_relation=rel, value_discretization_interval=1e-4)
    events = [(to_dp_event(json.loads(key), dp), n) for key, n in counts.items()]
    for ev, n in events:
        rdp_acc.compose(ev, n)
    eps_rdp = rdp_acc.get_epsilon(delta)
    bound, eps_pld = eps_rdp, None
    if all(pld_acc.supports(ev) for ev, _ in events):
        for ev, n in events:
            pld_acc.compose(ev, n)
        eps_pld = pld_acc.get_epsilon(delta)
        bound = min(bound, eps_pld)
    print("dp_accounting at δ = %g: rdp ε = %.4f, pld ε = %s" % (delta, eps_rdp, "n/a" if eps_pld is None else "%.4f" % eps_pld))
    # dpfl's PLD is pessimistic and its RDP grid the same shape: its claim
    # should sit within about 1% above these (docs/auditing.md, section 3).
    if claim["epsilon"] < bound * (1 - 0.01):
        fail("claimed ε = %.4f is below dp_accounting's bound %.4f" % (claim["epsilon"], bound))
    print("claimed ε = %.4f (%s): consistent with dp_accounting" % (claim["epsilon"], claim["accountant"]))


if __name__ == "__main__":
    main()
