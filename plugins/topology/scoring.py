"""Best device sets inside a node: exact, tabled per topology fingerprint.

The quality of a set S of GPUs chosen out of the free set F is compared lexicographically on

1. the bottleneck bandwidth of S (the slowest pair; a single GPU has no pair and never loses here);
2. NUMA locality: fewer NUMA nodes spanned;
3. what stays free, R = F \\ S: for every size j from |R| down to 2, the best (bottleneck, NUMA) a j-GPU claim
   could still get in R — so a choice that keeps a large well-connected block free wins;
4. the total connectivity left in R (sum over pairs of bandwidth, plus a small same-NUMA bonus), which keeps
   NVLink-bridge partners and PCIe-switch pairs together;
5. the lowest device indices (deterministic).

:class:`SubsetTable` answers ``best(free_mask, k)`` exactly for up to :data:`MAX_EXACT` GPUs, memoised per
(mask, k): nodes of one SKU share one table, so the scheduler's hot path is a dict lookup. Bigger nodes use a
greedy choice (:meth:`SubsetTable.greedy`). :func:`brute_force_best` is the reference used by the tests.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from plugins.topology.graph import SINGLE, Topology

MAX_EXACT = 12
Value = tuple[int, int]  # (bottleneck bandwidth, -NUMA nodes spanned)
Key = tuple[int, int, tuple[Value, ...], int]


def bits(mask: int) -> list[int]:
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


def mask_of(indices: Sequence[int]) -> int:
    m = 0
    for i in indices:
        m |= 1 << i
    return m


class SubsetTable:
    """Best-subset answers for one topology fingerprint (pairwise bandwidth + NUMA partition)."""

    def __init__(self, bw: Sequence[Sequence[int]], numa: Sequence[int]) -> None:
        self.n = len(bw)
        self.bw = [list(r) for r in bw]
        self.numa = list(numa)
        n = self.n
        self.close = [
            [(self.bw[i][j] * 2 + (1 if numa[i] == numa[j] else 0)) if i != j else 0 for j in range(n)]
            for i in range(n)
        ]
        self._value: dict[int, Value] = {0: (SINGLE, 0)}
        self._best_val: dict[tuple[int, int], Value | None] = {}
        self._pairsum: dict[int, int] = {0: 0}
        self._choice: dict[tuple[int, int], int | None] = {}
        self.stats = {"lookups": 0, "computed": 0}

    # --- per-set values ---------------------------------------------------------------------------------

    def value(self, mask: int) -> Value:
        """(bottleneck bandwidth, -NUMA span) of exactly the GPUs in ``mask``."""
        v = self._value.get(mask)
        if v is not None:
            return v
        low = (mask & -mask).bit_length() - 1
        rest = mask & (mask - 1)
        rv = self.value(rest)
        b = rv[0]
        row = self.bw[low]
        for j in bits(rest):
            if row[j] < b:
                b = row[j]
        span = len({self.numa[i] for i in bits(mask)})
        v = (b, -span)
        self._value[mask] = v
        return v

    def pairsum(self, mask: int) -> int:
        s = self._pairsum.get(mask)
        if s is not None:
            return s
        low = (mask & -mask).bit_length() - 1
        rest = mask & (mask - 1)
        row = self.close[low]
        s = self.pairsum(rest) + sum(row[j] for j in bits(rest))
        self._pairsum[mask] = s
        return s

    def best_value(self, mask: int, j: int) -> Value | None:
        """The best value of a j-subset of ``mask`` (None if ``mask`` has fewer than j GPUs)."""
        key = (mask, j)
        if key in self._best_val:
            return self._best_val[key]
        pc = mask.bit_count()
        out: Value | None
        if j > pc or j <= 0:
            out = None
        elif j == pc:
            out = self.value(mask)
        else:
            out = None
            m = mask
            while m:
                low = m & -m
                m ^= low
                v = self.best_value(mask ^ low, j)
                if v is not None and (out is None or v > out):
                    out = v
        self._best_val[key] = out
        return out

    def leftover(self, rest: int) -> tuple[Value, ...]:
        pc = rest.bit_count()
        return tuple(self.best_value(rest, j) or (0, 0) for j in range(pc, 1, -1))

    def key(self, free: int, chosen: int) -> Key:
        v = self.value(chosen)
        rest = free & ~chosen
        return (v[0], v[1], self.leftover(rest), self.pairsum(rest))

    # --- the answer -------------------------------------------------------------------------------------

    def best(self, free: int, k: int) -> int | None:
        """The mask of the best k GPUs among ``free`` (None if fewer than k are free)."""
        self.stats["lookups"] += 1
        ck = (free, k)
        got = self._choice.get(ck, -1)
        if got != -1:
            return got
        self.stats["computed"] += 1
        if k <= 0 or free.bit_count() < k:
            ans = None
        elif free.bit_count() == k:
            ans = free
        elif self.n > MAX_EXACT:
            ans = self.greedy(free, k)
        else:
            ans = None
            best_key: Key | None = None
            for combo in itertools.combinations(bits(free), k):
                m = mask_of(combo)
                kk = self.key(free, m)
                if best_key is None or kk > best_key:
                    best_key, ans = kk, m
        if len(self._choice) > 200_000:
            self._choice.clear()
        self._choice[ck] = ans
        return ans

    def greedy(self, free: int, k: int) -> int | None:
        """Large nodes: seed with the best pair, then add the GPU keeping the bottleneck highest (same NUMA
        first). Not exact."""
        idx = bits(free)
        if len(idx) < k:
            return None
        if k == 1:
            return 1 << idx[0]
        best_pair = max(
            itertools.combinations(idx, 2),
            key=lambda p: (self.bw[p[0]][p[1]], self.numa[p[0]] == self.numa[p[1]], -p[0], -p[1]),
        )
        chosen = list(best_pair)
        while len(chosen) < k:
            cands = [i for i in idx if i not in chosen]
            nxt = max(
                cands,
                key=lambda c: (
                    min(self.bw[c][x] for x in chosen),
                    sum(1 for x in chosen if self.numa[x] == self.numa[c]),
                    -c,
                ),
            )
            chosen.append(nxt)
        return mask_of(chosen)


_TABLES: dict[str, SubsetTable] = {}


def table_for(topo: Topology) -> SubsetTable:
    """The shared table of the topology's fingerprint."""
    t = _TABLES.get(topo.fingerprint)
    if t is None:
        if len(_TABLES) > 1024:
            _TABLES.clear()
        t = _TABLES[topo.fingerprint] = SubsetTable(topo.bw, topo.numa)
    return t


