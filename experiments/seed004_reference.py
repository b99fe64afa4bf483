"""Second code path for the seed-004 reproduction: the gas-assisted Stewart platform as a closed-loop
jaxsoa multibody system, whose actuated prismatic forces must equal Kane's electric cylinder forces
(`jaxsoa.systems.stewart.dynamics.inverse_dynamics`).

The tree is cut at the nine platform spherical joints: a fixed root (the base), the platform on a
free joint, and per leg a universal joint (revolute about x, then y, massless cross), the barrel, and
the rod on a prismatic joint along z, the leg axis at the mid pose. A universal joint does spin the
leg (ω · n = θ̇₁ sin θ₂), which Kane's model (ω_i = n × ṅ) neglects; the legs are slender (zero axial
moment, as `StewartParams` assumes), so the spin carries no energy and both models are exact (with
an axial moment of 0.1 × transverse they differ by 2e-8 relative on a random path).
`inverse_dynamics_constrained` solves [S_aᵀ G_cᵀ] [τ; λ] = M q̈ + C with the six electric prismatic
joints actuated and the gas forces applied as external wrenches on rods and barrels.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxsoa.constraints.closure import loop_closure, stack_closures
from jaxsoa.constraints.dynamics import inverse_dynamics_constrained
from jaxsoa.multibody.build import build_model
from jaxsoa.multibody.joints import JointType
from jaxsoa.spatial.rotation import rotation_to_quat
from jaxsoa.systems.stewart import dynamics as sd
from jaxsoa.systems.stewart import geometry as st
from jaxsoa.systems.stewart import poses
from sims import stewart_gas as sg


def closed_loop_model(params):
    """(model, closure, R0 (9, 3, 3), mid lengths (9,)) of the platform `params` cut at its
    spherical joints (module doc); link 4 + 3 i is leg i's rod, its barrel the link before."""
    P = jax.tree.map(np.asarray, params)
    eye, zero, ez = np.eye(3), np.zeros(3), np.array([0.0, 0.0, 1.0])
    parent, types, axes, rot, trans = [-1, 0], [JointType.FIXED, JointType.FREE], [ez, ez], [eye, eye], [zero, zero]
    mass, com, inertia = [0.0, P.platform_mass], [zero, P.platform_com], [np.zeros((3, 3)), P.platform_inertia]
    frames, lengths = [], []
    slender = np.diag([1.0, 1.0, 0.0])
    for i in range(9):
        leg = np.asarray(sg.HOME) + P.platform_points[i] - P.base_points[i]
        n = leg / np.linalg.norm(leg)
        x = np.cross(np.array([0.0, 1.0, 0.0]), n)
        x /= np.linalg.norm(x)
        frames.append(np.stack([x, np.cross(n, x), n], 1))              # columns x, y, z = n
        lengths.append(np.linalg.norm(leg))
        k = len(parent)
        parent += [0, k, k + 1]
        types += [JointType.REVOLUTE, JointType.REVOLUTE, JointType.PRISMATIC]
        axes += [np.array([1.0, 0, 0]), np.array([0.0, 1, 0]), ez]
        rot += [frames[-1], eye, eye]
        trans += [P.base_points[i], zero, np.array([0.0, 0.0, lengths[-1]])]
        mass += [0.0, P.barrel_mass[i], P.rod_mass[i]]
        com += [zero, P.barrel_com[i] * ez, -P.rod_com[i] * ez]
        inertia += [np.zeros((3, 3)), slender * P.barrel_inertia[i], slender * P.rod_inertia[i]]
    model = build_model(parent, types, np.array(axes), np.array(rot), np.array(trans), np.array(mass), np.array(com),
                        np.array(inertia), gravity=P.gravity, dtype=jnp.float64)
    closure = stack_closures(*(loop_closure(4 + 3 * i, 1, (eye, zero), (eye, P.platform_points[i]), "spherical",
                                            model=model) for i in range(9)))
    return model, closure, jnp.asarray(np.array(frames)), jnp.asarray(np.array(lengths))


def closed_loop_forces(params, path, times):
    """Electric cylinder forces along `path` at `times` (T,): (closed-loop model (T, 6), Kane (T, 6)),
    one compiled call; `params` concrete (the model is built on the host)."""
    model, closure, R0, l0 = closed_loop_model(params)
    rods = 4 + 3 * np.arange(9)
    electric = 6 + 3 * np.arange(6) + 2                                 # v index of each electric prismatic
    actuated = jnp.zeros(model.nv, bool).at[electric].set(True)

    def leg_coords(s):                           # (θ₁, θ₂, l − l_mid) per leg: R0 Rx(θ₁) Ry(θ₂) e_z = n
        p, R = path(s)
        _, _, length, n = st.leg_lengths(params, p, R)
        d = jnp.einsum("kji,kj->ki", R0, n)
        return jnp.stack([jnp.arctan2(-d[:, 1], d[:, 2]), jnp.arcsin(d[:, 0]), length - l0], 1).reshape(-1)

    def body_twist(s):                           # free joint velocity: [Rᵀ ṗ; Rᵀ ω]
        _, R, u, _ = poses.path_state(path, s)
        return jnp.concatenate([R.T @ u[:3], R.T @ u[3:]])

    def at(s):
        one = jnp.ones_like(s)
        legs, legs_d = jax.jvp(leg_coords, (s,), (one,))
        legs_dd = jax.jvp(lambda x: jax.jvp(leg_coords, (x,), (one,))[1], (s,), (one,))[1]
        v_p, a_p = jax.jvp(body_twist, (s,), (one,))
        p, R = path(s)
        q = jnp.concatenate([p, rotation_to_quat(R), legs])
        kane = sd.inverse_dynamics(params, *poses.path_state(path, s))
        f_ext = jnp.zeros((model.n_links, 6)).at[rods, 5].set(jnp.r_[jnp.zeros(6), kane.gas.force])
        f_ext = f_ext.at[rods - 1, 5].set(-f_ext[rods, 5])       # gas: +τ n on the rod, −τ n on the barrel
        result = inverse_dynamics_constrained(model, q, jnp.r_[v_p, legs_d], jnp.r_[a_p, legs_dd], closure, actuated,
                                              f_ext)
        return result.tau[electric], kane.force

    return jax.jit(jax.vmap(at))(times)
