"""The plots of seed 001's reproduction (experiments/reproduce_seed001.py): the coupled run (deployed
length, tension along the tether, libration, energy budget) and the dispersion's histograms."""

import numpy as np

from experiments._common import legend_outside, save_figure


def plot_coupled(out, res, law):
    import matplotlib.pyplot as plt

    t = res["t"] / 60
    fig, axes = plt.subplots(4, 1, figsize=(11, 11), sharex=True)
    axes[0].plot(t, res["l"])
    axes[0].set(ylabel="deployed length l [m]")
    fig.suptitle("Seed 001: coupled platform + tether + robot, circular orbit")
    edges = (0.0, law.t_deploy / 60, (law.t_deploy + law.t_hold) / 60, t[-1])          # phase boundaries [min]
    for x0, x1, phase in zip(edges, edges[1:], ("deployment", "hold", "retrieval"), strict=False):
        axes[0].text((x0 + x1) / 2, 1.02, phase, transform=axes[0].get_xaxis_transform(), ha="center",
                     va="bottom", fontsize=8, color="0.3")
    n = res["tension"].shape[1]
    image = axes[1].imshow(1e3 * res["tension"].T, aspect="auto", origin="lower", cmap="viridis",
                           extent=(t[0], t[-1], 0.0, 1.0), interpolation="nearest")
    fig.colorbar(image, cax=axes[1].inset_axes((1.01, 0.0, 0.02, 1.0)), label="tension [mN]")
    axes[1].set(ylabel=f"arc length / l [–]\n({n} elements)")
    axes[2].plot(t, np.degrees(res["theta"]), label="in-plane θ")
    axes[2].plot(t, np.degrees(res["phi"]), label="out-of-plane φ")
    axes[2].set(ylabel="libration [deg]")
    E = res["energy"] - res["energy"][0]
    W = res["work"]
    labels = ("kinetic T", "elastic U", "gravity gradient U_gg", "−n H_z")
    for k, label in enumerate(labels):
        axes[3].plot(t, E[:, k], label=f"Δ {label}")
    for k, label in enumerate(("reel work", "Carnot loss", "viscous loss", "strain flux", "joint work")):
        axes[3].plot(t, W[:, k], ls="--", label=label)
    axes[3].plot(t, E.sum(1) - W.sum(1), color="k", lw=2, label="residual ΔE_J − ΣW")
    axes[3].set(ylabel="energy [J]", xlabel="t [min]")
    for ax in axes:
        ax.grid(alpha=0.3)
        for k, edge in enumerate(edges[1:3]):
            ax.axvline(edge, color="0.5", lw=0.8, ls=":", label="phase boundary" if k == 0 else None)
    for ax in (axes[0], axes[2], axes[3]):
        legend_outside(ax, fontsize=7)
    fig.tight_layout()
    save_figure(fig, out / "seed001_coupled.png", dpi=110)
    plt.close(fig)


def plot_dispersion(out, peaks, final_amplitude, retrieval_amplitude, rates, final_l):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    axes[0].hist(1e3 * peaks, bins=40)
    axes[0].set(xlabel="peak tension [mN]", ylabel="draws")
    bins = np.linspace(0.0, np.degrees(max(retrieval_amplitude.max(), final_amplitude.max())), 41)
    axes[1].hist(np.degrees(final_amplitude), bins=bins, alpha=0.7, label="final (last 10 % of the run)")
    axes[1].hist(np.degrees(retrieval_amplitude), bins=bins, alpha=0.7, label="max during retrieval")
    axes[1].set(xlabel="in-plane libration amplitude |θ| [deg]", ylabel="draws")
    axes[1].legend(fontsize=8)
    points = axes[2].scatter(rates, final_l, c=np.degrees(retrieval_amplitude), s=6, cmap="viridis")
    fig.colorbar(points, ax=axes[2], label="max |θ| [deg]", pad=0.01)
    axes[2].set(xlabel="retrieval rate c (l̇ = −c n l)", ylabel="final length [m]", yscale="log")
    fig.suptitle(f"Dispersion over {len(peaks)} draws of (EA, α, retrieval rate, θ₀), reduced model")
    fig.tight_layout()
    save_figure(fig, out / "seed001_dispersion.png", dpi=110)
    plt.close(fig)
