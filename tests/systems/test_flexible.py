"""Flexible links (jaxsoa.systems.flexible.rfem, jaxsoa.systems.flexible.modal; docs/flexible.md): Euler–Bernoulli
cantilever frequencies, the rigid-finite-element link against the independent assumed-modes model,
geometric stiffening (Southwell coefficient, Kane–Ryan–Banerjee spin-up), energy conservation, and
the dense masked-operator path against the recursions under vmap over topologies, compiled once."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax.test_util import check_grads

from experiments import flexible_spinup
from jaxsoa.algorithms import operators
from jaxsoa.algorithms.dynamics import crba
from jaxsoa.integrators import rollout
from jaxsoa.multibody.config_space import random_configuration
from jaxsoa.multibody.joints import JointType
from jaxsoa.systems.flexible import reduced as flexible_reduced
from jaxsoa.systems.flexible import rfem as flexible
from jaxsoa.systems.flexible.modal import forward_dynamics_modal, hub_beam_modes, modal_energy, rotating_frequencies
from sims import flexible_variants
from tests.helpers.trees import counting, random_group, relative_error

BETA_L = np.array([1.875104068711961, 4.694091132974175])      # clamped-free Euler–Bernoulli roots
UNIT = dict(length=1.0, bending_stiffness=1.0, mass_per_length=1.0)   # ω = (βL)², so βL = √ω
SOUTHWELL_1 = 1.1933        # first-mode Southwell coefficient, uniform cantilever, zero hub radius


def clamped_beam(n_segments, bending_axes="z"):
    """A unit beam welded to the world (root piece on a FIXED joint)."""
    tree = dict(parent=np.array([-1]), joint_types=np.array([JointType.FIXED]), joint_axis=np.array([[0.0, 0.0, 1.0]]),
                placement_rotation=np.eye(3)[None], placement_translation=np.zeros((1, 3)), mass=np.ones(1),
                com=np.zeros((1, 3)), inertia_com=np.eye(3)[None], link_names=("beam",), link_joint_names=("clamp",))
    return flexible.flexible_model(tree, {0: flexible.Beam(n_segments=n_segments, bending_axes=bending_axes, **UNIT)},
                                   gravity=(0.0, 0.0, 0.0))


def test_rigid_finite_elements_converge_to_euler_bernoulli_at_second_order():
    errors = []
    for n in (4, 8, 16):
        fm = clamped_beam(n)
        omega = np.asarray(jax.jit(flexible.natural_frequencies)(fm, jnp.zeros(fm.model.nq)))
        errors.append(np.abs(np.sqrt(omega[:2]) - BETA_L) / BETA_L)
    errors = np.array(errors)                           # (refinement, mode)
    order = np.log2(errors[:-1] / errors[1:])
    print("RFEM βL relative errors (N = 4, 8, 16):", errors, "observed order:", order)
    # measured order 2.00-2.05 (mode 1), 1.99-2.06 (mode 2): O(h²) as for the Hencky chain
    assert np.all((order > 1.9) & (order < 2.1)), order
    # N = 16: βL errors 4.5e-4 and 1.6e-3 (measured); the bounds leave 10-20% for the platform
    assert errors[-1, 0] < 5e-4 and errors[-1, 1] < 1.8e-3


def test_assumed_modes_converge_to_euler_bernoulli_from_above():
    errors = []
    for m in range(2, 7):
        mm = hub_beam_modes(flexible.Beam(n_segments=1, **UNIT), m, hub_inertia=1.0)
        beta = np.sqrt(np.asarray(rotating_frequencies(mm))[:2]) if m > 1 else None
        errors.append((beta - BETA_L) / BETA_L)
    errors = np.array(errors)
    print("assumed-modes βL relative errors (m = 2..6):", errors)
    assert np.all(errors > -1e-12)                      # Rayleigh–Ritz: upper bounds
    assert np.all(np.diff(errors, axis=0) < 0)          # monotone in m
    # m = 6: 4e-11 and 7e-6 (measured); polynomial Ritz converges faster than any power of 1/m here
    assert errors[-1, 0] < 1e-10 and errors[-1, 1] < 1e-5


def test_geometric_stiffening_southwell_coefficient():
    beam = flexible.Beam(n_segments=1, **UNIT)
    spin = 0.1                     # small Ω: ω² = ω₀² + κ Ω² + O(Ω⁴) measures the slope κ
    # bending in the plane of rotation (lead-lag): κ = κ_flap − 1 = 0.1933 with K_G (κ_flap = 1.1933,
    # literature, 4 digits); exactly −1 without K_G (stiffness K − Ω² M_ee), hence the linear
    # model's divergence once Ω exceeds ω₀
    for stiffening, expected, tol in ((True, SOUTHWELL_1 - 1, 2e-4), (False, -1.0, 1e-9)):
        mm = hub_beam_modes(beam, 6, hub_inertia=1.0, geometric_stiffening=stiffening)
        w0, w = rotating_frequencies(mm, 0.0)[0], rotating_frequencies(mm, spin)[0]
        coefficient = float((w ** 2 - w0 ** 2) / spin ** 2)
        print("modal lead-lag Southwell coefficient", stiffening, coefficient)
        assert abs(coefficient - expected) < tol, (stiffening, coefficient)
    # the rigid-finite-element chain stiffens by itself: linearise its driven dynamics at a constant
    # hub rate (CRBA + RNEA of the chain, jacfwd); κ converges at O(h²): measured 0.2651, 0.2110,
    # 0.1977 at N = 4, 8, 16 (errors 0.072, 0.018, 0.0044, ratio 4.0)
    fm = flexible_spinup.hub_beam_chain(flexible.Beam(n_segments=16, **UNIT))

    @jax.jit
    def stiffness_matrix(fm, rate):
        def accel(eta):
            q = jnp.concatenate([jnp.zeros(1), eta])
            v = jnp.zeros_like(q).at[0].set(rate)
            return flexible.forward_dynamics_driven(fm, q, v, jnp.zeros(1), (0,))[1:]
        return -jax.jacfwd(accel)(jnp.zeros(16))           # η̈ = −M⁻¹ K_eff η

    w0, w = (np.sqrt(np.sort(np.linalg.eigvals(np.asarray(stiffness_matrix(fm, r))).real)[0]) for r in (0.0, spin))
    chain_kappa = (w ** 2 - w0 ** 2) / spin ** 2
    print("chain lead-lag Southwell coefficient (N = 16):", chain_kappa)
    assert abs(chain_kappa - (SOUTHWELL_1 - 1)) < 6e-3  # O(h²) discretisation error at N = 16 (0.0044)


@pytest.fixture(scope="module")
def spinup(tmp_path_factory):
    """Kane–Ryan–Banerjee spin-up: the experiment over 10 s at N = 4, m = 2, dt = 0.01 (the linear
    model diverges near 9 s), its time series as the coarse pair, and a fine pair N = 8, m = 4 over
    the first 4 s at dt = 0.004 (the experiment refuses ω_max dt > 2.7; here ≤ 2.45, so every
    divergence is physical, not RK4's)."""
    out = tmp_path_factory.mktemp("spinup")
    rows = flexible_spinup.run(out, duration=10.0, n_segments=4, n_modes=2, dt=0.01, progress=False)
    series = np.loadtxt(out / "flexible_spinup.csv", delimiter=",", skiprows=1)
    coarse = series[: 401: 2, 3], series[: 401: 2, 2]                          # chain, stiffened; t ≤ 4 s
    fine = flexible_spinup.simulate_chain(8, 4.0, 0.004)[::5], flexible_spinup.simulate_modal(4, True, 4.0, 0.004)[::5]
    return rows, fine, coarse


@pytest.mark.slow            # runs experiments/flexible_spinup.py (fixture spinup)
def test_spinup_stiffened_bounded_linear_diverges(spinup):
    rows, _, _ = spinup
    linear, stiffened, chain, _ = rows
    assert linear["diverged_at_s"] is not None and linear["diverged_at_s"] < 10.0    # |w(L)| > L
    # Kane et al.'s stiffened tip deflection peaks near −0.57 m; bounded means well below L = 10 m
    assert stiffened["diverged_at_s"] is None and chain["diverged_at_s"] is None
    assert 0.4 < stiffened["peak_abs_tip_m"] < 0.8 and 0.4 < chain["peak_abs_tip_m"] < 0.8


@pytest.mark.slow            # runs experiments/flexible_spinup.py (fixture spinup)
def test_chain_agrees_with_assumed_modes_under_refinement(spinup):
    _, fine, coarse = spinup
    err_fine = np.max(np.abs(fine[0] - fine[1]))
    err_coarse = np.max(np.abs(coarse[0] - coarse[1]))
    peak = np.max(np.abs(fine[1]))
    print(f"max |chain - modal| tip deflection, t <= 4 s: coarse {err_coarse:.4g} m, fine {err_fine:.4g} m, "
          f"peak {peak:.3g} m")
    # two independent discretisations of one beam: the difference is their discretisation error
    # (plus the modal model's second-order truncation, O(w²/L²) of w): it must shrink under
    # refinement and be small at N = 8, m = 4
    assert err_fine < err_coarse / 2.5
    assert err_fine < 0.02 * peak


def test_energy_conserved_without_damping_and_dissipated_with_it():
    beam = flexible.Beam(length=2.0, bending_stiffness=50.0, mass_per_length=1.5, n_segments=3, bending_axes="yz")
    fm = flexible_spinup.hub_beam_chain(beam, hub_inertia=0.5, hub_radius=0.3)
    fm = dataclasses.replace(fm, model=dataclasses.replace(fm.model, gravity=jnp.array([0.0, -2.0, -9.81])))
    v0 = jnp.asarray(np.random.default_rng(0).normal(0.0, 0.5, fm.model.nv)).at[0].set(2.0)
    q0 = jnp.zeros(fm.model.nq)

    @jax.jit
    def energies(fm):
        qs, vs = rollout(fm.model, q0, v0, lambda t, q, v: flexible.elastic_forces(fm, q, v), 5e-4, 1000,
                         control_at_stages=True)
        return jax.vmap(lambda q, v: flexible.mechanical_energy(fm, q, v))(qs, vs)

    E = np.asarray(energies(fm))
    drift = np.abs(E - E[0]).max() / abs(E[0])
    print("relative energy drift over 0.5 s (RK4, dt = 5e-4):", drift)
    assert drift < 1e-8            # RK4 truncation, measured ~1e-10 (ω_max dt ~ 0.3)
    E_damped = np.asarray(energies(dataclasses.replace(fm, damping=0.01 * fm.stiffness)))
    assert np.all(np.diff(E_damped) < 1e-9 * abs(E[0])) and E_damped[-1] < E_damped[0] * (1 - 1e-3)
    # the assumed-modes reference conserves its own energy too (Lagrangian, exact mass matrix)
    mm = hub_beam_modes(beam, 3, hub_inertia=0.5, hub_radius=0.3)
    q, v = jnp.array([0.0, 0.01, -0.002, 0.001]), jnp.array([2.0, 0.1, 0.0, -0.05])
    a = forward_dynamics_modal(mm, q, v, 0.0)
    power = jax.jvp(lambda s: modal_energy(mm, q + s * v, v + s * a), (0.0,), (1.0,))[1]
    assert abs(float(power)) < 1e-12 * float(modal_energy(mm, q, v))                # dE/dt = 0


def _flexible_group(seed, n_models):
    """Random floating trees sharing a joint-type sequence, link 2 made a flexible "yz" beam."""
    beam = flexible.Beam(length=0.6, bending_stiffness=30.0, mass_per_length=2.0, n_segments=1,
                         bending_axes="yz", damping=0.01)
    fms = []
    for _, model, _ in random_group(np.random.default_rng(seed), 5, n_models, (JointType.REVOLUTE, JointType.SPHERICAL),
                                    root_type=JointType.FREE, root_at=0):
        tree = flexible.tree_from_model(model)
        tree["placement_translation"][tree["parent"] == 2] = (beam.length, 0.0, 0.0)   # children at the tip
        fm = flexible.flexible_model(tree, {2: beam}, gravity=(0.0, 0.0, -9.81))
        names = tuple(f"l{i}" for i in range(fm.model.n_links))
        fms.append(dataclasses.replace(fm, model=dataclasses.replace(fm.model, link_names=names,
                                                                     link_joint_names=names)))
    return fms


def _both_paths(fm, q, v, a, tau):
    tau_free = tau.at[np.asarray(fm.v_index)].set(0.0)          # no actuator on the deformation joints
    return dict(id_rec=flexible.inverse_dynamics(fm, q, v, a),
                id_op=flexible.inverse_dynamics(fm, q, v, a, method="dense"),
                fd_rec=flexible.forward_dynamics(fm, q, v, tau),
                fd_op=flexible.forward_dynamics(fm, q, v, tau, method="dense"),
                M_rec=crba(fm.model, q), M_op=operators.mass_matrix_operator(fm.model, q),
                tau_back=flexible.inverse_dynamics(fm, q, v, flexible.forward_dynamics(fm, q, v, tau_free)))


def test_dense_operators_match_recursions_vmapped_over_topologies_one_compile():
    fms = _flexible_group(3, 4)
    assert len({np.asarray(fm.model.parent).tobytes() for fm in fms}) > 1              # distinct topologies
    batch = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *fms)
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    q = jax.vmap(lambda fm, k: random_configuration(fm.model, k, angle_range=0.5))(batch, keys)
    rng = np.random.default_rng(1)
    v, a, tau = (jnp.asarray(rng.normal(size=(4, fms[0].model.nv))) for _ in range(3))
    fn, count = counting(_both_paths)
    run = jax.jit(jax.vmap(fn))
    out = run(batch, q, v, a, tau)
    out_rev = run(jax.tree_util.tree_map(lambda x: x[::-1], batch), q[::-1], v[::-1], a[::-1], tau[::-1])
    assert count[0] == 1                                   # one trace for every topology in both batches
    # float64: the two paths agree to rounding (measured ≤ 8e-15); 1e-10 is the project's bar
    for rec, op in (("id_rec", "id_op"), ("fd_rec", "fd_op"), ("M_rec", "M_op")):
        assert relative_error(out[op], out[rec]) < 1e-10, rec
        assert relative_error(out_rev[op], out[rec][::-1]) < 1e-10, rec
    # RNEA(ABA(τ)) = τ, and along a true motion the deformation joints need no actuator torque
    # (the elastic force is internal): 1e-9 for the conditioning of the stiff beam (measured 3e-14)
    tau_free = np.asarray(tau).copy()
    tau_free[:, np.asarray(fms[0].v_index)] = 0.0
    assert relative_error(out["tau_back"], tau_free) < 1e-9


