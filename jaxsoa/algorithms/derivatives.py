"""Derivatives of inverse and forward dynamics (Pinocchio's `computeRNEADerivatives` and
`computeABADerivatives`), by reverse-mode autodiff of `rnea` and `aba`.

The configuration derivative is taken in the tangent space, as Pinocchio does: ∂f/∂q means
∂f(q ⊕ δ)/∂δ at δ = 0, with q ⊕ δ = `integrate(model, q, δ)`, so every Jacobian is (nv, nv), also
for free-flyer and spherical joints (whose q has more coordinates than v). δ, v and a (or τ) are
differentiated together by one `jax.jacrev`: one primal pass and nv cotangent rows, vectorised.

Reverse mode rather than forward mode: the inputs (δ, v, a) are 3 nv, the output nv, so `jacrev` pulls
back nv rows where `jacfwd` pushes 3 nv columns. `jax.jit(jax.vmap(...))` at batch 256 on a 7-link
revolute chain, float64, on a shared 2-core CPU, best of 20 calls after compilation (two runs):
`rnea_derivatives` 6.1–6.2 ms with `jacrev` against 13–22 ms with `jacfwd`, `aba_derivatives`
9.7–11 ms against 34–62 ms (`aba`'s adjoint makes each row one solve and one RNEA VJP). Per sample
under `jax.jit` alone the two modes are within noise of each other (0.42 ms for RNEA, 0.56–0.64 ms for ABA).

Shapes: q (nq,), v / a / tau (nv,), f_ext (n, 6) link-frame wrenches (as `rnea` and `aba` take them,
held constant: a wrench fixed in the link frame) or None; each result (nv, nv) per sample, with a
leading batch axis through the entry point.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxsoa.algorithms.dynamics import aba, rnea
from jaxsoa.multibody.arguments import entry_point
from jaxsoa.multibody.config_space import integrate
from jaxsoa.multibody.model import Model


class RNEADerivatives(NamedTuple):
    """Partial derivatives of τ = RNEA(q, v, a, f_ext), each (nv, nv) (Pinocchio's `data.dtau_dq`,
    `data.dtau_dv`, `data.M`): dtau_dq in the tangent space of q, dtau_da = M(q) (armature included)."""
    dtau_dq: jax.Array
    dtau_dv: jax.Array
    dtau_da: jax.Array


class ABADerivatives(NamedTuple):
    """Partial derivatives of q̈ = ABA(q, v, τ, f_ext), each (nv, nv) (Pinocchio's `data.ddq_dq`,
    `data.ddq_dv`, `data.Minv`): ddq_dq in the tangent space of q, ddq_dtau = M(q)⁻¹."""
    ddq_dq: jax.Array
    ddq_dv: jax.Array
    ddq_dtau: jax.Array


def _tangent_jacobians(model: Model, fn, q, v, u):
    """(∂f/∂δ, ∂f/∂v, ∂f/∂u) of f = fn(q ⊕ δ, v, u) at δ = 0, by one `jax.jacrev`: three (nv, nv)."""
    delta = jnp.zeros(model.nv, v.dtype)
    return jax.jacrev(lambda d, x, y: fn(integrate(model, q, d), x, y), argnums=(0, 1, 2))(delta, v, u)


@entry_point(q='q', v='v', a='v', f_ext='f_ext')
def rnea_derivatives(model: Model, q, v, a, f_ext=None) -> RNEADerivatives:
    """∂τ/∂q (tangent), ∂τ/∂v and ∂τ/∂a = M of inverse dynamics τ = RNEA(q, v, a, f_ext) (Pinocchio's
    `computeRNEADerivatives`), each (nv, nv)."""
    # dτ = ∂τ/∂δ δ + ∂τ/∂v dv + M da,  τ(δ, v, a) = RNEA(q ⊕ δ, v, a, f_ext)
    return RNEADerivatives(*_tangent_jacobians(model, lambda x, y, z: rnea(model, x, y, z, f_ext), q, v, a))


@entry_point(q='q', v='v', tau='v', f_ext='f_ext')
def aba_derivatives(model: Model, q, v, tau, f_ext=None) -> ABADerivatives:
    """∂q̈/∂q (tangent), ∂q̈/∂v and ∂q̈/∂τ = M⁻¹ of forward dynamics q̈ = ABA(q, v, τ, f_ext) (Pinocchio's
    `computeABADerivatives`), each (nv, nv). Equal to −M⁻¹ ∂τ/∂q, −M⁻¹ ∂τ/∂v (RNEA's, at a = q̈) and M⁻¹."""
    # dq̈ = ∂q̈/∂δ δ + ∂q̈/∂v dv + M⁻¹ dτ,  q̈(δ, v, τ) = ABA(q ⊕ δ, v, τ, f_ext), each row one solve (`aba`'s adjoint)
    return ABADerivatives(*_tangent_jacobians(model, lambda x, y, z: aba(model, x, y, z, f_ext), q, v, tau))
