#!/usr/bin/env python3
"""order_model.py: a model of one GPU's offload of C = A·B with the operands
page-locked (docs/matmul.md, eighth session): one upload stream (one block
at a time, U ms each), one product stream (G ms a product) and one download
stream (D ms a block of C), the blocks uploaded in the order the products
first need them, each product started as soon as its blocks are up and the
previous product is done, a block of C downloaded after its last product.
It prints the makespan and TFLOP/s of the traversals of an N x N x N block
product: the panel order (Plan's row panels, one panel: j, l, i), slab
first (l, j, i), and the slab lead of 1..3 columns (the first columns slab
first, the rest in the panel order, the last one with l fastest).

Defaults: the H200 trace of 2026-11-27 15:09Z, n = 16384 in 4096-blocks
(U 2.80, G 2.35, D 3.1 ms). Usage: order_model.py [N U G D [BS]]"""
import sys

N, U, G, D, BS = 4, 2.80, 2.35, 3.1, 4096
if len(sys.argv) >= 5:
    N, U, G, D = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
if len(sys.argv) == 6:
    BS = int(sys.argv[5])
n = N * BS


def makespan(order):
    up, t = {}, 0.0
    for i, j, l in order:
        for b in (('A', i, l), ('B', l, j)):
            if b not in up:
                t += U
                up[b] = t
    left = {(i, j): N for i in range(N) for j in range(N)}
    g, done = 0.0, []
    for i, j, l in order:
        g = max(g, up[('A', i, l)], up[('B', l, j)]) + G
        left[(i, j)] -= 1
        if left[(i, j)] == 0:
            done.append(g)
    d = 0.0
    for c in done:
        d = max(d, c) + D
    return max(g, d)


def lead(k):
    head = [(i, j, l) for l in range(N) for j in range(k) for i in range(N)]
    mid = [(i, j, l) for j in range(k, N - 1) for l in range(N) for i in range(N)]
    last = [(i, N - 1, l) for i in range(N) for l in range(N)] if k < N else []
    return head + mid + last


orders = {
    'panel order (j, l, i)': [(i, j, l) for j in range(N) for l in range(N) for i in range(N)],
    'slab first (l, j, i)': [(i, j, l) for l in range(N) for j in range(N) for i in range(N)],
}
for k in range(1, min(4, N)):
    orders['slab lead %d' % k] = lead(k)
best = N**3 * G + 2 * U + D
print('bound: %.1f ms, %.1f TFLOP/s (every product back to back, one fill, one drain)' % (best, 2 * n**3 / best / 1e9))
for name, o in orders.items():
    assert len(set(o)) == N**3, name
    t = makespan(o)
    print('%-24s %7.1f ms  %5.1f TFLOP/s' % (name, t, 2 * n**3 / t / 1e9))