def test_sims_variants_run_both_paths():
    dual = flexible_variants.dual_arm_flexible(n_segments=3, floating=True)
    # 4 flexible links × 3 nodes × 2 bending axes added to the 7 rigid links; 6 + 6 + 24 velocities
    assert (dual.model.n_links, dual.model.nv, len(dual.v_index)) == (31, 36, 24)
    fm = flexible_variants.space_arm_flexible_boom(n_segments=1, floating=True)
    rng = np.random.default_rng(0)
    q = random_configuration(fm.model, jax.random.PRNGKey(1), angle_range=0.3)
    v, tau = jnp.asarray(rng.normal(size=fm.model.nv)), jnp.asarray(rng.normal(size=fm.model.nv))
    rec, op = jax.jit(lambda fm, q, v, tau: (
        flexible.forward_dynamics(fm, q, v, tau), flexible.forward_dynamics(fm, q, v, tau, method="dense")))(
        fm, q, v, tau)
    assert relative_error(op, rec) < 1e-10                 # rounding only, as in the test above
    frequencies = flexible_variants.clamped_frequencies()
    assert all(30.0 < w < 200.0 for w in frequencies.values())      # the table's stated range


def test_gradients_through_flexible_dynamics():
    """Forward dynamics differentiable in the state and in the beam's stiffness and damping (for
    identification): check_grads, forward and reverse, against finite differences (float64)."""
    fm = flexible_spinup.hub_beam_chain(flexible.Beam(length=1.0, bending_stiffness=20.0, mass_per_length=1.0,
                                                      n_segments=2, damping=0.01))
    rng = np.random.default_rng(4)
    q, v, tau = (jnp.asarray(rng.normal(0.0, 0.3, 3)) for _ in range(3))

    def fd(q, v, stiffness, damping):
        return flexible.forward_dynamics(dataclasses.replace(fm, stiffness=stiffness, damping=damping), q, v, tau)

    # central differences with check_grads' float64 step: O(eps²) error, well inside 1e-5
    check_grads(jax.jit(fd), (q, v, fm.stiffness, fm.damping), order=1, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


def test_bad_input_names_the_field():
    tree = dict(parent=np.array([-1, 0]), joint_types=np.array([JointType.REVOLUTE] * 2),
                joint_axis=np.array([[0.0, 0.0, 1.0]] * 2), placement_rotation=np.stack([np.eye(3)] * 2),
                placement_translation=np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0]]), mass=np.ones(2),
                com=np.zeros((2, 3)), inertia_com=np.stack([np.eye(3)] * 2), link_names=("a", "b"),
                link_joint_names=("ja", "jb"))
    with pytest.raises(ValueError, match="bending_stiffness"):
        flexible.flexible_model(tree, {0: flexible.Beam(1.0, -1.0, 1.0, 2)})
    with pytest.raises(ValueError, match="n_segments"):
        flexible.flexible_model(tree, {0: flexible.Beam(1.0, 1.0, 1.0, 0)})
    with pytest.raises(ValueError, match=r"child 'b' .* beam tip"):
        flexible.flexible_model(tree, {0: flexible.Beam(1.0, 1.0, 1.0, 2)})
    with pytest.raises(ValueError, match="bending_axes"):
        flexible.flexible_model(tree, {1: flexible.Beam(1.0, 1.0, 1.0, 2, "xy")})
    with pytest.raises(ValueError, match="method"):
        flexible.forward_dynamics(flexible.flexible_model(tree, {1: flexible.Beam(1.0, 1.0, 1.0, 1)}),
                                  jnp.zeros(3), jnp.zeros(3), jnp.zeros(3), method="bogus")


