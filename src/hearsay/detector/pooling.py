"""The detector's two poolings over frames (model.pooling in the train config): attentive
statistics, the recipe's, and a masked mean, its ablation. Frames where `valid` is False (padding)
never count.

    pool = AttentiveStatsPool(dim=1024, hidden=128)   # (B, T', D), (B, T') bool -> (B, 2D)
    pool = MaskedMeanPool()                            # (B, T', D), (B, T') bool -> (B, D)
"""

from __future__ import annotations

import torch
from torch import nn


class AttentiveStatsPool(nn.Module):
    """Masked attentive statistics: (B, T', D), (B, T') bool -> (B, 2D) weighted mean and std."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.attn = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, h: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        e = self.attn(h).squeeze(-1)  # (B, T') scores
        e = torch.where(valid, e, torch.full_like(e, -1e4))  # finite: no NaN if a row is empty
        a = torch.softmax(e, dim=-1).unsqueeze(-1)  # (B, T', 1), sums to 1 over valid frames
        mean = (a * h).sum(dim=1)  # (B, D)
        var = (a * h * h).sum(dim=1) - mean * mean
        std = torch.sqrt(var.clamp(min=1e-6))
        return torch.cat([mean, std], dim=-1)


class MaskedMeanPool(nn.Module):
    """Masked mean: (B, T', D), (B, T') bool -> (B, D) mean over the valid frames."""

    def forward(self, h: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        m = valid.unsqueeze(-1).to(h.dtype)  # (B, T', 1)
        return (h * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)  # an empty row gives 0
