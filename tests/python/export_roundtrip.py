#!/usr/bin/env python3
"""Bring your own model, end to end, as a Python user would (issue 11's test):

1. export the example model with examples/torchscript/model.py (torch.jit.script);
2. train it with a 2-node `atoll local --model ... --data ...` for four rounds;
3. `atoll export` the latest round, load the file with torch.jit.load;
4. check that each fragment of the loaded parameters has the keeper's digest of
   theta_global (bit-identical), and that its held-out loss, computed here in PyTorch on
   Atoll's held-out windows, is the loss Atoll reported for the same state;
5. check that export refuses to overwrite without --force, and that a bad data file and a
   model with the wrong output shape are refused before any process starts.

Usage: export_roundtrip.py ATOLL_BINARY WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "torchscript"))
import model as example_model  # noqa: E402
from atoll_data import digest64, held_out_windows  # noqa: E402
from head_endpoint import wait_for_endpoint  # noqa: E402

DATA = os.path.join(ROOT, "examples", "data", "tinyshakespeare.txt")
CONTEXT, BATCH, EVAL_BATCHES, FRAGMENTS = 64, 32, 16, 2


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, text=True, capture_output=True, timeout=600, **kw)


def check(cond, what):
    if not cond:
        raise SystemExit("FAILED: " + what)
    print("ok:", what, flush=True)


def layer_groups(module):
    """Atoll's layer groups of a TorchScript module (training/torchscript_task.cpp)."""
    seen, groups = set(), []

    def add(params):
        group = [p for p in params if id(p) not in seen and not seen.add(id(p))]
        if group:
            groups.append(group)

    add(module.parameters(recurse=False))
    for child in module.children():
        name = child.original_name
        if name in ("ModuleList", "Sequential"):
            add(child.parameters(recurse=False))
            for item in child.children():
                add(item.parameters())
        else:
            add(child.parameters())
    return groups


