#!/usr/bin/env python3
"""Writes W1's data (shared/WORKLOADS.md): x = linspace(-1, 1, 20000), y = sinc(10x), as CSV.
usage: make_data.py OUT.csv [samples]"""
import math
import sys

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
with open(out + ".tmp", "w") as f:
    f.write("x,y\n")
    for i in range(n):
        x = -1.0 + 2.0 * i / (n - 1)
        t = math.pi * 10.0 * x
        f.write(f"{x!r},{(math.sin(t) / t if t != 0 else 1.0)!r}\n")
import os
os.replace(out + ".tmp", out)
