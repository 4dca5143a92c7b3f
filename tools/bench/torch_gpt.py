"""The default example's GPT (training/shakespeare.cpp) in PyTorch, for the benchmarks'
PyTorch eager baselines (tools/bench/step.py, tools/bench/gpu_step.py).

Same architecture, parameter order and initialisation as the C++ model: token and
position embeddings, pre-norm causal self-attention blocks, a tied output head. Like the
C++ model, attention uses the fused kernel where the LibTorch has one (2.0 and later) and
the explicit masked softmax before.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

FUSED_ATTENTION = hasattr(F, "scaled_dot_product_attention")


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.qkv = nn.LayerNorm(width), nn.Linear(width, 3 * width)
        self.proj, self.ln2 = nn.Linear(width, width), nn.LayerNorm(width)
        self.fc, self.fc_proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x, mask):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        if FUSED_ATTENTION:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
            y = torch.softmax(att.masked_fill(mask[:t, :t], float("-inf")), -1) @ v
        h = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return h + self.fc_proj(F.gelu(self.fc(self.ln2(h))))


class GPT(nn.Module):
    # Built in the C++ example's order (tok, pos, ln_f, then the blocks), so a seeded
    # initialisation draws the same way.
    def __init__(self, layers, width, heads, context):
        super().__init__()
        self.tok, self.pos = nn.Embedding(256, width), nn.Embedding(context, width)
        self.ln_f = nn.LayerNorm(width)
        self.blocks = nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.register_buffer("mask", torch.triu(torch.ones(context, context, dtype=torch.bool), 1))
        with torch.no_grad():
            for name, p in self.named_parameters():
                if "ln" in name:
                    continue
                p.zero_() if "bias" in name else p.normal_(0.0, 0.02)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x, self.mask)
        return self.ln_f(x) @ self.tok.weight.t()  # tied head


def from_atoll_export(path, layers=4, width=128, heads=4, context=64):
    """The built-in example's GPT with the parameters `atoll export` wrote to `path` (a
    state dict whose block keys are C++'s "block0.", here "blocks.0.")."""
    state = torch.load(path)
    renamed = {}
    for key, value in state.items():
        if key.startswith("block"):
            index, rest = key[len("block"):].split(".", 1)
            key = f"blocks.{index}.{rest}"
        renamed[key] = value
    model = GPT(layers, width, heads, context)
    model.load_state_dict(renamed)
    return model


def lr_at(step, steps, lr, warmup, min_lr_ratio):
    """The inner learning rate of training/torch_replica.cpp: linear warm-up, then cosine
    decay to min_lr_ratio * lr at the last step."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return lr * (min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))
