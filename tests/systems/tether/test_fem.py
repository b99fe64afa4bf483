"""Reeling tether (jaxsoa.systems.tether.fem, jaxsoa.systems.tether.reels): the balances of docs/tether.md §5–6,
the closed forms for both formulations ("nodal" and "energy_consistent", which coincide at fixed length),
the nodal form's own reeling properties (tests/systems/tether/test_energy_consistent.py has the other's).

Independent references: conservation laws (energy, linear and angular momentum), the closed-form FE
and continuum frequencies of a taut string / bar (docs/tether.md §6), Hooke's law for slack/taut,
the Kelvin–Voigt modal damping ratio α ω / 2, central finite differences, and a second code path
(`end_coupling` vs `tether_dynamics`, batched vs single runs). Meshes stay small (4–32 elements).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from jaxsoa.systems.tether.fem import (
    TetherState,
    check_tether_state,
    element_strain,
    element_tension,
    straight_state,
    tether_params,
)
from jaxsoa.systems.tether.reels import (
    end_coupling,
    energy_rates,
    exit_state,
    exit_tension,
    system_energy,
    system_momentum,
    tether_dynamics,
    tether_inputs,
)
from tests.helpers.tether import simulate
from tests.helpers.trees import counting


def simulate_chunks(params, inputs, state, dt, n_chunks, chunk=250):
    """`n_chunks` × 250 RK4 steps with one compiled `simulate` (shared by the tests of a mesh)."""
    work = 0.0
    for _ in range(n_chunks):
        state, w = simulate(params, inputs, state, dt, n_steps=chunk)
        work += float(w)
    return state, work


def invariants(params, inputs, state):
    linear, angular = system_momentum(params, inputs=inputs, state=state)
    return float(system_energy(params, state, inputs)), np.asarray(linear), np.asarray(angular)


FORMULATIONS = ("nodal", "energy_consistent")


def spinning_dumbbell(n, lumped=False, alpha=0.0, dtype=jnp.float64, formulation="energy_consistent"):
    """Two end masses (3, 2 kg) on a 10 m tether stretched 2 % and spinning at ~1.5 rad/s about
    their centre of mass, which drifts: taut throughout (centrifugal tension ≈ 25 N ≫ 0)."""
    params = tether_params(0.5, 1000.0, alpha, 30.0, n, lumped=lumped, dtype=dtype, formulation=formulation)
    spin, drift = np.array([0.2, 0.3, 1.5]), np.array([0.1, -0.2, 0.05])
    r_P, r_M = np.array([0.0, 0.0, 0.0]), np.array([10.2, 0.0, 0.0])
    com = (3 * r_P + 2 * r_M) / 5
    state = straight_state(params, r_P, r_M, [5.0, 15.0], v_P=drift + np.cross(spin, r_P - com),
                           v_M=drift + np.cross(spin, r_M - com))
    return params, tether_inputs(end_mass=(3.0, 2.0), dtype=dtype), state


# ---------------------------------------------------------------------------------------------
# builders

def test_builders_name_the_bad_field():
    with pytest.raises(ValueError, match="EA"):
        tether_params(0.5, -1.0, 0.0, 10.0, 4)
    with pytest.raises(ValueError, match="n_elements"):
        tether_params(0.5, 1.0, 0.0, 10.0, 1)
    with pytest.raises(ValueError, match="formulation"):
        tether_params(0.5, 1.0, 0.0, 10.0, 4, formulation="upwind")
    params = tether_params(0.5, 1.0, 0.0, 10.0, 4)
    with pytest.raises(ValueError, match=r"TetherState\.s"):
        straight_state(params, [0, 0, 0], [1, 0, 0], [3.0, 11.0])
    with pytest.raises(ValueError, match="reel_inertia"):
        tether_inputs(reel_inertia=(0.0, 1.0), force_driven=(True, False))
    with pytest.raises(ValueError, match="end_mass"):
        tether_inputs(end_mass=(1.0, -1.0))


def test_traced_checks_flag_bad_states():
    params = tether_params(0.5, 1.0, 0.0, 10.0, 4)
    state = straight_state(params, [0, 0, 0], [1, 0, 0], [3.0, 7.0], allow_slack=True)   # slack: not checked here
    checked = jax.jit(checkify.checkify(check_tether_state))
    err, _ = checked(params, state)
    assert err.get() is None
    err, _ = checked(params, dataclasses.replace(state, s=jnp.array([3.0, 11.0])))
    assert "out of range" in err.get()
    err, _ = checked(params, dataclasses.replace(state, r=state.r.at[2].set(state.r[1])))
    assert "zero length" in err.get()


# ---------------------------------------------------------------------------------------------
# 1. fixed length, α = 0: energy and momenta conserved

@pytest.mark.parametrize("lumped", [False, True])
def test_fixed_length_conserves_energy_and_momenta(lumped):
    params, inputs, state = spinning_dumbbell(6, lumped)
    E0, P0, H0 = invariants(params, inputs, state)
    errors = []
    for dt, chunks in ((4e-3, 1), (2e-3, 2)):                             # 1 s
        final, _ = simulate_chunks(params, inputs, state, dt, chunks)
        tension = element_tension(params, *element_strain(params, final)[:2])
        assert float(tension.min()) > 1.0                          # stayed taut: a smooth problem
        E, P, H = invariants(params, inputs, final)
        errors.append(abs(E - E0) / E0)
        # momenta: exact invariants of the semi-discrete system (test function Σ N_i = 1; n_k ∥ r_{k+1} − r_k),
        # so only RK4's error and round-off remain: 1e-10 relative
        assert np.abs(P - P0).max() < 1e-10 * np.abs(P0).max()
        assert np.abs(H - H0).max() < 1e-10 * np.abs(H0).max()
    print(f"fixed length (lumped={lumped}): relative energy error {errors[0]:.3g} (dt 4e-3), {errors[1]:.3g} "
          f"(dt 2e-3), ratio {errors[0] / errors[1]:.1f}")
    # RK4: halving dt divides the energy error by ~16 (≥ 10 allows the pre-asymptotic drift), 1e-7 absolute
    assert errors[0] / errors[1] > 10
    assert errors[1] < 1e-7


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_fixed_length_kelvin_voigt_dissipates_at_the_viscous_rate(formulation):
    """α > 0, fixed length: E(t) − E(0) = −∫ ∫ EA α ε̇² ds dt, exact for the semi-discrete system."""
    params, inputs, state = spinning_dumbbell(6, alpha=2e-3, formulation=formulation)
    E0, _, _ = invariants(params, inputs, state)
    final, work = simulate_chunks(params, inputs, state, 2e-3, 2)
    E, _, _ = invariants(params, inputs, final)
    print(f"Kelvin–Voigt: ΔE = {E - E0:.12g} J, −∫ P_viscous = {work:.12g} J")
    assert work < -1e-4 * E0                                          # it does dissipate
    assert abs(E - E0 - work) < 1e-8 * E0                             # RK4 error only (dt = 2e-3)


# ---------------------------------------------------------------------------------------------
# 2. deployment / retrieval in free space

def deploying(n, lumped=False, alpha=0.0, formulation="energy_consistent"):
    """P pays out at 0.4 m/s, M at 0.6 m/s (rate-driven, constant) while the masses separate."""
    params = tether_params(0.5, 500.0, alpha, 30.0, n, lumped=lumped, formulation=formulation)
    state = straight_state(params, [0.0, 0.0, 0.0], [5.0, 0.5, 0.0], [5.0, 10.0], v_P=[-0.5, 0.1, 0.0],
                           v_M=[0.5, 0.2, 0.1], s_dot=(-0.4, 0.6))
    return params, tether_inputs(end_mass=(3.0, 2.0)), state


def test_nodal_deployment_momentum_and_energy_balance():
    """The "nodal" form while reeling: momenta exact, energy balance first order in h."""
    rel_balance = {}
    for n in (4, 8):
        params, inputs, state = deploying(n, formulation="nodal")
        E0, P0, H0 = invariants(params, inputs, state)
        final, work = simulate_chunks(params, inputs, state, 2e-3, 4)
        E, P, H = invariants(params, inputs, final)
        assert abs(float(final.s[1] - final.s[0]) - 7.0) < 1e-12          # l = 5 + 2 s × 1 m/s
        # the reels are internal: linear momentum is an exact semi-discrete invariant at every mesh
        # (so is angular momentum with consistent mass); RK4 error only: 1e-10 relative
        assert np.abs(P - P0).max() < 1e-10 * np.abs(P0).max()
        assert np.abs(H - H0).max() < 1e-10 * np.abs(H0).max()
        rel_balance[n] = abs(E - E0 - work) / abs(work)
    print("deployment energy balance |ΔE − ∫(reel − Carnot + strain)| / |∫…|:", rel_balance)
    # the transport terms are Galerkin-exact but the material velocity ṙ̄ − w r̄' is not in the test space:
    # the balance closes at first order in h (measured 1.8 %, 0.75 %; 0.39 % at n = 16): assert the decrease
    assert rel_balance[8] < 0.6 * rel_balance[4]
    assert rel_balance[8] < 1e-2


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_deployment_lumped_keeps_linear_momentum(formulation):
    params, inputs, state = deploying(6, lumped=True, formulation=formulation)
    _, P0, _ = invariants(params, inputs, state)
    final, _ = simulate_chunks(params, inputs, state, 2e-3, 2)
    _, P, _ = invariants(params, inputs, final)
    assert np.abs(P - P0).max() < 1e-10 * np.abs(P0).max()     # row sums of M are unchanged by lumping


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_passive_payout_loses_energy_at_the_carnot_rate(formulation):
    """Spin deployment from a passive reel (no control force, no damping): the reel does no work, so
    the energy (reel inertia included) falls at the Carnot rate ½ ρ |ṗ|³ (1+ε)² (+ the strain flux)."""
    rel = {}
    for n in (4, 8):
        params = tether_params(0.5, 500.0, 0.0, 30.0, n, formulation=formulation)
        state = straight_state(params, [0.0, 0.0, 0.0], [5.1, 0.0, 0.0], [5.0, 10.0], v_M=[0.0, 3.0, 0.0])
        inputs = tether_inputs(end_mass=(20.0, 2.0), reel_inertia=(0.5, 1.0), force_driven=(True, False))
        E0, _, _ = invariants(params, inputs, state)
        final, work = simulate_chunks(params, inputs, state, 2e-3, 3)
        assert float(energy_rates(params, final, inputs).reel) == 0.0     # passive: no reel power
        E, _, _ = invariants(params, inputs, final)
        rel[n] = abs(E - E0 - work) / abs(work)
        assert float(final.s[0]) < 5.0 - 1.0                             # it paid out > 1 m
    print(f"passive pay-out ({formulation}): |ΔE − ∫(−Carnot + strain)| / |∫…|:", rel)
    # the tether goes slack for most of the run (a non-smooth problem). "nodal": first order in h (measured
    # 0.93, 0.49; 0.24 at n = 16: material crosses an element in ~0.3 s, so the constant is large;
    # docs/tether.md §5); "energy_consistent": measured 1.4e-2, 7.2e-3 (2.5e-3 at n = 16), the error left at
    # the slack/taut interfaces. Assert the halving, and 2 % for the energy-consistent form
    assert rel[8] < 0.6 * rel[4]
    if formulation == "energy_consistent":
        assert rel[8] < 2e-2


# ---------------------------------------------------------------------------------------------
# 3. vibration of a taut tether fixed at both ends

def fixed_fixed_jacobian(n, lumped=False, alpha=0.0, strain=0.01, formulation="energy_consistent"):
    """∂(interior r̈)/∂(r_I, v_I) of a straight tether along x (l = 4 m, ρ = 0.5, EA = 100) with fixed ends."""
    params = tether_params(0.5, 100.0, alpha, 10.0, n, lumped=lumped, formulation=formulation)
    state = straight_state(params, [0.0, 0.0, 0.0], [4.0 * (1 + strain), 0.0, 0.0], [2.0, 6.0])
    return _interior_jacobian(params, state, tether_inputs())


@jax.jit
def _interior_jacobian(params, state, inputs):
    def accel(r_inner, v_inner):
        x = TetherState(state.r.at[1:-1].set(r_inner), state.v.at[1:-1].set(v_inner), state.s, state.s_dot)
        return end_coupling(params, x, inputs).interior_accel             # a_end = 0: ends fixed

    return jax.jacfwd(accel, argnums=(0, 1))(state.r[1:-1], state.v[1:-1])


def fe_frequency(c, n, length, lumped):
    theta = np.arange(1, n) * np.pi / n
    h = length / n
    if lumped:
        return 2 * c / h * np.sin(theta / 2)
    return c / h * np.sqrt(6 * (1 - np.cos(theta)) / (2 + np.cos(theta)))


@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("lumped", [False, True])
def test_frequencies_match_closed_forms(lumped, formulation):
    n, strain = 8, 0.01
    K, _ = fixed_fixed_jacobian(n, lumped, strain=strain, formulation=formulation)
    axial = np.sort(np.sqrt(-np.linalg.eigvals(np.asarray(K[:, 0, :, 0])).real))
    transverse = np.sort(np.sqrt(-np.linalg.eigvals(np.asarray(K[:, 1, :, 1])).real))
    c_axial = np.sqrt(100.0 / 0.5)
    c_transverse = np.sqrt(100.0 * strain / (0.5 * (1 + strain)))        # T₀ / (ρ (1+ε₀)), ρ per unstretched m
    # closed-form FE frequencies (docs/tether.md §6), eigenvalue round-off only: 1e-9 relative
    np.testing.assert_allclose(axial, fe_frequency(c_axial, n, 4.0, lumped), rtol=1e-9)
    np.testing.assert_allclose(transverse, fe_frequency(c_transverse, n, 4.0, lumped), rtol=1e-9)


def test_frequencies_converge_at_second_order():
    """First axial and transverse FE modes → continuum (k/2l)√(EA/ρ), (k/2l)√(T₀/(ρ(1+ε₀))) (2π × Hz)."""
    strain = 0.01
    exact = {0: np.pi / 4.0 * np.sqrt(100.0 / 0.5), 1: np.pi / 4.0 * np.sqrt(100.0 * strain / (0.5 * (1 + strain)))}
    errors = {0: {}, 1: {}}
    for n in (4, 8, 16, 32):
        K, _ = fixed_fixed_jacobian(n, strain=strain)
        for axis in (0, 1):
            omega = np.sort(np.sqrt(-np.linalg.eigvals(np.asarray(K[:, axis, :, axis])).real))[0]
            errors[axis][n] = abs(omega - exact[axis]) / exact[axis]
    for axis, name in ((0, "axial"), (1, "transverse")):
        orders = [np.log2(errors[axis][n] / errors[axis][2 * n]) for n in (4, 8, 16)]
        print(f"first {name} mode relative error", errors[axis], "observed orders", orders)
        assert all(1.9 < p < 2.1 for p in orders)                   # linear elements: O(h²)


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_kelvin_voigt_modal_damping(formulation):
    alpha, n = 2e-3, 8
    K, C = fixed_fixed_jacobian(n, alpha=alpha, formulation=formulation)
    m = n - 1
    A = np.block([[np.zeros((m, m)), np.eye(m)], [np.asarray(K[:, 0, :, 0]), np.asarray(C[:, 0, :, 0])]])
    lam = np.linalg.eigvals(A)
    lam = lam[lam.imag > 0]
    omega = np.abs(lam)
    zeta = -lam.real / omega
    order = np.argsort(omega)
    # N = EA(ε + α ε̇) makes the axial damping matrix α K: ζ_k = α ω_k / 2 exactly (round-off: 1e-9)
    np.testing.assert_allclose(zeta[order], alpha * omega[order] / 2, rtol=1e-9)
    np.testing.assert_allclose(omega[order], fe_frequency(np.sqrt(200.0), n, 4.0, False), rtol=1e-9)


# ---------------------------------------------------------------------------------------------
# 4. slack

def test_slack_and_taut_tension():
    params = tether_params(0.5, 100.0, 0.0, 10.0, 4)
    inputs = tether_inputs()
    for distance, expected in ((4.2, 100.0 * 0.05), (3.8, 0.0)):
        state = straight_state(params, [0.0, 0.0, 0.0], [distance, 0.0, 0.0], [2.0, 6.0], allow_slack=True)
        tension = element_tension(params, *element_strain(params, state)[:2])
        np.testing.assert_allclose(tension, expected, rtol=1e-12, atol=1e-12)        # Hooke: EA (D/l − 1)
        coupling = end_coupling(params, state, inputs)
        # static straight tether: the bodies feel ±N along the line (1e-12)
        np.testing.assert_allclose(coupling.force, [[expected, 0, 0], [-expected, 0, 0]], atol=1e-12)

    def tension_at(distance):
        state = straight_state(params, [0.0, 0.0, 0.0], [4.0, 0.0, 0.0], [2.0, 6.0])
        state = dataclasses.replace(state, r=state.r * distance / 4.0)
        return element_tension(params, *element_strain(params, state)[:2]).sum()

    # at N = 0 exactly, jax.grad sees the slack branch (0); just taut, n EA / l
    assert float(jax.grad(tension_at)(4.0)) == 0.0
    np.testing.assert_allclose(jax.grad(tension_at)(4.0 + 1e-9), 4 * 100.0 / 4.0, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# second code path: the coupled-simulator interface reproduces the dumbbell

@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("lumped", [False, True])
def test_end_coupling_reproduces_dumbbell(lumped, formulation):
    params, inputs, state = deploying(5, lumped, formulation=formulation)
    deriv = tether_dynamics(params, state, inputs)
    coupling = end_coupling(params, state, inputs)
    a_end = deriv.v[jnp.array([0, -1])]
    m_body = inputs.end_mass + params.rho * jnp.stack([state.s[0], params.length - state.s[1]])
    # body equation m' a = force − Λ a and interior r̈ = free + gain a_end, 1e-12 (one solve vs another)
    np.testing.assert_allclose(coupling.force - coupling.mass @ a_end, m_body[:, None] * a_end, atol=1e-12)
    np.testing.assert_allclose(coupling.interior_accel + coupling.interior_gain @ a_end, deriv.v[1:-1], atol=1e-12)
    if lumped:
        assert float(jnp.abs(coupling.mass[0, 1])) == 0.0 and float(jnp.abs(coupling.interior_gain).max()) == 0.0


# ---------------------------------------------------------------------------------------------
# reels and external fields

def test_force_driven_reel_holds_and_reels_in():
    """Force-driven reel sign conventions (jaxsoa.systems.tether.reels), "nodal" form: a reel holding exactly
    the exit tension stays put; a larger holding force reels in (s̈_P > 0, s̈_M < 0); a smaller one pays out;
    the acceleration is (1+ε)(N − N_ctrl)/m_r."""
    params = tether_params(0.5, 100.0, 0.0, 10.0, 4, formulation="nodal")
    state = straight_state(params, [0.0, 0.0, 0.0], [4.2, 0.0, 0.0], [2.0, 6.0])          # N = 5 N, ε = 0.05
    for held, sign in ((5.0, 0.0), (7.0, 1.0), (3.0, -1.0)):
        inputs = tether_inputs(reel_force=(held, held), reel_inertia=(2.0, 2.0), force_driven=(True, True))
        s_ddot = tether_dynamics(params, state, inputs).s_dot
        expected = 1.05 * (held - 5.0) / 2.0
        np.testing.assert_allclose(s_ddot, [expected, -expected], atol=1e-12)              # closed form
        if sign != 0:
            assert np.all(np.sign(np.asarray(s_ddot)) == np.array([sign, -sign]))


def test_energy_consistent_force_driven_reel_holds_the_consistent_reaction():
    """"energy_consistent": the reel holds the consistent exit reaction N̂_e = −R_e·u_e (docs/tether.md §5.1),
    which depends on the reels' own s̈, so m_r p̈_e = (1+ε)(N̂_e − N_ctrl) is solved with the accelerations. Checked
    through a second code path: `end_coupling` with the dumbbell's s̈ prescribed gives the body-side reaction
    (force − mass a − thrust)·u at the dumbbell's end accelerations. A reel holding N̂ at s̈ = 0 stays put; a
    larger force reels in, a smaller one pays out."""
    params = tether_params(0.5, 100.0, 0.0, 10.0, 4)
    state = straight_state(params, [0.0, 0.0, 0.0], [4.2, 0.0, 0.0], [2.0, 6.0], v_M=[0.3, 0.2, 0.0],
                           s_dot=(-0.1, 0.2))                                              # both ends pay out
    damping = np.array([0.1, 0.0])
    ex = exit_state(params, state, *element_strain(params, state)[:1],
                    element_tension(params, *element_strain(params, state)[:2]), element_strain(params, state)[2])
    # the holding force at which the reels keep their rate: N̂(s̈ = 0) − ρ(1+ε) ṗ² − c ṗ
    stay = (np.asarray(exit_tension(params, state, tether_inputs()))
            - np.asarray(params.rho * (1 + ex.eps) * ex.payout**2 + damping * ex.payout))
    assert np.all(np.abs(stay / 5.0 - 1) < 0.2)       # near the element tension N = 5 N (the ends accelerate)
    for offset, sign in ((0.0, 0.0), (2.0, 1.0), (-2.0, -1.0)):
        inputs = tether_inputs(reel_force=stay + offset, reel_damping=damping, reel_inertia=(2.0, 3.0),
                               force_driven=(True, True))
        deriv = tether_dynamics(params, state, inputs)
        cpl = end_coupling(params, state, tether_inputs(reel_accel=deriv.s_dot))
        a_end = deriv.v[jnp.array([0, -1])]
        reaction = jnp.sum((cpl.force - cpl.mass @ a_end - cpl.exit.thrust) * cpl.exit.u, axis=1)     # N̂
        stretch, payout = 1 + cpl.exit.eps, cpl.exit.payout
        grip = reaction - params.rho * stretch * jnp.maximum(payout, 0) ** 2
        p_ddot = jnp.array([-1.0, 1.0]) * deriv.s_dot
        # reel equation with the body-side reaction: the two solves agree to round-off (1e-10 N)
        np.testing.assert_allclose(inputs.reel_inertia * p_ddot,
                                   stretch * (grip - inputs.reel_force - inputs.reel_damping * payout), atol=1e-10)
        if sign == 0:
            np.testing.assert_allclose(deriv.s_dot, 0.0, atol=1e-12)                    # it keeps its rate
        else:
            assert np.all(np.sign(np.asarray(deriv.s_dot)) == np.array([sign, -sign]))


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_linear_external_field_moves_the_centre_of_mass_exactly(formulation):
    """For a linear field a(r) = −K r (gravity-gradient form), d/dt (total momentum) = −K Σ m r over all
    mass (end masses with stored tether + ρ ∫ r ds): F_ext = M a(r_nodes) is exact for linear fields."""
    params, inputs, state = spinning_dumbbell(5, formulation=formulation)
    K = jnp.diag(jnp.array([-3.0, 1.0, 1.0])) * 1.2e-3 + 1e-4 * jnp.ones((3, 3))

    def field(r):
        return -r @ K.T

    deriv = tether_dynamics(params, state, inputs, external_accel_fn=field)
    momentum_rate = jax.jvp(lambda x: system_momentum(params, x, inputs)[0], (state,), (deriv,))[1]
    free_rate = jax.jvp(lambda x: system_momentum(params, x, inputs)[0], (state,),
                        (tether_dynamics(params, state, inputs),))[1]
    # ρ ∫ r ds of the straight tether = ρ l (r_0 + r_n)/2; end masses m' = m + stored tether
    m_body = np.array([3.0 + 0.5 * 5.0, 2.0 + 0.5 * 15.0])
    r_ends = np.asarray(state.r[np.array([0, -1])])
    first_moment = m_body @ r_ends + 0.5 * 10.0 * (r_ends[0] + r_ends[1]) / 2
    np.testing.assert_allclose(free_rate, 0.0, atol=1e-10)                  # internal forces cancel
    np.testing.assert_allclose(momentum_rate, -np.asarray(K) @ first_moment, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# 5.–7. gradients, batches, float32

DEPLOY_PARAMS, _, DEPLOY_STATE = spinning_dumbbell(4)      # pays out at ±rate while spinning: taut


def deployment_loss(EA, rate, n_steps=1000):
    """A smooth function of the final state after a 1000-step (1 s) deployment at reel rate ±`rate`
    (the tether stays taut, so the slack switch is never crossed and the loss is smooth)."""
    params = dataclasses.replace(DEPLOY_PARAMS, EA=EA)
    state = dataclasses.replace(DEPLOY_STATE, s_dot=jnp.stack([-rate, rate]))
    final, _ = simulate(params, tether_inputs(end_mass=(3.0, 2.0)), state, 1e-3, n_steps=n_steps)
    return jnp.sum(final.r[-1] * jnp.array([1.0, 2.0, 3.0])) + jnp.sum(final.v ** 2)


def test_gradient_through_deployment_rollout_matches_finite_differences():
    EA, rate = jnp.asarray(1000.0), jnp.asarray(0.2)
    grad = jax.jit(jax.grad(deployment_loss, argnums=(0, 1)))(EA, rate)
    loss = jax.jit(deployment_loss)
    for i, (x, step) in enumerate(((EA, 1e-2), (rate, 1e-5))):
        args_p, args_m = [EA, rate], [EA, rate]
        args_p[i], args_m[i] = x + step, x - step
        fd = (loss(*args_p) - loss(*args_m)) / (2 * step)
        print(f"d loss/d {('EA', 'rate')[i]}: grad {float(grad[i]):.12g}, central FD {float(fd):.12g}, "
              f"relative difference {abs(float(grad[i] - fd) / float(fd)):.2g}")
        # central differences: O(step²) truncation + round-off/step ≈ 1e-8 relative; 1e-6 allowed
        np.testing.assert_allclose(grad[i], fd, rtol=1e-6)


def test_vmapped_parameter_batch_compiles_once():
    def final_state(EA, alpha, rate):
        params = dataclasses.replace(DEPLOY_PARAMS, EA=EA, alpha=alpha)
        state = dataclasses.replace(DEPLOY_STATE, s_dot=jnp.stack([-rate, rate]))
        return simulate(params, tether_inputs(end_mass=(3.0, 2.0)), state, 2e-3, n_steps=100)[0].r

    counted, count = counting(final_state)
    batched = jax.jit(jax.vmap(counted))
    rng = np.random.default_rng(0)
    for _ in range(2):
        EA, alpha, rate = rng.uniform(800, 1200, 8), rng.uniform(0, 1e-3, 8), rng.uniform(0.0, 0.3, 8)
        out = batched(jnp.asarray(EA), jnp.asarray(alpha), jnp.asarray(rate))
    assert count[0] == 1                                               # two batches, one trace
    single = jax.jit(final_state)(*(jnp.asarray(x[3]) for x in (EA, alpha, rate)))
    np.testing.assert_allclose(out[3], single, rtol=1e-12, atol=1e-12)  # batched = single run


def test_float32_error():
    results = {}
    for dtype in (jnp.float32, jnp.float64):
        params, inputs, state = spinning_dumbbell(6, dtype=dtype)
        final, _ = simulate_chunks(params, inputs, state, 2e-3, 1)
        assert final.r.dtype == dtype
        results[dtype] = np.asarray(final.r, np.float64)
    err = np.abs(results[jnp.float32] - results[jnp.float64]).max() / np.abs(results[jnp.float64]).max()
    print(f"float32 vs float64 node positions after 250 RK4 steps: relative error {err:.3g}")
    assert err < 1e-4                                                  # ~250 steps × eps32 ≈ 3e-5 worst case