def test_assumed_modes_through_the_recursions():
    """Ritz reduction of the chain (jaxsoa.systems.flexible.reduced): frequencies converge to Euler–Bernoulli
    as N and m grow; with a complete basis (m = N) it is the chain itself; dense = recursive."""
    crba_jit = jax.jit(crba)
    errors = []
    for n, m in ((8, 2), (16, 3), (32, 6)):
        fm = clamped_beam(n)
        rm = flexible_reduced.reduce(fm, m, {0: flexible.Beam(n_segments=n, **UNIT)})
        M = np.asarray(crba_jit(fm.model, jnp.zeros(fm.model.nq)))
        P, K = np.asarray(rm.basis), np.diag(np.asarray(fm.stiffness))
        omega = np.sqrt(scipy.linalg.eigh(P.T @ K @ P, P.T @ M @ P, eigvals_only=True)[:2])
        errors.append(np.abs(np.sqrt(omega) - BETA_L) / BETA_L)
    errors = np.array(errors)
    print("Ritz-reduced chain βL relative errors (N, m) = (8, 2), (16, 3), (32, 6):", errors)
    # measured (3.3e-3, 2.0e-1), (5.7e-4, 4.5e-3), (1.1e-4, 4.0e-4): both refinements needed
    assert np.all(np.diff(errors, axis=0) < 0) and errors[-1, 0] < 2e-4 and errors[-1, 1] < 1e-3

    beam = flexible.Beam(length=2.0, bending_stiffness=50.0, mass_per_length=1.5, n_segments=3)
    fm = flexible_spinup.hub_beam_chain(beam, hub_inertia=0.5, hub_radius=0.3)
    rng = np.random.default_rng(2)
    q_r, v_r, tau_r = (jnp.asarray(rng.normal(0.0, 0.3, 4)) for _ in range(3))

    @jax.jit
    def paths(rm, q_r, v_r, tau_r):
        q, v = flexible_reduced.expand(rm, q_r, v_r)
        full = flexible.forward_dynamics(rm.flexible, q, v, jnp.linalg.solve(rm.T.T, tau_r))   # τ_r = Tᵀ τ
        return (flexible_reduced.forward_dynamics_reduced(rm, q_r, v_r, tau_r),
                flexible_reduced.forward_dynamics_reduced(rm, q_r, v_r, tau_r, method="dense"), full)

    rm = flexible_reduced.reduce(fm, 3, {1: beam})
    rec, op, full = paths(rm, q_r, v_r, tau_r)
    assert relative_error(op, rec) < 1e-10                   # dense = recursive (rounding)
    # complete basis: T is invertible, the reduced equations are the chain's (τ = T⁻ᵀ τ_r) and
    # T v̇_r must equal ABA's accelerations; 1e-9 allows for the conditioning of Ψ
    assert relative_error(rm.T @ rec, full) < 1e-9


