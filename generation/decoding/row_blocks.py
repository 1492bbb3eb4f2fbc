"""Exact row-wise argmax and top-k on the CPU from block maxima (``dba.BeamSearch.candidates``).

Apart from the search because it is a self-contained numeric device with its own proof of exactness (below)
and its own test (``tests/generation/test_dba.py``): the search only asks it for what ``argmax`` and
``topk`` would return, faster.
"""

from __future__ import annotations

import torch


class RowBlocks:
    """Row-wise argmax and a group's top k over [rows, V] scores, exactly as ``argmax`` / ``topk`` return
    them, from the maxima of blocks of ``BS`` columns. On the CPU ``argmax`` and ``topk`` of a [H, V]
    tensor compare element by element (about 1 ms each for 160 x 8000 at one thread) while ``amax`` over
    blocks is vectorised (a tenth of that); only the few blocks that hold the winners are read again.

    * argmax: the first block whose maximum is the row's holds the row's first maximum (earlier blocks
      hold only smaller values), which is that block's first maximum (NaN, the maximum of both, alike);
    * top k of a group of rows (each row plus its own constant): the k + 1 blocks of the highest maxima
      hold the group's k + 1 highest values (every block whose maximum beats the (k + 1)-th value is
      among them, and each other one chosen holds that value), so the top k + 1 of those blocks'
      elements are the group's top k + 1 values. Where these are strictly decreasing, the top k is the
      only possible answer, hence ``topk``'s; where two are equal (ties: ``topk``'s order among equal
      values is its own), the caller falls back to ``topk`` over the whole group."""

    BS = 64  # (a multiple of the vector width: amax over 64-column blocks ran 4x faster than over 80 or 125)
    # group_topk's dozen small ops cost more than one topk below this many scores (measured: 40k-80k
    # break-even at 1 thread, 80k-160k at 2; at 1.28M, 160 x 8000, it takes a fifth of topk's time)
    TOPK_MIN = 1 << 17

    def __init__(self, V: int, dev):
        self.V = V
        self.bs = min(self.BS, V)
        self.nb = V // self.bs  # whole blocks per row
        self.tail = V - self.nb * self.bs  # columns in a last, shorter block
        self.nbt = self.nb + (1 if self.tail else 0)
        self.ar = torch.arange(self.bs, device=dev)

    def maxima(self, x: torch.Tensor) -> torch.Tensor:
        """[R, nbt]: each block's maximum of ``x`` [R, V]."""
        n = self.nb * self.bs
        m = x[:, :n].unflatten(1, (self.nb, self.bs)).amax(2)
        if self.tail:
            m = torch.cat([m, x[:, n:].amax(1, keepdim=True)], 1)
        return m

    def _cols(self, j: torch.Tensor) -> torch.Tensor:
        """Block ids [...] -> their columns [..., bs] (a short last block's missing ones clamped to V - 1)."""
        c = j[..., None] * self.bs + self.ar
        return c.clamp_(max=self.V - 1) if self.tail else c

    def argmax(self, x: torch.Tensor, bmax: torch.Tensor | None = None) -> torch.Tensor:
        """``x.argmax(1)`` ([R, V] -> [R]): the first maximum's column. (A clamped column repeats V - 1
        after its own position: argmax returns that first position.)"""
        if bmax is None:
            bmax = self.maxima(x)
        c = self._cols(bmax.argmax(1))  # [R, bs]
        return c.gather(1, x.gather(1, c).argmax(1, keepdim=True))[:, 0]

    def group_topk(self, x: torch.Tensor, bmax: torch.Tensor, add: torch.Tensor, k: int):
        """``torch.topk((x + add.view(-1, 1)).view(G, -1), k, dim=1)`` for ``x`` [G * R, V], ``add`` [G, R]
        (values and flat indices), or None where the answer needs ``topk``'s own order among ties (the
        check reads one bool: CPU only)."""
        G, R = add.shape
        V, bs, nbt = self.V, self.bs, self.nbt
        m = k + 1
        if R * nbt < m:
            return None
        # (block maxima of x + c are those of x plus c: rounding is monotonic)
        q = torch.topk((bmax + add.view(-1, 1)).view(G, R * nbt), m, dim=1)[1]  # [G, m] best blocks
        row = torch.div(q, nbt, rounding_mode="floor")
        c = (q - row * nbt)[:, :, None] * bs + self.ar  # [G, m, bs] columns
        pad = c >= V if self.tail else None
        if pad is not None:
            c = c.clamp(max=V - 1)
        flat = (row[:, :, None] * V + c).view(G, -1)
        vals = x.view(G, R * V).gather(1, flat).view(G, m, bs) + add.gather(1, row)[:, :, None]
        if pad is not None:  # a clamped column is a copy: -inf (then below every real value, or a tie)
            vals.masked_fill_(pad, float("-inf"))
        s, pos = torch.topk(vals.view(G, -1), m, dim=1)
        if not bool((s[:, :-1] > s[:, 1:]).all()):
            return None
        return s[:, :k], flat.gather(1, pos[:, :k])
