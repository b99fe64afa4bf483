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
# # Variable topology and the path matrix
# The seed-000 dual-arm spacecraft (`sims/dual_arm_spacecraft.py`): a hub with two 3-link arms whose
# links can be re-docked. Each link lists, per interface, the ID of the link attached there
# (*configuration parameters*). From these, `jaxsoa.topology.configuration_parameters` derives the parent array, the
# incidence matrix S and the path matrix P; `jaxsoa.topology.reconfigure` turns them into a `Model`, and
# because the topology is data a batch of *different* configurations runs in one compiled call.

# %%
import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import jaxsoa  # noqa: E402
from jaxsoa.topology import reconfigure  # noqa: E402
from sims import dual_arm_spacecraft as dual  # noqa: E402

print(dual.describe())

# %% [markdown]
# ## Configuration parameters
# Row k lists the interfaces of link ID k + 1: the ID of the link mated there, 0 for a free end,
# 8 (= s + 1) for the virtual joint to inertial space (the root). Configuration 3 docks the tip of
# arm 1 to the tip of arm 2: one 6-link chain hanging from the hub.

# %%
for k in (1, 2, 3):
    print(f"configuration {k} ({dual.CONFIGURATION_NAMES[k]}):", dual.configuration(k).tolist())

# %% [markdown]
# ## Incidence S and path matrix P
# `topology_from_configuration` (host side, validating) returns the parent array, S (column k is
# joint k: +1 at its outboard link, −1 at its inboard link) and P (P[i, j] = 1 iff link i is on the
# path from link j to the root). With these signs S · P = E, the identity.

# %%
topologies = {k: jaxsoa.topology_from_configuration(dual.IDS, dual.configuration(k)) for k in (1, 2, 3)}
for k, top in topologies.items():
    SP = top.S @ top.P.astype(np.int32)
    print(f"configuration {k}: parent = {top.parent.tolist()}, S·P == E: {np.array_equal(SP, np.eye(7))}")

fig, axes = plt.subplots(1, 3, figsize=(10, 3.4))
for ax, (k, top) in zip(axes, topologies.items(), strict=True):
    ax.imshow(top.P, cmap="Greys", vmin=0, vmax=1)
    ax.set_title(f"P, configuration {k}")
    ax.set_xticks(range(7), dual.IDS)
    ax.set_yticks(range(7), dual.IDS)
    ax.set_xlabel("link ID j")
    ax.set_ylabel("link ID i (on j's path to the root)")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## The masked transfer operator φ = P_s ⊙ φ_o
# `transfer_operator_virtual` builds φ_o, the 6×6 force transforms between *every* pair of links;
# `transfer_operator` masks it with P (each entry of P widened to a 6×6 block). The operator-form
# inverse dynamics T = H φ (M α + b) and mass matrix 𝓜 = H φ M φᵀ Hᵀ are a second code path beside
# the O(n) recursions (`rnea`, `crba`): they agree to rounding.

# %%
model3 = dual.model(3)                       # validated float64 Model of configuration 3
key_q, key_v, key_a = jax.random.split(jax.random.PRNGKey(0), 3)
q = jax.random.uniform(key_q, (model3.nq,), jnp.float64, -1.0, 1.0)
v, a = jax.random.normal(key_v, (model3.nv,)), jax.random.normal(key_a, (model3.nv,))


@jax.jit
def both_paths(model, q, v, a):
    phi = jaxsoa.transfer_operator(model, q)
    return dict(phi=phi, phi_o=jaxsoa.transfer_operator_virtual(model, q),
                tau_operator=jaxsoa.inverse_dynamics_operator(model, q, v, a), tau_rnea=jaxsoa.rnea(model, q, v, a),
                M_operator=jaxsoa.mass_matrix_operator(model, q), M_crba=jaxsoa.crba(model, q))


out = both_paths(model3, q, v, a)
blocks = np.abs(np.asarray(out["phi"])).reshape(7, 6, 7, 6).max(axis=(1, 3)) > 0
print("nonzero 6x6 blocks of φ == P:", np.array_equal(blocks, topologies[3].P))
print("φ = φ_o where P = 1:", np.allclose(out["phi"], out["phi_o"] * np.kron(topologies[3].P, np.ones((6, 6)))))
print("max |T_operator − T_rnea| =", float(jnp.abs(out["tau_operator"] - out["tau_rnea"]).max()))
print("max |𝓜_operator − M_crba| =", float(jnp.abs(out["M_operator"] - out["M_crba"]).max()))

# %% [markdown]
# ## Three topologies, one compiled call
# `reconfigure.apply_configuration` rebuilds parents, placements and per-interface inertias from
# *traced* configuration parameters. vmapping it over the three configurations gives three
# different trees inside one program; a Python counter in the traced function shows it is traced
# (compiled) once.

# %%
design = dual.design()
arrays = reconfigure.design_arrays(design)
interfaces = jnp.asarray(np.stack([dual.configuration(k) for k in (1, 2, 3)]), jnp.int32)
ids = jnp.asarray(dual.IDS, jnp.int32)
traces = []


@jax.jit
@jax.vmap
def torques_per_configuration(interfaces_k):
    traces.append(1)                         # runs only while tracing
    model = reconfigure.apply_configuration(model3, arrays, interfaces_k, ids)
    traced = jaxsoa.topology_from_configuration_traced(interfaces_k, link_ids=ids)
    return jaxsoa.inverse_dynamics_operator(model, q, v, a), jaxsoa.rnea(model, q, v, a), traced.P


tau_op, tau_rnea, P_traced = torques_per_configuration(interfaces)
torques_per_configuration(interfaces + 0)    # a second call with new data: no new trace
print("traces:", len(traces))
print("traced P == host P:", all(np.array_equal(P_traced[i], topologies[k].P) for i, k in enumerate((1, 2, 3))))
print("max |T_operator − T_rnea| over the batch =", float(jnp.abs(tau_op - tau_rnea).max()))
print(np.asarray(tau_rnea).round(2))

# %% [markdown]
# The same joint accelerations need different torques in each configuration: the inertia seen by
# each joint depends on which links are outboard of it (row j of P lists those of link j).
