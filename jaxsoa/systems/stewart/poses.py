"""Validity of a Gough-Stewart platform's poses and poses along a path (`jaxsoa.systems.stewart.geometry`):
each leg within its stroke and the electric legs' Jacobian J₁₋₆ away from a singularity (`PoseStatus`, traced;
`check_pose` for `checkify`, `raise_if_invalid` on the host), and the exact twist and its rate along a smooth
pose path (`path_state`).
"""

import typing

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from jaxsoa.systems.stewart.geometry import StewartParams, electric_condition, leg_lengths


class PoseStatus(typing.NamedTuple):
    """length (9,); in_stroke (9,) bool; singular_values (6,) of J₁₋₆ (descending); condition ();
    reachable () all legs in stroke; nonsingular () condition ≤ max_condition; ok () both."""
    length: jax.Array
    in_stroke: jax.Array
    singular_values: jax.Array
    condition: jax.Array
    reachable: jax.Array
    nonsingular: jax.Array
    ok: jax.Array


def pose_status(params: StewartParams, p_world_platform, R_world_platform) -> PoseStatus:
    """Stroke limits and the singularity measure of the electric legs' Jacobian J₁₋₆ at a pose."""
    _, _, length, _ = leg_lengths(params, p_world_platform, R_world_platform)
    in_stroke = (length >= params.stroke_min) & (length <= params.stroke_max)
    sigma, condition = electric_condition(params, p_world_platform, R_world_platform)  # inf at σ_min = 0: a flag
    nonsingular = condition <= params.max_condition
    reachable = jnp.all(in_stroke)
    return PoseStatus(length, in_stroke, sigma, condition, reachable, nonsingular, reachable & nonsingular)


def check_pose(status: PoseStatus):
    """`checkify` checks (inside jit): every leg within its stroke, J₁₋₆ not singular."""
    checkify.check(status.reachable, "legs out of stroke (in_stroke = {s}), lengths {l}", s=status.in_stroke,
                   l=status.length)
    checkify.check(status.nonsingular, "J₁₋₆ is singular: condition number {c}, singular values {s}",
                   c=status.condition, s=status.singular_values)


def raise_if_invalid(status: PoseStatus):
    """Host-side: ValueError listing the poses (leading batch indices) out of stroke or singular."""
    ok = np.asarray(status.ok)
    if ok.all():
        return
    bad = np.argwhere(~ok)
    first = tuple(bad[0])
    legs = np.flatnonzero(~np.asarray(status.in_stroke)[first]).tolist()
    condition = float(np.asarray(status.condition)[first])
    raise ValueError(f"{len(bad)} invalid pose(s), first at index {first}: legs out of stroke {legs} (lengths "
                     f"{np.asarray(status.length)[first][legs]}), J₁₋₆ condition number {condition:.3g}")


class PathState(typing.NamedTuple):
    """Pose and twist along a path: p (3,), R (3, 3), u = [ṗ; ω] (6,), udot (6,)."""
    p: jax.Array
    R: jax.Array
    u: jax.Array
    udot: jax.Array


def path_state(pose_path, t) -> PathState:
    """Exact twist and its rate along a smooth pose path `pose_path(s) -> (p (3,), R (3, 3))`:
    `PathState` (p, R, u = [ṗ; ω], udot) at scalar time `t`, with ω = vee(Ṙ Rᵀ) (nested jvp)."""
    one = jnp.ones_like(t)

    def twist(s):
        (p, R), (p_dot, R_dot) = jax.jvp(pose_path, (s,), (one,))
        w_hat = R_dot @ R.T
        return (p, R), jnp.concatenate([p_dot, jnp.stack([w_hat[2, 1], w_hat[0, 2], w_hat[1, 0]])])

    ((p, R), u), (_, udot) = jax.jvp(twist, (t,), (one,))
    return PathState(p, R, u, udot)


__all__ = ["PathState", "PoseStatus", "check_pose", "path_state", "pose_status", "raise_if_invalid"]
