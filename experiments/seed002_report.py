"""How the seed-002 reproduction's runs report (experiments/reproduce_seed002.py): the error curves against a
reference, the table rows (max abs error, the scale, the expected tolerance) and the figure of each run
(its curves, then the errors on a log scale)."""

import numpy as np

from experiments._common import legend_outside, save_figure


def err(x, ref):
    """(T,) max over components of |x − ref| (ref broadcasts along time)."""
    return np.abs(np.asarray(x) - np.asarray(ref)).reshape(len(x), -1).max(axis=1)


def row(run, quantity, ref, e, scale, tol, relative=False):
    """A table row (run, quantity, reference, max abs error, max abs value, expected): the max of the errors `e`,
    absolute or (`relative`) divided by max |scale|."""
    scale = float(np.max(np.abs(scale)))
    return (run, quantity, ref, f"{np.max(e) / scale if relative else np.max(e):.2e}",
            "1 (relative)" if relative else f"{scale:.3g}", tol)


def plot(path, title, t, panels, errors, error_unit, overlay_label="closed form"):
    """A panel per (ylabel, curves (T, k), labels, dotted overlay (T, k) or None), then the errors
    {label: (T,)} on a log scale (in `error_unit`); legends beside the axes."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels) + 1, 1, sharex=True, figsize=(10.5, 2.4 * (len(panels) + 1)))
    for ax, (ylabel, y, labels, overlay) in zip(axes, panels, strict=False):
        for k, label in enumerate(labels):
            ax.plot(t, y[:, k], color=f"C{k}", label=label)
            if overlay is not None:
                ax.plot(t, overlay[:, k], color="k", ls=":", lw=1, label=overlay_label if k == 0 else None)
        ax.set(ylabel=ylabel)
        legend_outside(ax, fontsize=7)
        ax.grid(alpha=0.3)
    for label, e in errors.items():
        axes[-1].semilogy(t, np.maximum(e, 1e-20), label=label)
    axes[-1].set(ylabel=f"|error|, max over entries\n{error_unit}", xlabel="t [s]")
    legend_outside(axes[-1], fontsize=7)
    axes[-1].grid(alpha=0.3, which="both")
    axes[0].set_title(title)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
