"""Foundation check: jaxsoa against Pinocchio on the Panda (float64 and float32) and the simple
pendulum's exact period (validation.md), with plots.

    python -m experiments.reproduce_core --out outputs/core
"""

import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ellipk

import jaxsoa
from experiments._common import (
    NO_RESUME_NOTE,
    check_out,
    command_parser,
    interruptible,
    markdown_table,
    positive_int,
    save_figure,
    start_run,
    write_text,
)
from jaxsoa.integrators import rollout
from jaxsoa.io import example_robot_urdf


def panda_errors(n_states=100, seed=0):
    """Max relative error of rnea/aba/crba vs Pinocchio on random Panda states, per dtype."""
    import pinocchio as pin

    path = str(example_robot_urdf("panda"))
    pin_model = pin.buildModelFromUrdf(path)
    pin_data = pin_model.createData()
    rng = np.random.default_rng(seed)
    q = np.stack([pin.randomConfiguration(pin_model) for _ in range(n_states)])
    v, a = rng.normal(size=(2, n_states, pin_model.nv))
    tau = np.stack([pin.rnea(pin_model, pin_data, *x).copy() for x in zip(q, v, a, strict=False)])
    qdd = np.stack([pin.aba(pin_model, pin_data, *x).copy() for x in zip(q, v, tau, strict=False)])
    M = np.stack([pin.crba(pin_model, pin_data, x).copy() for x in q])
    M = np.triu(M) + np.swapaxes(np.triu(M, 1), 1, 2)
    rows = []
    for dtype in (jnp.float64, jnp.float32):
        model = jaxsoa.load_urdf(path, dtype=dtype)
        cast = [jnp.asarray(x, dtype) for x in (q, v, a, tau)]
        ours = {
            "rnea": jax.jit(jax.vmap(jaxsoa.rnea, (None, 0, 0, 0)))(model, cast[0], cast[1], cast[2]),
            "aba": jax.jit(jax.vmap(jaxsoa.aba, (None, 0, 0, 0)))(model, cast[0], cast[1], cast[3]),
            "crba": jax.jit(jax.vmap(jaxsoa.crba, (None, 0)))(model, cast[0]),
        }
        for name, ref in (("rnea", tau), ("aba", qdd), ("crba", M)):
            err = np.abs(np.asarray(ours[name], np.float64) - ref).max() / np.abs(ref).max()
            rows.append((name, jnp.dtype(dtype).name, err))
    return rows


def pendulum_period(dts=(0.02, 0.01, 0.005)):
    """Simple pendulum (L = 1 m, point mass, g = 9.81) released horizontal: RK4 period by
    interpolated zero crossings of the angular rate, vs 4 √(L/g) K(1/2)."""
    model = jaxsoa.build_model([-1], [1], [[1.0, 0, 0]], [np.eye(3)], [[0, 0, 0.0]], [1.0], [[0, 0, -1.0]],
                               [np.zeros((3, 3))], dtype=jnp.float64)
    exact = 4 * np.sqrt(1 / 9.81) * ellipk(0.5)
    results = []
    for dt in dts:
        qs, vs = rollout(model, jnp.array([jnp.pi / 2]), jnp.zeros(1), lambda t, q, v: jnp.zeros(1), dt,
                         round(2.2 * exact / dt))
        t = np.arange(len(vs)) * dt
        w = np.asarray(vs[:, 0])
        crossings = [t[i] - w[i] * dt / (w[i + 1] - w[i]) for i in range(1, len(w) - 1)
                     if w[i] < 0 <= w[i + 1]]                   # rate turns positive at the far end
        results.append((dt, 2 * crossings[0] if crossings else np.nan, t, np.asarray(qs[:, 0])))
    return exact, results


@interruptible(NO_RESUME_NOTE)
def main(argv=None):
    parser = command_parser(__doc__, "outputs/core")
    parser.add_argument("--states", type=positive_int, default=100, help="random Panda states (default 100)")
    args = parser.parse_args(argv)
    run(check_out(parser, args.out), args.states)
    return 0


def run(out: pathlib.Path, n_states=100):
    out = start_run(out)
    import matplotlib.pyplot as plt

    rows = panda_errors(n_states)
    exact, pend = pendulum_period()
    table = markdown_table(("check", "dtype", "max relative error"), [
        *((f"Panda {name} vs Pinocchio", dt, f"{err:.2e}") for name, dt, err in rows),
        *((f"pendulum period, RK4 dt={dt}", "float64", f"{abs(T - exact) / exact:.2e}") for dt, T, _, _ in pend)])
    print(table)
    write_text(out / "core_table.md", table + "\n")

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    labels = [f"{n}\n{d}" for n, d, _ in rows]
    ax1.bar(labels, [e for _, _, e in rows], color=["C0" if d == "float64" else "C1" for _, d, _ in rows])
    ax1.set_yscale("log")
    ax1.set_ylabel("max relative error vs Pinocchio")
    ax1.set_title(f"Panda, {n_states} random states")
    # the angle traces of the three steps coincide to the line width: plot the period error instead
    dts, errors = np.array([p[0] for p in pend]), np.array([abs(p[1] - exact) / exact for p in pend])
    slope = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    ax2.loglog(dts, errors, "o-", label=f"RK4, measured (slope {slope:.2f})")
    ax2.loglog(dts, errors[0] * (dts / dts[0]) ** 4, "k--", lw=0.8, label="∝ dt⁴ (RK4's order)")
    ax2.set(xlabel="RK4 step dt [s]", ylabel="|T − T_exact| / T_exact",
            title=f"Pendulum released horizontal: period (T_exact = {exact:.6f} s)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out / "core_validation.png", dpi=120)
    plt.close(fig)
    print(f"wrote {out / 'core_table.md'} and {out / 'core_validation.png'}")
    return rows, exact, pend


if __name__ == "__main__":
    sys.exit(main())