def main():
    atoll, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model_file = os.path.join(work, "model.pt")
    torch.manual_seed(1)
    torch.jit.script(example_model.TinyGPT(context=CONTEXT)).save(model_file)

    run_dir = os.path.join(work, "run")
    r = run([atoll, "local", "--model", model_file, "--data", DATA, "--steps", "20", "--sync-every", "5",
             "--fragments", str(FRAGMENTS), "--run-dir", run_dir])
    print(r.stdout[-1500:], r.stderr[-1500:])
    check(r.returncode == 0, "atoll local trains the TorchScript model")

    out = os.path.join(work, "trained.pt")
    r = run([atoll, "export", "--run-dir", run_dir, "--out", out, "--json"])
    check(r.returncode == 0, "atoll export writes the trained model: " + r.stderr.strip())
    manifest = json.loads(r.stdout)
    check(manifest["format"] == "torchscript", "a --model run exports TorchScript")
    check(all(f["round"] == 4 for f in manifest["fragments"]), "the latest round (20 steps / H=5) is exported")

    trained = torch.jit.load(out)
    groups = layer_groups(trained)
    # Sharded rounds (the default) list each fragment's slices apart: values [first, first +
    # params) of the fragment, each with its own digest.
    check(any("slice" in entry for entry in manifest["fragments"]), "the run reduced its rounds in slices")
    for entry in manifest["fragments"]:
        f = entry.get("fragment", entry["id"])
        name = f"fragment {f}" + (f" slice {entry['slice']}" if "slice" in entry else "")
        flat = torch.cat([p.detach().reshape(-1) for g in groups[f::FRAGMENTS] for p in g])
        flat = flat[entry.get("first", 0):entry.get("first", 0) + entry["params"]]
        check(flat.numel() == entry["params"], f"{name} has the keeper's {entry['params']} values")
        check("%016x" % digest64(flat.numpy().tobytes()) == entry["digest"],
              f"{name}'s parameters are theta_global's bytes (digest {entry['digest']})")
    initial = torch.jit.load(model_file)
    moved = sum((a - b).abs().sum().item() for a, b in zip(trained.parameters(), initial.parameters()))
    check(moved > 0, "training changed the parameters")

    reported = None
    with open(os.path.join(run_dir, "metrics.jsonl")) as metrics:
        for line in metrics:
            rec = json.loads(line)
            if rec.get("type") == "eval" and rec.get("step") == 20:
                reported = rec["val_loss"]
    check(reported is not None, "Atoll reported a held-out loss at the last step")
    with open(DATA, "rb") as fh:
        tokens = torch.frombuffer(bytearray(fh.read()), dtype=torch.uint8).long()
    trained.eval()
    with torch.no_grad():
        losses = []
        for inputs, targets in held_out_windows(tokens, CONTEXT, BATCH, EVAL_BATCHES):
            logits = trained(inputs)
            losses.append(F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1)).item())
    ours = sum(losses) / len(losses)
    print(f"held-out loss: PyTorch on the exported model {ours:.6f}, Atoll reported {reported:.6f}")
    check(abs(ours - reported) < 1e-4 * max(1.0, reported), "the exported model's held-out loss is Atoll's")

    r = run([atoll, "export", "--run-dir", run_dir, "--out", out])
    check(r.returncode != 0 and "--force" in r.stderr, "export refuses to overwrite without --force")

    empty = os.path.join(work, "empty.txt")
    open(empty, "w").close()
    r = run([atoll, "local", "--model", model_file, "--data", empty, "--run-dir", os.path.join(work, "bad")])
    check(r.returncode == 2 and "bad_data" in r.stderr and empty in r.stderr, "an empty data file is refused by name")

    class Flat(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(256, 8)

        def forward(self, x):
            return self.emb(x).sum(-1)  # [B, T]: not logits

    flat_file = os.path.join(work, "flat.pt")
    torch.jit.script(Flat()).save(flat_file)
    r = run([atoll, "local", "--model", flat_file, "--run-dir", os.path.join(work, "bad2")])
    check(r.returncode == 2 and "bad_model" in r.stderr, "a model without [B, T, V] logits is refused before training")
    check_model_mismatch_refused(atoll, work, model_file)
    check_built_in_export(atoll, work, tokens)
    print("PASS")


def check_built_in_export(atoll, work, tokens):
    """The built-in GPT exports a state dict; tools/bench/torch_gpt.py loads it into the same
    model in PyTorch, which evaluates to the loss Atoll reported."""
    sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
    import torch_gpt
    run_dir = os.path.join(work, "gpt")
    r = run([atoll, "local", "--steps", "10", "--sync-every", "5", "--run-dir", run_dir])
    check(r.returncode == 0, "atoll local trains the built-in GPT")
    out = os.path.join(work, "gpt.pt")
    r = run([atoll, "export", "--run-dir", run_dir, "--out", out])
    check(r.returncode == 0 and "torch.load" in r.stdout, "atoll export writes the built-in GPT's state dict")
    check("tok.weight" in torch.load(out), "torch.load gives its parameters by name")
    model = torch_gpt.from_atoll_export(out)
    model.eval()
    reported = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    reported = next(rec["val_loss"] for rec in reversed(reported) if rec.get("type") == "eval")
    with torch.no_grad():
        losses = [F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1)).item()
                  for x, y in held_out_windows(tokens, CONTEXT, BATCH, EVAL_BATCHES)]
    ours = sum(losses) / len(losses)
    check(abs(ours - reported) < 1e-4 * max(1.0, reported),
          f"the built-in GPT's export evaluates to Atoll's loss in PyTorch ({ours:.6f} vs {reported:.6f})")


def check_model_mismatch_refused(atoll, work, model_file):
    """A node that brings another model file is refused by the head (model_mismatch)."""
    other = os.path.join(work, "other.pt")
    torch.manual_seed(2)
    torch.jit.script(example_model.TinyGPT(context=CONTEXT)).save(other)
    head_dir = os.path.join(work, "head")
    head = subprocess.Popen([atoll, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir, "--model", model_file,
                             "--data", DATA], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        endpoint = wait_for_endpoint(head_dir)
        r = run([atoll, "join", "--head", endpoint, "--model", other, "--no-listen"])
        # 4: refused by the run (runtime/core/exit_status.hpp): a restart would be refused alike.
        check(r.returncode == 4 and "model_mismatch" in r.stderr, "a node with another model file is refused (exit 4)")
    finally:
        head.terminate()
        head.wait(timeout=30)


if __name__ == "__main__":
    main()
