"""The regulation tasks of `experiments.train_controller` (its module doc describes them): each a
`Task` whose rollouts start from `init(key)`, float32, semi-implicit Euler at `DT`."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

import jaxsoa
from jaxsoa.algorithms.free_floating import base_and_joint_dofs
from jaxsoa.spatial.rotation import log_so3, quat_to_rotation
from jaxsoa.topology.reconfigure import apply_configuration, design_arrays, reconfigurable_model
from sims import dual_arm_spacecraft as dual
from sims import space_arm_7dof as arm

DT, F32 = 0.03, jnp.float32


@dataclasses.dataclass(frozen=True)
class Task:
    """A regulation task: `init(key) -> (q0, v0, target, context)`, `model_of(context)`, `observe`, `cost`,
    `computed_torque`, and the actuated velocity indices `act` into v."""
    name: str
    n_obs: int
    act: np.ndarray
    tau_max: float
    init: callable
    model_of: callable
    observe: callable
    cost: callable
    computed_torque: callable


def space_arm_task():
    model = arm.build(floating=True, dtype=F32)
    _, act = base_and_joint_dofs(model)

    def init(key):
        target = jax.random.uniform(key, (7,), F32, -0.5, 0.5)
        return jaxsoa.neutral(model, F32), jnp.zeros(model.nv, F32), target, jnp.zeros(0, F32)

    def hub_attitude(q):
        return log_so3(quat_to_rotation(q[3:7]))

    def observe(q, v, target, context):
        return jnp.concatenate([q[7:] - target, v[act], hub_attitude(q), v[3:6]])

    def cost(q, v, tau, target, context):
        return (jnp.sum((q[7:] - target) ** 2) + 0.1 * jnp.sum(v[act] ** 2) + 10.0 * jnp.sum(hub_attitude(q) ** 2)
                + 1e-8 * jnp.sum(tau**2))

    def computed_torque(q, v, target, context, kp, kd):
        zero = jnp.zeros(7, F32)
        return jaxsoa.computed_torque_free_floating(model, q, v, target, zero, zero, kp, kd)

    return Task("space_arm", 20, act, 1000.0, init, lambda context: model, observe, cost, computed_torque)


def reconfigurable_task():
    design = dual.design()
    template = reconfigurable_model(design, dual.configuration(1), dual.IDS, gravity=(0.0, 0.0, 0.0), dtype=F32)
    arrays = design_arrays(design, dtype=F32)
    configs = jnp.asarray(np.stack([dual.configuration(k) for k in (1, 2, 3)]))
    act = np.arange(template.nv)

    def model_of(context):
        return apply_configuration(template, arrays, configs[jnp.argmax(context)])

    def init(key):
        k_target, k_config = jax.random.split(key)
        context = jax.nn.one_hot(jax.random.randint(k_config, (), 0, 3), 3, dtype=F32)
        target = jax.random.uniform(k_target, (template.nv,), F32, -0.5, 0.5)
        return jnp.zeros(template.nq, F32), jnp.zeros(template.nv, F32), target, context

    def observe(q, v, target, context):
        return jnp.concatenate([q - target, v, context])

    def cost(q, v, tau, target, context):
        return jnp.sum((q - target) ** 2) + 0.1 * jnp.sum(v**2) + 1e-8 * jnp.sum(tau**2)

    def computed_torque(q, v, target, context, kp, kd):
        zero = jnp.zeros_like(target)
        return jaxsoa.computed_torque(model_of(context), q, v, target, zero, zero, kp, kd)

    return Task("reconfigurable", 2 * template.nv + 3, act, 2000.0, init, model_of, observe, cost, computed_torque)


TASKS = {"space_arm": space_arm_task, "reconfigurable": reconfigurable_task}
