"""A link's spatial velocity and acceleration in Pinocchio's three reference frames (`getFrameVelocity`,
`getFrameAcceleration` and `getFrameClassicalAcceleration` after `forwardKinematics(model, data, q, v, a)`).

`link_velocities` / `link_accelerations` give every link's motion in its own frame ("local"); here one
link's is expressed in `reference`:

* "local": the link frame (Pinocchio's `data.v[i]`, `data.a[i]` for a link that is a joint frame);
* "world": at the world origin, world axes, X_world_link V (the velocity field of the body at the origin);
* "local_world_aligned": at the link origin, world axes, [R ω; R v].

Shapes: q (nq,), v / a (nv,), link a link index in [0, n) (a traced one outside gives NaN); each result a
(6,) spatial vector `[angular; linear]`, with a leading batch axis through the entry point. Accelerations
exclude gravity, as Pinocchio's `data.a` does.
"""

import jax.numpy as jnp

from jaxsoa.algorithms.kinematics import forward_kinematics, link_motion, valid_link
from jaxsoa.multibody.arguments import check_reference_frame, entry_point
from jaxsoa.multibody.model import Model
from jaxsoa.spatial.algebra import act_motion


def _express(model: Model, q, link, reference, *motions_local):
    """(6,) link-frame motion vectors of `link` expressed in `reference` (module docstring), one forward
    kinematics pass for all of them: a tuple, one (6,) per argument."""
    if reference == "local":
        return motions_local
    R_world_link, p_world_link = (x[link] for x in forward_kinematics(model, q))
    origin = p_world_link if reference == "world" else jnp.zeros_like(p_world_link)
    return tuple(act_motion(R_world_link, origin, m)            # X_world_link V, or [R ω; R v] at the link origin
                 for m in motions_local)


def _link_motion_at(model: Model, q, v, a, link):
    """(V, α) of `link` in its own frame, gravity excluded: two (6,) vectors."""
    motion = link_motion(model, q, v, a, jnp.zeros(6, v.dtype))              # V_k = X⁻¹ V_p + S θ̇, α_k likewise
    return motion.velocity[link], motion.acceleration[link]


@entry_point(q='q', v='v', link='link')
def frame_velocity(model: Model, q, v, link: int, reference="local"):
    """(6,) spatial velocity `[ω; v]` of link `link` in `reference` (Pinocchio's `getFrameVelocity`)."""
    check_reference_frame(reference)
    velocity, _ = _link_motion_at(model, q, v, jnp.zeros_like(v), link)
    return valid_link(model, link, _express(model, q, link, reference, velocity)[0])


@entry_point(q='q', v='v', a='v', link='link')
def frame_acceleration(model: Model, q, v, a, link: int, reference="local"):
    """(6,) spatial acceleration `[ω̇; a]` of link `link` in `reference`, gravity excluded (Pinocchio's
    `getFrameAcceleration`): the time derivative of the spatial velocity field, not of a point's velocity."""
    check_reference_frame(reference)
    _, acceleration = _link_motion_at(model, q, v, a, link)
    return valid_link(model, link, _express(model, q, link, reference, acceleration)[0])


@entry_point(q='q', v='v', a='v', link='link')
def frame_classical_acceleration(model: Model, q, v, a, link: int, reference="local"):
    """(6,) classical acceleration `[ω̇; p̈]` of link `link`'s origin in `reference`, gravity excluded
    (Pinocchio's `getFrameClassicalAcceleration`): the spatial one plus ω × v, both in `reference` (in
    "world", that of the body point at the world origin)."""
    check_reference_frame(reference)
    velocity, acceleration = _link_motion_at(model, q, v, a, link)
    V, A = _express(model, q, link, reference, velocity, acceleration)
    # p̈ = a + ω × v:  the linear part of the spatial acceleration plus the Coriolis-like term
    classical = jnp.concatenate([A[:3], A[3:] + jnp.cross(V[:3], V[3:])])
    return valid_link(model, link, classical)
