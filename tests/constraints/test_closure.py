"""Closed loops (docs/user_guide.md §6): loop-closure kinematics and constrained dynamics against independent
references — planar free-body (Newton–Euler) equations solved with numpy, a closed-form one-DOF
slider-crank, conservation of energy, time derivatives, and the second (dense KKT) code path.

Mechanisms live in the x-y plane, joints about z, gravity (0, −9.81, 0). Link frames have their
origin at the inboard joint and x along the link.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

import jaxsoa
from jaxsoa.constraints.closure import (
    check_closure,
    constraint_bias,
    constraint_error,
    constraint_jacobian,
    diagnose_closure,
    loop_closure,
    stack_closures,
)
from jaxsoa.constraints.dynamics import (
    forward_dynamics_constrained,
    inverse_dynamics_constrained,
    project_state,
)
from jaxsoa.integrators import rollout_constrained
from jaxsoa.multibody.joints import JointType
from tests.helpers.trees import counting, random_group, relative_error, stack_models

GRAVITY = np.array([0.0, -9.81])
EYE = np.eye(3)


def amax(x) -> float:
    """max |x| of a (device) array, on the host (eager jnp ops would each compile)."""
    return float(np.abs(np.asarray(x)).max())


def rod_inertia(mass, length):
    """Rotational inertia of a slender bar along x about its centre (valid: Ixx + Iyy = Izz)."""
    return np.diag([2e-3 * mass, mass * length**2 / 12, mass * length**2 / 12 + 2e-3 * mass])


def planar_model(parent, types, placements_x, masses, coms, lengths, dtype=jnp.float64):
    """Planar model: joints about z (prismatic along x), joint frames at (placements_x, 0, 0)."""
    n = len(parent)
    axes = [[1.0, 0, 0] if t == JointType.PRISMATIC else [0, 0, 1.0] for t in types]
    inertia = [rod_inertia(m, max(length, 0.1)) * (m > 0) for m, length in zip(masses, lengths, strict=True)]
    return jaxsoa.build_model(parent, types, axes, [EYE] * n, [[x, 0, 0] for x in placements_x], masses,
                              [[c[0], c[1], 0] for c in coms], inertia, gravity=(0, -9.81, 0), dtype=dtype)


# ---------------------------------------------------------------------------------------------
# four-bar: crank (link 0, at the world origin) -> coupler (1) -> rocker (2), cut at the rocker's
# tip against the world point (GROUND, 0).

LENGTHS = np.array([0.4, 1.0, 0.8])
GROUND = 1.0
MASSES = np.array([1.0, 2.0, 1.5])
COMS = np.array([[0.2, 0.03], [0.5, -0.02], [0.4, 0.05]])


def four_bar(dtype=jnp.float64, lengths=LENGTHS, ground=GROUND, cut="revolute", planar=True):
    model = planar_model([-1, 0, 1], [JointType.REVOLUTE] * 3, [0.0, lengths[0], lengths[1]], MASSES, COMS,
                         lengths, dtype)
    closure = loop_closure(-1, 2, (EYE, [ground, 0, 0]), (EYE, [lengths[2], 0, 0]), cut, planar=planar,
                           model=model)
    return model, closure


def unit(phi):
    return np.array([np.cos(phi), np.sin(phi)])


def perp(x):
    return np.array([-x[1], x[0]])


def four_bar_state(theta, crank_rate, lengths=LENGTHS, ground=GROUND, elbow=1.0):
    """Closed-form position and velocity analysis: absolute angles φ (3,) and rates ω (3,)."""
    B, D = lengths[0] * unit(theta), np.array([ground, 0.0])
    d = D - B
    dist = np.linalg.norm(d)
    x = (lengths[1] ** 2 - lengths[2] ** 2 + dist**2) / (2 * dist)
    C = B + x * d / dist + elbow * np.sqrt(max(lengths[1] ** 2 - x**2, 0.0)) * perp(d) / dist
    phi = np.array([theta, np.arctan2(*(C - B)[::-1]), np.arctan2(*(D - C)[::-1])])
    # Σ L_i ω_i u⊥(φ_i) = 0 with ω_0 given
    A = np.stack([lengths[i] * perp(unit(phi[i])) for i in (1, 2)], axis=1)
    w12 = np.linalg.solve(A, -lengths[0] * crank_rate * perp(unit(theta)))
    return phi, np.array([crank_rate, *w12])


def to_joint(phi, omega):
    """Absolute angles/rates -> jaxsoa relative joint coordinates (q, v)."""
    return np.diff(phi, prepend=0.0, axis=-1), np.diff(omega, prepend=0.0, axis=-1)


def four_bar_free_body(phi, omega, tau):
    """Independent Newton–Euler of the three bars, planar, numpy: unknowns φ̈ (3) and the joint
    forces F_0..F_3 (F_j acts on bar j at its inboard joint P_j, from bar j−1 or the ground;
    F_3 acts on bar 2 at the cut, from the ground), 9 body equations + 2 loop-closure rows.
    tau: relative joint torques (3,). Returns φ̈ (3,) and F_3 (world axes)."""
    A, rhs = np.zeros((11, 11)), np.zeros(11)
    P = [np.zeros(2)]
    for i in range(3):
        P.append(P[-1] + LENGTHS[i] * unit(phi[i]))
    acc_P = [np.zeros((2, 11)), ]                      # a_P = (linear in x) + known part
    acc_P_known = [np.zeros(2)]
    for i in range(3):
        lin = acc_P[-1].copy()
        lin[:, i] += LENGTHS[i] * perp(unit(phi[i]))
        acc_P.append(lin)
        acc_P_known.append(acc_P_known[-1] - omega[i] ** 2 * LENGTHS[i] * unit(phi[i]))
    for i in range(3):
        rot = np.array([[np.cos(phi[i]), -np.sin(phi[i])], [np.sin(phi[i]), np.cos(phi[i])]])
        r = rot @ COMS[i]
        c = P[i] + r
        a_lin = acc_P[i].copy()
        a_lin[:, i] += perp(r)
        a_known = acc_P_known[i] - omega[i] ** 2 * r
        rows = slice(3 * i, 3 * i + 2)
        A[rows] = MASSES[i] * a_lin                         # m a_c − F_in ∓ F_out = m g
        rhs[rows] = MASSES[i] * (GRAVITY - a_known)
        A[rows, 3 + 2 * i: 5 + 2 * i] -= np.eye(2)
        sign_out = 1.0 if i == 2 else -1.0
        A[rows, 5 + 2 * i: 7 + 2 * i] -= sign_out * np.eye(2)
        izz = rod_inertia(MASSES[i], LENGTHS[i])[2, 2]     # I φ̈ − (P_i − c) × F_in ∓ (P_i+1 − c) × F_out = τ_i − τ_i+1
        A[3 * i + 2, i] = izz
        A[3 * i + 2, 3 + 2 * i: 5 + 2 * i] = -np.array([-(P[i] - c)[1], (P[i] - c)[0]])
        A[3 * i + 2, 5 + 2 * i: 7 + 2 * i] = -sign_out * np.array([-(P[i + 1] - c)[1], (P[i + 1] - c)[0]])
        rhs[3 * i + 2] = tau[i] - (tau[i + 1] if i < 2 else 0.0)
    A[9:11] = acc_P[3]                                      # the cut point does not accelerate
    rhs[9:11] = -acc_P_known[3]
    x = np.linalg.solve(A, rhs)
    return x[:3], x[9:11]


@pytest.fixture(scope="module")
def fb():
    model, closure = four_bar()
    def make(method):          # one compilation per method; Baumgarte gains and f_ext are traced
        batched = jax.jit(jax.vmap(lambda q, v, tau, f_ext, alpha, beta: forward_dynamics_constrained(
            model, q, v, tau, closure, f_ext, baumgarte=(alpha, beta), method=method), (0, 0, 0, None, None, None)))
        return lambda q, v, tau, f_ext=None, gains=(0.0, 0.0): batched(
            q, v, tau, jnp.zeros((3, 6)) if f_ext is None else f_ext, *gains)

    fd, fd_dense = make("recursive"), make("dense")
    rng = np.random.default_rng(0)
    states = [four_bar_state(th, w) for th, w in zip(rng.uniform(-np.pi, np.pi, 6), rng.normal(0, 3, 6), strict=True)]
    phi, omega = np.array([s[0] for s in states]), np.array([s[1] for s in states])
    q, v = to_joint(phi, omega)
    tau = rng.normal(0, 2, (6, 3))
    return dict(model=model, closure=closure, fd=fd, fd_dense=fd_dense, phi=phi, omega=omega, q=q, v=v, tau=tau)


def test_four_bar_matches_free_body_equations(fb):
    """(1c) q̈ and the cut-joint reaction equal the independent Newton–Euler solution."""
    qdd, lam = fb["fd"](fb["q"], fb["v"], fb["tau"])
    for k in range(len(fb["q"])):
        phi_dd, F_cut = four_bar_free_body(fb["phi"][k], fb["omega"][k], fb["tau"][k])
        rot = np.array([[np.cos(fb["phi"][k][2]), -np.sin(fb["phi"][k][2])],
                        [np.sin(fb["phi"][k][2]), np.cos(fb["phi"][k][2])]])
        # λ rows (linear x, y) in the cut frame on the rocker; accelerations ~10-100, forces ~10-100:
        # two well-conditioned (cond < 1e3) float64 solves agree to ~1e-13 relative; 1e-10 allows margin.
        assert relative_error(np.cumsum(qdd[k]), phi_dd) < 1e-10
        assert relative_error(rot @ np.asarray(lam[k][3:5]), F_cut) < 1e-10
        assert np.all(np.asarray(lam[k])[[0, 1, 2, 5]] == 0)     # unused rows carry nothing


def test_four_bar_recursive_matches_dense(fb):
    """(1d) ABA/Delassus path vs CRBA/KKT path, also off the manifold with Baumgarte and f_ext."""
    q_off = fb["q"] + 0.01                                  # 1e-2 off the constraint manifold
    f_ext = jnp.asarray(np.random.default_rng(1).normal(size=(3, 6)))
    off = (q_off, fb["v"], fb["tau"], f_ext, (5.0, 7.0))
    for a, b in ((fb["fd"](fb["q"], fb["v"], fb["tau"]), fb["fd_dense"](fb["q"], fb["v"], fb["tau"])),
                 (fb["fd"](*off), fb["fd_dense"](*off))):
        # two float64 factorisations of systems with cond ~1e3: agree to ~1e-13; tolerance 1e-10
        assert relative_error(a[0], b[0]) < 1e-10
        assert relative_error(a[1], b[1]) < 1e-10


@pytest.fixture(scope="module")
def four_bar_runs(fb):
    """10 s RK4 runs (dt = 1 ms) from a closed state, without and with Baumgarte (α = β = 20),
    one compiled rollout (the gains are traced)."""
    model, closure = fb["model"], fb["closure"]
    zero = jnp.zeros(3)

    @jax.jit
    def run(q, v, alpha, beta):
        qs, vs = rollout_constrained(model, q, v, lambda t, q, v: zero, closure, 1e-3, 10_000,
                                     baumgarte=(alpha, beta), impact=False)
        energy = jax.vmap(lambda q, v: 0.5 * v @ jaxsoa.crba(model, q) @ v
                          + 9.81 * float(MASSES.sum()) * jaxsoa.center_of_mass(model, q)[1])(qs, vs)
        drift = jnp.max(jnp.abs(jax.vmap(lambda q: constraint_error(model, q, closure))(qs)))
        return jnp.max(jnp.abs(energy - energy[0])) / jnp.max(jnp.abs(energy)), drift

    q, v = fb["q"][0], fb["v"][0]
    return dict(free=run(q, v, 0.0, 0.0), stabilised=run(q, v, 20.0, 20.0))


def test_four_bar_energy_and_drift(four_bar_runs):
    """(1a, 1b) Energy is conserved and the constraint drift stays bounded over 10 s."""
    e_free, drift = (float(x) for x in four_bar_runs["free"])
    e_stab, drift_s = (float(x) for x in four_bar_runs["stabilised"])
    print(f"four-bar 10 s, dt 1 ms: energy drift {e_free:.2e} (free) {e_stab:.2e} (Baumgarte); "
          f"constraint drift {float(drift):.2e} (free) {float(drift_s):.2e} (Baumgarte)")
    # measured 6.1e-8 / 3.3e-9: without stabilisation the loop drifts off the manifold, where the
    # constraint force does work (λᵀ G q̇ ≠ 0), so energy drifts with it; bounds with ~10x margin
    assert e_free < 1e-6
    assert e_stab < 3e-8
    # measured 6.5e-8 free; Baumgarte (α = β = 20 s⁻¹) holds it at the truncation level (3.9e-10)
    assert float(drift) < 1e-6
    assert float(drift_s) < 1e-8


def _closed_cut(model, q, link_a, link_b, X_a_cut, cut_type, R_offset=EYE, **kwargs):
    """A cut whose frames coincide at q (up to a rotation R_offset about the cut's free axes):
    X_b_cut = X_world_b⁻¹ X_world_a X_a_cut R_offset, from numpy forward kinematics."""
    R_w, p_w = (np.asarray(x) for x in jax.jit(jaxsoa.forward_kinematics)(model, q))
    R_wa, p_wa = (EYE, np.zeros(3)) if link_a < 0 else (R_w[link_a], p_w[link_a])
    R_cut, p_cut = R_wa @ X_a_cut[0], p_wa + R_wa @ X_a_cut[1]
    X_b_cut = (R_w[link_b].T @ R_cut @ R_offset, R_w[link_b].T @ (p_cut - p_w[link_b]))
    return loop_closure(link_a, link_b, X_a_cut, X_b_cut, cut_type, model=model, **kwargs)


def test_closure_kinematics_derivatives():
    """On the closed manifold ė = G_c v for weld, spherical and revolute cuts (the revolute at a
    non-zero joint angle), and Ġ_c v is the time derivative of G_c v along q̇ = v (forward-mode
    derivatives of the error and of G_c: a second code path for the Jacobian and the bias)."""
    from scipy.spatial.transform import Rotation

    from tests.helpers.random_models import random_rotation
    from tests.helpers.trees import build_jaxsoa, random_tree

    rng = np.random.default_rng(3)
    model = build_jaxsoa(random_tree(rng, 6))
    q = jax.jit(jaxsoa.random_configuration)(model, jax.random.PRNGKey(0))
    v = jnp.asarray(rng.normal(size=model.nv))
    X = (np.asarray(jax.jit(jaxsoa.forward_kinematics)(model, q)[0][2]), np.array([0.1, -0.2, 0.3]))
    axis = np.array([0.0, 0.6, 0.8])
    about_axis = Rotation.from_rotvec(0.9 * axis).as_matrix()         # revolute joint angle 0.9 at q
    closure = stack_closures(_closed_cut(model, q, 5, 1, (EYE, np.array([0.2, 0, 0])), "weld"),
                             _closed_cut(model, q, -1, 3, X, "spherical", R_offset=random_rotation(rng)),
                             _closed_cut(model, q, 2, 4, (EYE, np.zeros(3)), "revolute", R_offset=about_axis,
                                         axis=axis))

    @jax.jit
    def terms(q, v):
        e_dot = jax.jvp(lambda t: constraint_error(model, jaxsoa.integrate(model, q, t * v), closure),
                        (jnp.zeros(()),), (jnp.ones(()),))[1]
        G_dot_v = jax.jvp(lambda t: constraint_jacobian(model, jaxsoa.integrate(model, q, t * v), closure) @ v,
                          (jnp.zeros(()),), (jnp.ones(()),))[1]
        return (constraint_error(model, q, closure), e_dot, constraint_jacobian(model, q, closure) @ v, G_dot_v,
                constraint_bias(model, q, v, closure))

    e, e_dot, Gv, G_dot_v, bias = terms(q, v)
    # float64 kinematics of O(1) quantities: round-off ~1e-15; tolerances 1e-12 / 1e-10
    assert amax(e) < 1e-12
    assert relative_error(e_dot, Gv) < 1e-10
    assert relative_error(bias, G_dot_v) < 1e-10
    assert amax(Gv) > 0.1                    # non-trivial rows


# ---------------------------------------------------------------------------------------------
# slider-crank: ground (0, fixed) -> crank (1, revolute) -> coupler (2, revolute); slider (3,
# prismatic along x on the ground); cut between the coupler's tip and the slider's origin.

R_CRANK, L_COUPLER = 0.3, 0.9
SC_MASSES = np.array([0.0, 1.2, 2.0, 1.5])
SC_COMS = np.array([[0.0, 0.0], [0.15, 0.02], [0.45, -0.03], [0.05, 0.01]])


def slider_crank():
    model = planar_model([-1, 0, 1, 0], [JointType.FIXED, JointType.REVOLUTE, JointType.REVOLUTE, JointType.PRISMATIC],
                         [0.0, 0.0, R_CRANK, 0.0], SC_MASSES, SC_COMS, [0.1, R_CRANK, L_COUPLER, 0.1])
    closure = loop_closure(2, 3, (EYE, [L_COUPLER, 0, 0]), (EYE, [0, 0, 0]), "revolute", planar=True, model=model)
    return model, closure


def slider_crank_reference(theta, theta_dot, tau):
    """Closed-form one-DOF model in the crank angle θ: m(θ) θ̈ + h(θ) θ̇² + V'(θ) = Q, with
    m = Σ m_i |J_i|² + I_i φ_i'², h = Σ m_i J_i·J_i' + I_i φ_i' φ_i'' (J_i = ∂c_i/∂θ) and the
    generalised force Q = τ_crank + τ_coupler (ψ' − 1) + F_slider x'. Returns (q, v, q̈) in jaxsoa's
    layout (θ, ψ − θ, x)."""
    def rot(a):
        return np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])

    s, s1, s2 = -R_CRANK / L_COUPLER * np.array([np.sin(theta), np.cos(theta), -np.sin(theta)])
    psi = np.arcsin(s)
    c = np.cos(psi)
    psi1 = s1 / c
    psi2 = (s2 * c + s1 * s * psi1) / c**2
    x = R_CRANK * np.cos(theta) + L_COUPLER * c
    x1 = -R_CRANK * np.sin(theta) - L_COUPLER * s * psi1
    x2 = -R_CRANK * np.cos(theta) - L_COUPLER * c * psi1**2 - L_COUPLER * s * psi2
    r1, r2 = rot(theta) @ SC_COMS[1], rot(psi) @ SC_COMS[2]
    J = [perp(r1), R_CRANK * perp(unit(theta)) + psi1 * perp(r2), np.array([x1, 0.0])]
    J_prime = [-r1, -R_CRANK * unit(theta) + psi2 * perp(r2) - psi1**2 * r2, np.array([x2, 0.0])]
    dphi, ddphi = [1.0, psi1, 0.0], [0.0, psi2, 0.0]
    inertia = [rod_inertia(SC_MASSES[i], length)[2, 2] for i, length in ((1, R_CRANK), (2, L_COUPLER), (3, 0.1))]
    m = sum(SC_MASSES[i + 1] * J[i] @ J[i] + inertia[i] * dphi[i] ** 2 for i in range(3))
    h = sum(SC_MASSES[i + 1] * J[i] @ J_prime[i] + inertia[i] * dphi[i] * ddphi[i] for i in range(3))
    dV = -sum(SC_MASSES[i + 1] * GRAVITY @ J[i] for i in range(3))
    Q = tau[0] + tau[1] * (psi1 - 1) + tau[2] * x1
    theta_dd = (Q - h * theta_dot**2 - dV) / m
    q = np.array([theta, psi - theta, x])
    v = theta_dot * np.array([1.0, psi1 - 1, x1])
    qdd = np.array([theta_dd, psi2 * theta_dot**2 + psi1 * theta_dd - theta_dd, x2 * theta_dot**2 + x1 * theta_dd])
    return q, v, qdd


def test_slider_crank_matches_one_dof_model():
    """(2) Constrained accelerations (both methods) equal the closed-form reduced model."""
    model, closure = slider_crank()
    rng = np.random.default_rng(4)
    cases = [slider_crank_reference(th, w, t) for th, w, t in
             zip(rng.uniform(-np.pi, np.pi, 5), rng.normal(0, 4, 5), rng.normal(0, 3, (5, 3)), strict=True)]
    q, v, qdd_ref = (np.array([c[i] for c in cases]) for i in range(3))
    tau = rng.normal(0, 3, (5, 3))
    cases = [slider_crank_reference(th, w, t) for th, w, t in zip(q[:, 0], v[:, 0], tau, strict=True)]
    qdd_ref = np.array([c[2] for c in cases])
    for method in ("dense", "recursive"):
        fd = jax.jit(jax.vmap(lambda q, v, t, method=method: forward_dynamics_constrained(
            model, q, v, t, closure, method=method)))
        # closed forms evaluated in float64, accelerations ~10-100: agreement ~1e-13; tolerance 1e-9
        assert relative_error(fd(q, v, tau)[0], qdd_ref) < 1e-9
    # (6) inverse dynamics with the crank actuated, coupler and slider passive: round trip
    actuated = jnp.asarray([True, False, False])
    tau_a = tau * np.array([1.0, 0.0, 0.0])
    inv = jax.jit(jax.vmap(lambda q, v, a: inverse_dynamics_constrained(model, q, v, a, closure, actuated)))
    qdd, lam = fd(q, v, tau_a)
    tau_back, lam_back, rank = inv(q, v, qdd)
    # unique solution (rank nv = 3): a float64 round trip, tolerance 1e-9 on torques/forces ~1-100
    assert np.all(np.asarray(rank) == 3)
    assert relative_error(tau_back, tau_a) < 1e-9
    assert relative_error(lam_back, lam) < 1e-9


def test_four_bar_inverse_dynamics_round_trip(fb):
    """(6) Crank actuated, coupler and rocker passive: inverse dynamics recovers τ and λ."""
    model, closure = fb["model"], fb["closure"]
    tau = fb["tau"] * np.array([1.0, 0.0, 0.0])
    qdd, lam = fb["fd"](fb["q"], fb["v"], tau)
    inv = jax.jit(jax.vmap(lambda q, v, a: inverse_dynamics_constrained(
        model, q, v, a, closure, jnp.asarray([True, False, False]))))
    tau_back, lam_back, _ = inv(fb["q"], fb["v"], qdd)
    # float64 round trip through a well-conditioned 3x3 solve: tolerance 1e-9
    assert relative_error(tau_back, tau) < 1e-9
    assert relative_error(lam_back, lam) < 1e-9


def test_redundant_and_inconsistent_closures(fb):
    """(4) Redundant rows: the planar loop closed with a spatial revolute cut (3 rows always zero)
    and the same cut twice; minimum-norm λ, the same q̈; diagnose_closure reports the rank drop;
    an inconsistent (open) closure is caught by the checkify check."""
    model, closure = fb["model"], fb["closure"]
    q, v, tau = fb["q"][0], fb["v"][0], fb["tau"][0]
    qdd, lam = fb["fd"](fb["q"], fb["v"], fb["tau"])
    _, spatial = four_bar(planar=False)
    double = stack_closures(closure, closure)
    for cl in (spatial, double):
        qdd_r, lam_r = jax.jit(lambda q, v, t, cl=cl: forward_dynamics_constrained(model, q, v, t, cl))(q, v, tau)
        assert np.all(np.isfinite(np.asarray(lam_r)))
        # same unique q̈: tolerance 1e-10 as for the two methods
        assert relative_error(qdd_r, qdd[0]) < 1e-10
    # the doubled cut splits the reaction evenly (minimum norm): λ₁ = λ₂ = λ/2
    assert relative_error(lam_r[:6], lam[0] / 2) < 1e-10 and relative_error(lam_r[6:], lam[0] / 2) < 1e-10
    info = diagnose_closure(model, q, spatial)
    assert (info.rank, info.n_rows, info.redundant_rows) == (2, 5, [0, 1, 5])
    info = diagnose_closure(model, q, double)
    assert (info.rank, info.n_rows, info.redundant_rows) == (2, 4, [9, 10])
    checked = jax.jit(checkify.checkify(lambda q: check_closure(model, q, closure, tol=1e-6)))
    err, _ = checked(q)
    err.throw()                                              # closed: passes
    err, _ = checked(q + jnp.asarray([0.0, 0.0, 0.05]))       # rocker turned 0.05 rad: cut opens 4 cm
    with pytest.raises(checkify.JaxRuntimeError, match="loop-closure error"):
        err.throw()


# ---------------------------------------------------------------------------------------------
# singular poses, batches of topologies, grasp / release

def parallelogram_chain():
    """Two parallelograms in a row on a fixed ground (link 0): crank 1 -> coupler 2, link 3 is the
    rocker of the first loop and the crank of the second -> coupler 4, rocker 5. Cranks 0.5 m,
    couplers = ground spacing 1 m, so every pose θ has all cranks at θ and couplers level; at
    θ = 0 (and π) everything is collinear and each cut loses its x row."""
    a, d = 0.5, 1.0
    model = planar_model([-1, 0, 1, 0, 3, 0], [JointType.FIXED] + [JointType.REVOLUTE] * 5,
                         [0.0, 0.0, a, d, a, 2 * d], [0.0, 1.0, 2.0, 1.0, 2.0, 1.0],
                         [[0, 0], [a / 2, 0.02], [d / 2, 0.0], [a / 2, 0.0], [d / 2, -0.02], [a / 2, 0.0]],
                         [0.1, a, d, a, d, a])
    closure = stack_closures(*(loop_closure(i, j, (EYE, [d, 0, 0]), (EYE, [a, 0, 0]), "revolute", planar=True,
                                            model=model) for i, j in ((2, 3), (4, 5))))
    return model, closure


def test_parallelogram_chain_through_singular_pose():
    """(3) Two parallelogram four-bars driven through the flat (singular) pose θ = 0.

    At θ = 0, G_c loses the two x rows (rank 2 of 4) and the x rows of −Ġ_c q̇ (centripetal terms)
    cannot be met: the pseudo-inverse keeps the satisfiable rows, λ is minimum-norm (the dropped
    x multipliers are zero) and q̈ is the least-squares constraint acceleration — finite, no NaN.
    Near the pose λ_x grows like 1/θ but stays finite; a Baumgarte-stabilised RK4 run crossing the
    pose stays on the parallelogram branch with a small constraint error."""
    model, closure = parallelogram_chain()
    flat = jnp.zeros(5)
    v = jnp.asarray([-3.0, 3.0, -3.0, 3.0, -3.0])                 # parallelogram motion, θ̇ = −3 rad/s
    info = diagnose_closure(model, flat, closure)
    assert (info.rank, info.n_rows, info.redundant_rows) == (2, 4, [3, 9])
    assert diagnose_closure(model, jnp.asarray([0.3, -0.3, 0.3, -0.3, 0.3]), closure).rank == 4
    qdd, lam = jax.jit(lambda q, v: forward_dynamics_constrained(model, q, v, jnp.zeros(5), closure))(flat, v)
    assert np.all(np.isfinite(np.asarray(qdd))) and np.all(np.isfinite(np.asarray(lam)))
    assert amax(np.asarray(lam)[[3, 9]]) == 0.0   # dropped rows: zero multipliers

    theta0 = 0.3
    q0 = jnp.asarray([theta0, -theta0, theta0, -theta0, theta0])
    run = jax.jit(lambda q, v: rollout_constrained(model, q, v, lambda t, q, v: jnp.zeros(5), closure, 2e-3, 400,
                                                   baumgarte=(20.0, 20.0), impact=False))
    qs, vs = (np.asarray(x) for x in run(q0, v))
    errors = jax.jit(jax.vmap(lambda q: constraint_error(model, q, closure)))(qs)
    print(f"parallelogram chain through θ = 0: max |e| {amax(errors):.1e}, "
          f"max |coupler angle| {amax(qs[:, 0] + qs[:, 1]):.1e}")
    crank = np.asarray(qs[:, 0])
    assert crank.min() < 0 < crank.max()                          # crossed θ = 0
    assert np.all(np.isfinite(np.asarray(qs))) and np.all(np.isfinite(np.asarray(vs)))
    # measured max |e| 1.8e-13 m: the run steps over θ = 0 (never lands on it), and next to it the
    # y rows and Baumgarte keep the loop closed; 1e-9 m asserts "still closed" with margin
    assert amax(errors) < 1e-9
    # parallelogram branch kept: couplers level (absolute angle q1 + q2 ≈ 0); measured 1.3e-11 rad
    assert amax(qs[:, 0] + qs[:, 1]) < 1e-8


def test_batch_of_loop_topologies_compiles_once():
    """(5) Different trees (traced topologies, one joint-type sequence) with one random cut each
    (different link pairs and cut types): one trace for the vmapped batch; every member satisfies
    M q̈ + C = τ + G_cᵀ λ (checked with RNEA) and the constraint rows in the least-squares sense,
    Gᵀ (G q̈ + Ġ q̇) = 0 (an over-constrained cut cannot meet every row)."""
    rng = np.random.default_rng(5)
    group = random_group(rng, 6, 4, joint_types=(JointType.REVOLUTE, JointType.SPHERICAL))
    models = [m for _, m, _ in group]
    q = jnp.stack([jax.jit(jaxsoa.random_configuration)(m, jax.random.PRNGKey(i)) for i, m in enumerate(models)])
    closures = []
    for i, m in enumerate(models):
        a, b = rng.choice(np.arange(-1, 6), size=2, replace=False)
        cut_type = ("weld", "spherical", "revolute", "spherical")[i]
        closures.append(_closed_cut(m, q[i], int(a), int(b), (EYE, rng.normal(0, 0.2, 3)), cut_type))
    model, closure = stack_models(models), stack_closures(*closures)
    closure = jax.tree_util.tree_map(lambda x: x.reshape(4, 1, *x.shape[1:]), closure)   # (batch, n_cuts=1, ...)
    v = jnp.asarray(rng.normal(size=(4, model.nv)))
    tau = jnp.asarray(rng.normal(size=(4, model.nv)))

    def check(model, closure, q, v, tau):
        qdd, lam = forward_dynamics_constrained(model, q, v, tau, closure)
        G = constraint_jacobian(model, q, closure)
        residual = jaxsoa.rnea(model, q, v, qdd) - tau - G.T @ lam
        return residual, G.T @ (G @ qdd + constraint_bias(model, q, v, closure)), qdd

    counted, count = counting(check)
    batched = jax.jit(jax.vmap(counted))
    residual, rows, qdd = batched(model, closure, q, v, tau)
    residual2, _, _ = batched(model, closure._replace(active=~closure.active), q, v, tau)
    assert count[0] == 1
    scale = amax(qdd)
    # float64, accelerations ~10-1e3: equation residuals ~1e-13 · scale; tolerance 1e-9 · scale
    assert amax(residual) < 1e-9 * scale
    assert amax(rows) < 1e-9 * scale
    assert amax(residual2) < 1e-9 * scale      # inactive cuts: the plain tree


def grasp_model():
    """Ground (0, fixed), a two-link arm (1, 2) at the origin and a pendulum "object" (3) hung at
    x = 0.9 m; a planar pin between the arm's tip and a point on the object grasps it."""
    return planar_model([-1, 0, 1, 0], [JointType.FIXED] + [JointType.REVOLUTE] * 3, [0.0, 0.0, 0.6, 0.9],
                        [0.0, 1.0, 0.8, 1.5], [[0, 0], [0.3, 0.0], [0.25, 0.01], [0.25, 0.0]],
                        [0.1, 0.6, 0.5, 0.5])


def test_grasp_release_rollout_compiles_once():
    """(5) One compiled constrained rollout runs a free motion and a grasp at t1 / release at t2
    (the cut's frames and the per-step `active` schedule are data). While grasped, the pin holds
    (plastic impact at t1, then Baumgarte); after t2 the motion equals the plain tree's RK4."""
    model = grasp_model()
    dt, n_steps, k1, k2 = 2e-3, 600, 200, 400
    q0, v0 = jnp.asarray([-1.2, 0.6, -2.0]), jnp.asarray([0.5, 0.0, -1.0])
    zero = jnp.zeros(3)

    def run(closure, active):
        return rollout_constrained(model, q0, v0, lambda t, q, v: zero, closure, dt, n_steps, active=active,
                                   baumgarte=(20.0, 20.0))

    counted, count = counting(run)
    run = jax.jit(counted)
    placeholder = loop_closure(2, 3, (EYE, [0.5, 0, 0]), (EYE, [0.3, 0, 0]), "revolute", planar=True, model=model)
    qs_free, _ = run(placeholder, jnp.zeros((n_steps, 1), bool))
    grasp = _closed_cut(model, qs_free[k1], 2, 3, (EYE, np.array([0.5, 0, 0])), "revolute", planar=True)
    schedule = jnp.zeros((n_steps, 1), bool).at[k1:k2].set(True)
    qs, vs = (np.asarray(x) for x in run(grasp, schedule))
    qs_free = np.asarray(qs_free)
    assert count[0] == 1
    # before t1 the runs are the same program on the same data: identical
    assert amax(qs[: k1 + 1] - qs_free[: k1 + 1]) == 0.0
    errors = jax.jit(jax.vmap(lambda q: constraint_error(model, q, grasp)))(qs[k1 + 1: k2 + 1])
    rates = jax.jit(jax.vmap(lambda q, v: constraint_jacobian(model, q, grasp) @ v))(qs[k1 + 1: k2 + 1],
                                                                                    vs[k1 + 1: k2 + 1])
    print(f"grasp: max |e| {amax(errors):.1e}, max |G q̇| {amax(rates):.1e}")
    # measured max |e| 7.3e-10 m and |G q̇| 2.3e-8 m/s while grasped (Baumgarte, dt = 2 ms): bounds
    # 1e-7 / 1e-6 (the impact at t1 zeroes G q̇; what remains is RK4 truncation)
    assert amax(errors) < 1e-7
    assert amax(rates) < 1e-6
    assert amax(qs[k2] - qs_free[k2]) > 0.1   # the grasp changed the motion
    q_tree, _ = jax.jit(lambda q, v: jaxsoa.rollout(model, q, v, lambda t, q, v: zero, dt, n_steps - k2))(qs[k2],
                                                                                                      vs[k2])
    # released: the same RK4 with λ = 0 (pinv of a zero Delassus matrix); round-off only, 1e-12
    assert amax(qs[k2:] - q_tree) < 1e-12


def test_float32_error(fb):
    """float32 constrained dynamics vs float64 on the four-bar (measured; see the report)."""
    model32, closure32 = four_bar(dtype=jnp.float32)
    fd32 = jax.jit(jax.vmap(lambda q, v, t: forward_dynamics_constrained(model32, q, v, t, closure32)))
    qdd32, lam32 = fd32(*(jnp.asarray(fb[k], jnp.float32) for k in ("q", "v", "tau")))
    qdd, lam = fb["fd"](fb["q"], fb["v"], fb["tau"])
    err_qdd = relative_error(np.asarray(qdd32, np.float64), qdd)
    err_lam = relative_error(np.asarray(lam32, np.float64), lam)
    print(f"four-bar float32 vs float64: q̈ {err_qdd:.1e}, λ {err_lam:.1e} (relative)")
    # measured 1.8e-7 (q̈) and 2.8e-7 (λ): a few eps32 (1.2e-7) — the loop is well conditioned
    # away from singular poses; 1e-5 leaves room for other platforms' float32 summation order
    assert err_qdd < 1e-5 and err_lam < 1e-5


def test_project_state(fb):
    """Gauss–Newton position projection closes a loop opened by 1e-2 rad per joint; the velocity
    projection is the plastic impact: G v⁺ = 0 and v⁺ minimises the kinetic-energy distance, i.e.
    equals the numpy KKT solution of min ½ (v⁺ − v)ᵀ M (v⁺ − v) s.t. G v⁺ = 0."""
    model, closure = fb["model"], fb["closure"]
    q_off, v = fb["q"][1] + 0.01, fb["v"][1] + 0.5
    @jax.jit
    def project(q, v):
        q_p, v_p = project_state(model, q, v, closure, iterations=4)
        return q_p, v_p, constraint_jacobian(model, q_p, closure), jaxsoa.crba(model, q_p), \
            constraint_error(model, q_p, closure)

    _, v_p, G, M, e = project(q_off, v)
    G, M = np.asarray(G)[3:5], np.asarray(M)
    kkt = np.block([[M, G.T], [G, np.zeros((2, 2))]])
    v_ref = np.linalg.solve(kkt, np.concatenate([M @ np.asarray(v), np.zeros(2)]))[:3]
    # Gauss–Newton converges quadratically: 1e-2 -> 1e-4 -> 1e-8 -> 1e-16; tolerance 1e-12 m
    assert amax(e) < 1e-12
    # two float64 solves of a 5x5 system: tolerance 1e-10
    assert relative_error(v_p, v_ref) < 1e-10


def test_loop_closure_validation():
    """Bad host input raises ValueError naming the cut and the field."""
    model = four_bar()[0]
    good = (EYE, [0.0, 0, 0])
    cases = [(dict(cut_type="hinge"), "cut_type"), (dict(link_b=3), "link_b"), (dict(link_a=2), "link_a"),
             (dict(X_b_cut=(2 * EYE, [0.0, 0, 0])), "X_b_cut"), (dict(axis=(0, 0, 2.0)), "axis"),
             (dict(cut_type="spherical", planar=True), "planar")]
    for change, field in cases:
        kwargs = dict(link_a=-1, link_b=2, X_a_cut=good, X_b_cut=good, cut_type="revolute") | change
        with pytest.raises(ValueError, match=f"grip.*'?{field}"):
            loop_closure(**kwargs, model=model, name="grip")
