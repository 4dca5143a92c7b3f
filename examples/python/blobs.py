"""The Python example's model and data, shared by classifier.py (Atoll) and
classifier_plain.py (plain PyTorch): a small MLP classifier on Gaussian blobs that the
script generates (10 classes in 32 dimensions that overlap a little: about 98% can be
told apart)."""
import hashlib

import torch
import torch.nn as nn
import torch.nn.functional as F

DIM, CLASSES, HIDDEN = 32, 10, 128


class Classifier(nn.Module):
    """Three layers: Atoll makes fragments of whole top-level children (fc1, fc2, fc3)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(DIM, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x)))))


def make_data(seed=0, train=20000, held_out=4000):
    """((x, y) to train on, (x, y) held out), the same on every process for a seed."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(CLASSES, DIM, generator=g) * 0.8

    def sample(n):
        y = torch.randint(0, CLASSES, (n,), generator=g)
        return centers[y] + torch.randn(n, DIM, generator=g), y

    return sample(train), sample(held_out)


def add_loop_arguments(parser):
    """The loop's knobs, the same in both scripts."""
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--log-every", type=int, default=100)


@torch.no_grad()
def held_out_loss(model, data):
    x, y = data
    logits = model(x)
    return F.cross_entropy(logits, y).item(), (logits.argmax(1) == y).float().mean().item()


def parameter_digest(model):
    """sha256 of the parameters' bytes in order: equal on every node of a run that ended."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]
