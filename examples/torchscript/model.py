#!/usr/bin/env python3
"""A small GPT written in plain PyTorch, exported for `atoll local --model`.

    python3 examples/torchscript/model.py --out model.pt
    atoll local --model model.pt --data examples/data/tinyshakespeare.txt

The contract Atoll trains a module under (README, "Your own model"):
  * forward(x) takes int64 token ids [B, T] and returns logits [B, T, V]; Atoll computes
    the next-token cross-entropy. V is the data's vocabulary (256 for bytes); T is Atoll's
    model.context (64 unless set), which must fit the module's position table.
  * Fragments are made of layer groups: the module's own parameters, then each top-level
    child in order (an nn.ModuleList or nn.Sequential at the top level counts child by
    child). Here: embed, block 0..L-1, ln_f. Tied weights belong to the first group that
    holds them.
  * Buffers (here the causal mask) stay as they are in the file on every worker.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Embeddings(nn.Module):
    def __init__(self, vocab: int, width: int, context: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.size(1)
        return self.tok(idx) + self.pos(torch.arange(t, device=idx.device))


class Block(nn.Module):
    def __init__(self, width: int, heads: int, context: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.fc_proj = nn.Linear(4 * width, width)
        self.register_buffer("mask", torch.triu(torch.ones(context, context, dtype=torch.bool), 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        qkv = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = F.softmax(att.masked_fill(self.mask[:t, :t], float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 256, width: int = 128, layers: int = 4, heads: int = 4, context: int = 64):
        super().__init__()
        self.embed = Embeddings(vocab, width, context)
        self.blocks = nn.ModuleList([Block(width, heads, context) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        for name, p in self.named_parameters():
            if "ln" in name:
                continue
            if name.endswith("bias"):
                nn.init.zeros_(p)
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.embed.tok.weight.t()  # tied output head


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="TorchScript file to write")
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    model = TinyGPT(args.vocab, args.width, args.layers, args.heads, args.context)
    scripted = torch.jit.script(model)
    scripted.save(args.out)
    params = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.out}: {params:,} parameters, vocabulary {args.vocab}, context {args.context}")


if __name__ == "__main__":
    main()
