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
# # jaxsoa quick start
# Load a URDF, compare with Pinocchio, batch thousands of states, batch *different
# topologies* in one compiled call, and load an MJCF model through MuJoCo's compiler.

# %%
import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pinocchio as pin  # noqa: E402

import jaxsoa  # noqa: E402
from jaxsoa.io import example_robot_urdf  # noqa: E402

urdf = str(example_robot_urdf("panda"))          # example-robot-data's Franka Panda (pip install example-robot-data)
model = jaxsoa.load_urdf(urdf, dtype=jnp.float64)
print(model.nq, model.nv, model.joint_names)

# %% [markdown]
# ## Same answer as Pinocchio
# jaxsoa stores q and v in Pinocchio's order, so states move between the engines unchanged.

# %%
pin_model = pin.buildModelFromUrdf(urdf)
pin_data = pin_model.createData()
q = pin.randomConfiguration(pin_model)
v, tau = np.random.default_rng(0).normal(size=(2, model.nv))
qdd_pin = pin.aba(pin_model, pin_data, q, v, tau)
qdd = jaxsoa.aba(model, jnp.asarray(q), jnp.asarray(v), jnp.asarray(tau))
print("max |jaxsoa - pinocchio| =", np.abs(np.asarray(qdd) - qdd_pin).max())

# %% [markdown]
# ## A batch of states: `jit(vmap(...))`

# %%
batched_aba = jax.jit(jax.vmap(jaxsoa.aba, in_axes=(None, 0, 0, 0)))
keys = jax.random.split(jax.random.PRNGKey(0), 1024)
qs = jax.vmap(lambda k: jaxsoa.random_configuration(model, k))(keys)
vs = jnp.zeros((1024, model.nv))
qdd_batch = batched_aba(model, qs, vs, vs)
print(qdd_batch.shape)

# %% [markdown]
# ## A batch of topologies
# The parent array is data. Here three 4-link chains and trees share one compiled program.

# %%
def four_links(parent):
    n = len(parent)
    return jaxsoa.build_model(parent, [jaxsoa.JointType.REVOLUTE] * n, [[0, 0, 1.0]] * n, [np.eye(3)] * n,
                              [[0.5, 0, 0]] * n, [1.0] * n, [[0.25, 0, 0]] * n, [np.eye(3) * 0.01] * n,
                              dtype=jnp.float64)

models = [four_links(p) for p in ([-1, 0, 1, 2], [-1, 0, 0, 1], [1, -1, 1, 0])]
stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *models)
per_topology = jax.jit(jax.vmap(jaxsoa.crba, in_axes=(0, None)))
print(per_topology(stacked, jnp.zeros(4)).round(3))

# %% [markdown]
# ## An MJCF model, through MuJoCo's compiler
# `load_mjcf` takes a path, an XML string or a `mujoco.MjModel` (`pip install 'jaxsoa[mjcf]'`).
# q and v hold MuJoCo's joints in MuJoCo's order; `from_mujoco` converts the two conventions that
# differ (quaternions w-first in MuJoCo, free-joint linear velocity in the world frame).

# %%
import mujoco  # noqa: E402

from jaxsoa.io import acceleration_to_mujoco, from_mujoco  # noqa: E402

xml = """<mujoco>
  <worldbody>
    <body name="torso" pos="0 0 1">
      <freejoint/>
      <geom type="box" size="0.2 0.1 0.1"/>
      <body name="upper_arm" pos="0.2 0 0" euler="0 90 0">
        <joint name="shoulder" type="ball"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
        <body name="forearm" pos="0.4 0 0">
          <joint name="elbow" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""
mj_model = mujoco.MjModel.from_xml_string(xml)
mj_model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT   # jaxsoa models no contacts
mj_data = mujoco.MjData(mj_model)
mj_data.qvel[:] = np.random.default_rng(1).normal(size=mj_model.nv)
mujoco.mj_forward(mj_model, mj_data)

mjcf = jaxsoa.load_mjcf(xml, dtype=jnp.float64)
q, v = from_mujoco(mjcf, mj_data.qpos, mj_data.qvel)
qacc = acceleration_to_mujoco(mjcf, q, v, jaxsoa.aba(mjcf, q, v, jnp.zeros(mjcf.nv)))
print(mjcf.link_names, mjcf.joint_types)
print("max |jaxsoa - mujoco| qacc =", np.abs(np.asarray(qacc) - mj_data.qacc).max())
