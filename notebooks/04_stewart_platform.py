# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The gas-assisted Stewart platform
# Seed 004: six electric cylinders (legs 0–5) and three passive gas springs (legs 6–8) carry a 12 t
# payload (`sims/stewart_gas.py`). Inverse kinematics and the 9×6 Jacobian are in `jaxsoa.systems.stewart.geometry`,
# pose validity and paths in `jaxsoa.systems.stewart.poses`, Kane's inverse dynamics and the gas springs in
# `jaxsoa.systems.stewart.dynamics` (the package `jaxsoa.systems.stewart` exports all three). The platform twist is
# u = [v_P; ω_P] (linear first, as in the seed; world frame).

# %%
import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from jaxsoa.systems import stewart  # noqa: E402
from jaxsoa.systems.stewart import dynamics as stewart_dynamics  # noqa: E402
from sims import stewart_gas  # noqa: E402

with_gas = stewart_gas.build("individual")   # one tank per gas cylinder
vented = stewart_gas.build("none")           # same platform, gas vented
print("home pose p =", stewart_gas.HOME, " platform + payload mass:", float(with_gas.platform_mass), "kg")
print("electric leg stroke [m]:", float(with_gas.stroke_min[0]), "…", float(with_gas.stroke_max[0]))

# %% [markdown]
# ## Inverse kinematics of a pose on a motion profile
# `sine_profile()` is heave 0.15 m, pitch 6°, roll 5°. `path_state` differentiates the pose path
# (nested `jax.jvp`) into the exact twist u and its rate; `leg_motion` gives leg lengths, rates and
# accelerations in closed form, and `jacobian` the 9×6 J with l̇ = J u. Check: J u equals the time
# derivative of the leg lengths along the path, taken here by forward-mode autodiff.

# %%
profile = stewart_gas.sine_profile()


@jax.jit
def kinematics(time):
    p, R, u, udot = stewart.path_state(profile, time)
    legs = stewart.leg_motion(with_gas, p, R, u, udot)
    J = stewart.jacobian(with_gas, p, R)
    lengths_along_path = lambda s: stewart.leg_lengths(with_gas, *profile(s))[2]   # noqa: E731
    _, rate_autodiff = jax.jvp(lengths_along_path, (time,), (jnp.ones_like(time),))
    return legs, J, u, rate_autodiff, stewart.pose_status(with_gas, p, R)


legs, J, u, rate_autodiff, status = kinematics(jnp.asarray(0.7))
print("leg lengths [m]:", np.asarray(legs.length).round(4))
print("J shape:", J.shape, " max |J u − dl/dt| =", float(jnp.abs(J @ u - rate_autodiff).max()))
print("pose ok:", bool(status.ok), " J₁₋₆ condition number:", float(status.condition))

# %% [markdown]
# ## Inverse dynamics by Kane's equations, with and without gas
# `inverse_dynamics` solves J₁₋₆ᵀ F = h − J₇₋₉ᵀ τ_P for the six electric forces F (positive extends),
# with τ_P the isothermal gas forces. At the home pose at rest the gas carries most of the weight.

# %%
home = jnp.asarray(stewart_gas.HOME)
zero = jnp.zeros(6)
inverse = jax.jit(stewart_dynamics.inverse_dynamics)
static_gas = inverse(with_gas, home, jnp.eye(3), zero, zero)
static_vented = inverse(vented, home, jnp.eye(3), zero, zero)
print("electric forces at rest [kN], with gas:", np.asarray(static_gas.force / 1e3).round(2))
print("electric forces at rest [kN], vented:  ", np.asarray(static_vented.force / 1e3).round(2))
print("gas forces [kN]:", np.asarray(static_gas.gas.force / 1e3).round(2))

# %% [markdown]
# ## A vmapped batch of poses along the trajectory
# One compiled call evaluates path state, inverse dynamics with and without gas, and the light-leg
# approximation (legs massless, seed eq. 61) at 400 instants.

# %%
@jax.jit
@jax.vmap
def forces_along_path(time):
    p, R, u, udot = stewart.path_state(profile, time)
    return (stewart_dynamics.inverse_dynamics(with_gas, p, R, u, udot),
            stewart_dynamics.inverse_dynamics(vented, p, R, u, udot).force,
            stewart_dynamics.inverse_dynamics_light_leg(with_gas, p, R, u, udot).force)


times = jnp.linspace(0.0, 5.0, 400)
gas_run, vented_force, light_force = forces_along_path(times)
print("all poses reachable and nonsingular:", bool(gas_run.status.ok.all()))
print(f"peak |F| with gas {float(jnp.abs(gas_run.force).max()) / 1e3:.1f} kN, "
      f"vented {float(jnp.abs(vented_force).max()) / 1e3:.1f} kN; "
      f"light-leg error up to {float(jnp.abs(light_force - gas_run.force).max()) / 1e3:.2f} kN")

fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
for ax, force, title in ((axes[0], gas_run.force, "with gas springs"), (axes[1], vented_force, "gas vented")):
    ax.plot(times, force / 1e3)
    ax.set(title=title, xlabel="t [s]")
axes[0].set_ylabel("electric cylinder force F [kN]")
axes[1].legend([f"leg {i}" for i in range(6)], fontsize=8, ncol=2)
fig.tight_layout()
plt.show()