def best_set_value(table: SubsetTable, free: int, k: int) -> Value | None:
    """The score of the best ``k``-GPU set among the GPUs of ``free`` (a mask): (bottleneck bandwidth, -NUMA nodes
    spanned) of the set :meth:`SubsetTable.best` chooses, i.e. what a claim of ``k`` GPUs gets on the node when
    exactly those GPUs are free (the device order hook hands the allocator that set). None when fewer than ``k``
    are free. Pure, a memoised table lookup; higher is better (tuples compare lexicographically)."""
    m = table.best(free, k)
    return None if m is None else table.value(m)


# --- reference (tests) ---------------------------------------------------------------------------------------


def brute_value(bw: Sequence[Sequence[int]], numa: Sequence[int], s: Sequence[int]) -> Value:
    b = SINGLE
    for x, y in itertools.combinations(s, 2):
        b = min(b, bw[x][y])
    return (b, -len({numa[i] for i in s}))


def brute_key(bw: Sequence[Sequence[int]], numa: Sequence[int], free: Sequence[int], s: Sequence[int]) -> Key:
    rest = [i for i in free if i not in s]
    left: list[Value] = []
    for j in range(len(rest), 1, -1):
        left.append(max(brute_value(bw, numa, c) for c in itertools.combinations(rest, j)))
    close = 0
    for x, y in itertools.combinations(rest, 2):
        close += bw[x][y] * 2 + (1 if numa[x] == numa[y] else 0)
    v = brute_value(bw, numa, s)
    return (v[0], v[1], tuple(left), close)


def brute_force_best(
    bw: Sequence[Sequence[int]], numa: Sequence[int], free: Sequence[int], k: int
) -> tuple[Key, tuple[int, ...]] | None:
    """Every k-subset of ``free``, scored from scratch: the optimum key and the first set reaching it."""
    best: tuple[Key, tuple[int, ...]] | None = None
    for c in itertools.combinations(sorted(free), k):
        kk = brute_key(bw, numa, free, c)
        if best is None or kk > best[0]:
            best = (kk, c)
    return best


# --- explanations ------------------------------------------------------------------------------------------


def compress_names(names: Sequence[str]) -> str:
    """``gpu-0..3``, ``gpu-0,2``, ``gpu-1,4..6``; other names joined by commas."""
    parsed: list[tuple[str, int]] = []
    for nm in names:
        head, _, tail = nm.rpartition("-")
        if not head or not tail.isdigit():
            return ",".join(names)
        parsed.append((head, int(tail)))
    if len({h for h, _ in parsed}) != 1:
        return ",".join(names)
    head = parsed[0][0]
    nums = sorted(n for _, n in parsed)
    runs: list[str] = []
    start = prev = nums[0]
    for x in [*nums[1:], None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        runs.append(f"{start}..{prev}" if prev - start >= 2 else (f"{start},{prev}" if prev != start else f"{start}"))
        if x is not None:
            start = prev = x
    return f"{head}-{','.join(runs)}"


def describe(topo: Topology, idx: Sequence[int]) -> str:
    """e.g. ``gpu-0..3 NV18 all-pairs, NUMA 0`` or ``gpu-0,1 PIX, NUMA 0`` or ``gpu-2,5 bottleneck SYS, NUMA 0+1``."""
    idx = sorted(idx)
    names = compress_names([topo.gpus[i] for i in idx])
    numas = sorted({topo.numa[i] for i in idx})
    labels = [topo.numa_labels[g] for g in numas]
    numa = "NUMA " + "+".join(labels) if "?" not in labels else f"{len(numas)} NUMA node(s)"
    if len(idx) < 2:
        return f"{names}, {numa}"
    pairs = [(a, b) for a, b in itertools.combinations(idx, 2)]
    codes = {topo.codes[a][b] for a, b in pairs}
    worst = min(pairs, key=lambda p: topo.bw[p[0]][p[1]])
    wcode = topo.codes[worst[0]][worst[1]]
    if len(codes) == 1:
        link = f"{wcode} all-pairs" if wcode.startswith("NV") else wcode
    elif all(c.startswith("NV") for c in codes):
        link = f"NVLink all-pairs (min {wcode})"
    else:
        link = f"bottleneck {wcode}"
    return f"{names} {link}, {numa}"