def test_reduction_of_a_beam_bending_in_two_planes():
    """bending_axes="yz": one Ritz block per axis. A complete basis (m = N) is square and
    invertible and keeps the chain's frequencies; with m < N the isotropic beam's y and z
    frequencies are equal pairs, each the z-only reduction's (1e-9 for those: the same small problem twice)."""
    n, m = 6, 3

    def ritz_frequencies(fm, rm):
        M = np.asarray(crba(fm.model, jnp.zeros(fm.model.nq)))
        P, K = np.asarray(rm.basis), np.diag(np.asarray(fm.stiffness))
        return scipy.linalg.eigh(P.T @ K @ P, P.T @ M @ P, eigvals_only=True)

    fm2 = clamped_beam(n, bending_axes="yz")
    beam2 = {0: flexible.Beam(n_segments=n, bending_axes="yz", **UNIT)}
    full = flexible_reduced.reduce(fm2, n, beam2)
    assert full.basis.shape == (2 * n, 2 * n) and np.linalg.matrix_rank(np.asarray(full.basis)) == 2 * n
    M = np.asarray(crba(fm2.model, jnp.zeros(fm2.model.nq)))
    chain = scipy.linalg.eigh(np.diag(np.asarray(fm2.stiffness)), M, eigvals_only=True)
    # the slope basis Ψ is ill-conditioned (measured 6e-8 at the top frequency): 1e-6
    np.testing.assert_allclose(ritz_frequencies(fm2, full), chain, rtol=1e-6)
    pairs = ritz_frequencies(fm2, flexible_reduced.reduce(fm2, m, beam2))
    single = ritz_frequencies(clamped_beam(n), flexible_reduced.reduce(clamped_beam(n), m,
                                                                      {0: flexible.Beam(n_segments=n, **UNIT)}))
    np.testing.assert_allclose(pairs[0::2], single, rtol=1e-9)
    np.testing.assert_allclose(pairs[1::2], single, rtol=1e-9)
