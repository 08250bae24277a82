#!/usr/bin/env python3
"""Derives the coefficients of the float32 tanh in src/backend/cpu/fast_math.h.

tanh(x) ≈ x·P(x²)/Q(x²) on [0, C], P of degree 6 and Q of degree 3 with Q(0) = 1, chosen to
minimize the largest relative error (minimax, by Lawson's iteratively reweighted linearized least
squares on 12 000 points; the error equioscillates after a few dozen rounds).  C = 9.1: beyond it
tanh rounds to 1 in float32, and the code clamps |x| to C.  The approximation error is ~7.5e-9
relative (0.13 float ulps); the float evaluation adds the rest (tests/backend/fast_math_test.cpp
bounds the total).

Needs numpy (bench/peers/.venv has it):  bench/peers/.venv/bin/python scripts/fit_tanh.py
Prints the C++ lines for the two polynomials.
"""
import numpy as np

C = 9.1
P_DEGREE, Q_DEGREE = 6, 3
POINTS = 6000
ROUNDS = 200


def fit():
    x = np.concatenate([np.linspace(1e-4, C, POINTS),
                        C * np.sin(np.linspace(0, np.pi / 2, POINTS)) ** 2 + 1e-6])
    x = np.unique(x)
    s = (x * x) / (C * C)  # the fit runs on s = x²/C² ∈ [0, 1] for conditioning
    g = np.tanh(x) / x  # target of P/Q
    weights = np.ones_like(s)
    q_previous = np.ones_like(s)
    for _ in range(ROUNDS):
        # P(s) − g·(Q(s) − 1) = g, linearized relative error weighted by 1/(g·Q_previous).
        a = np.hstack([np.vstack([s**j for j in range(P_DEGREE + 1)]).T,
                       -np.vstack([g * s**j for j in range(1, Q_DEGREE + 1)]).T])
        scale = np.sqrt(weights) / (g * q_previous)
        solution, *_ = np.linalg.lstsq(a * scale[:, None], g * scale, rcond=None)
        p = solution[:P_DEGREE + 1]
        q = np.concatenate([[1.0], solution[P_DEGREE + 1:]])
        q_previous = np.polyval(q[::-1], s)
        error = (np.polyval(p[::-1], s) / q_previous - g) / g
        weights = np.maximum(weights * np.abs(error) / np.sum(weights * np.abs(error)), 1e-12)
    # Back to coefficients of t = x².
    p_t = [p[j] / C ** (2 * j) for j in range(P_DEGREE + 1)]
    q_t = [q[j] / C ** (2 * j) for j in range(Q_DEGREE + 1)]
    return p_t, q_t, float(np.abs(error).max())


def main():
    p, q, worst = fit()
    print(f"// largest relative error of P/Q on [0, {C}]: {worst:.3e}")
    print("P: " + ", ".join(f"{float(np.float32(c))!r}f" for c in p))
    print("Q: " + ", ".join(f"{float(np.float32(c))!r}f" for c in q))


if __name__ == "__main__":
    main()
