"""W5-style data for the distributed_cholesky benchmark (bench/README.md, "Distributed Cholesky on
CPU ranks"): x ∈ R^8 uniform in [-1, 1], y = a smooth function of x, 40 000 rows, seed 0.
Writes w5.csv next to this file (standard library only)."""
import math
import pathlib
import random

rng = random.Random(0)
out = pathlib.Path(__file__).with_name("w5.csv")
with out.open("w") as f:
    f.write(",".join([f"x{i}" for i in range(8)] + ["y"]) + "\n")
    for _ in range(40_000):
        x = [rng.uniform(-1.0, 1.0) for _ in range(8)]
        y = (math.sin(2 * x[0]) * math.cos(x[1]) + 0.5 * x[2] * x[3] - 0.3 * math.tanh(3 * x[4])
             + 0.2 * x[5] ** 2 - 0.1 * x[6] + 0.05 * math.sin(5 * x[7]))
        f.write(",".join(f"{v:.9g}" for v in x + [y]) + "\n")
print(f"wrote {out}")
