"""Bad inputs to the Stewart platform, the flexible links' modal and reduced models and the orbit frames that
returned numbers or failed deep inside (an audit): gas legs shorter than their gas column (negative volumes and
pressures), a hexapod of negative or zero radius, a zero initial quaternion (NaN), states of another length, float
mode and segment counts, 2-vectors in the orbit frames. Each error names the argument or field; each touched
function is also checked on a valid call against a closed form or a second code path. Also the fixes found on
the way: `reduced.expand` failed on VALID input for a model with no rigid coordinates (a clamped beam), and
`libration_angles` / the linear `lvlh_acceleration` indexed rows instead of components of a (..., 3) batch."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.linalg

from jaxsoa.systems import orbit
from jaxsoa.systems.flexible import modal, reduced, rfem
from jaxsoa.systems.stewart import dynamics as sd
from jaxsoa.systems.stewart import geometry as st
from sims import stewart_gas as sg
from tests.systems.test_flexible import UNIT, clamped_beam


@pytest.fixture(scope="module")
def platform():
    return sg.build()


# ---------------------------------------------------------------------------------------------
# Stewart platform

@pytest.mark.parametrize("length", [(-1.0, 1.4, 1.4), (0.0, 1.4, 1.4), (0.5, 1.4, 1.4), (np.nan, 1.4, 1.4),
                                    (1.4, 1.4)])
def test_gas_springs_refuse_impossible_lengths(platform, length):
    """The gas column l₁ = l₀ + (l − l_mid) vanishes at l = 0.8 m here: shorter legs gave negative volumes."""
    with pytest.raises(ValueError, match=r"argument 'gas_leg_length'"):
        sd.gas_springs(platform, jnp.asarray(length))


def test_gas_springs_match_boyle_and_poses_out_of_stroke_are_still_flagged(platform):
    """p V = const by hand (individual tanks): V = V₀ + A (l₀ + l − l_mid), p = p_abs,mid V_mid / V − p_amb.
    `inverse_dynamics` at a pose whose gas legs are shorter than that (0.7 m) flags it (NaN force), no raise."""
    length = np.array([1.2, 1.4, 1.7])
    area, v0, l0 = float(platform.piston_area), float(platform.tank_volume), np.asarray(platform.gas_length_mid)
    volume = v0 + area * (l0 + length - np.asarray(platform.leg_length_mid))
    p_abs_mid = float(platform.precharge + platform.ambient_pressure)
    pressure = p_abs_mid * (v0 + area * l0) / volume - float(platform.ambient_pressure)
    gas = sd.gas_springs(platform, jnp.asarray(length))
    np.testing.assert_allclose(gas.volume, volume, rtol=1e-12)
    np.testing.assert_allclose(gas.force, pressure * area, rtol=1e-12)
    assert float(gas.pressure[1]) == pytest.approx(float(platform.precharge), rel=1e-12)    # the mid length
    low = sd.inverse_dynamics(platform, jnp.array([0.0, 0.0, 0.9]), jnp.eye(3), jnp.zeros(6), jnp.zeros(6))
    assert not bool(low.status.reachable) and bool(jnp.all(jnp.isnan(low.force)))


@pytest.mark.parametrize("kwargs, name", [
    (dict(radius=-1.0), "radius"), (dict(radius=0.0), "radius"), (dict(radius=np.nan), "radius"),
    (dict(gas_radius=0.0), "gas_radius"), (dict(short_edge=1.8), "short_edge"), (dict(short_edge=0.0), "short_edge"),
    (dict(radius=jnp.ones(2)), "radius"), (dict(center=jnp.zeros(2)), "center")])
def test_hexapod_points_refuse_bad_dimensions(kwargs, name):
    args = dict(radius=1.0, short_edge=0.3, gas_radius=0.9, center=jnp.zeros(3)) | kwargs
    with pytest.raises(ValueError, match=rf"argument '{name}'"):
        st.hexapod_points(**args)


def test_hexapod_points_geometry():
    """Closed form: six joints on the circle, short edges A6A1 = A2A3 = d, gas joints at r_P (cos, sin)(60° +
    k 120°), all in the plane of the centre; the traced (jit) call agrees."""
    center = jnp.array([0.1, -0.2, 0.3])
    points = np.asarray(st.hexapod_points(1.2, 0.3, 0.9, center))
    rel = points - np.asarray(center)
    np.testing.assert_allclose(np.linalg.norm(rel[:6], axis=1), 1.2, rtol=1e-12)
    np.testing.assert_allclose([np.linalg.norm(rel[5] - rel[0]), np.linalg.norm(rel[2] - rel[1])], 0.3, rtol=1e-12)
    gas = np.radians(60.0 + 120.0 * np.arange(3))
    np.testing.assert_allclose(rel[6:], 0.9 * np.stack([np.cos(gas), np.sin(gas), np.zeros(3)], 1), atol=1e-12)
    np.testing.assert_allclose(jax.jit(st.hexapod_points)(1.2, 0.3, 0.9, center), points, rtol=1e-12)


@pytest.mark.parametrize("quat0", [(0.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 2.0), (np.nan, 0.0, 0.0, 1.0)])
def test_simulate_refuses_a_non_unit_quaternion(platform, quat0):
    with pytest.raises(ValueError, match=r"argument 'quat0'"):
        sd.simulate(platform, jnp.asarray(sg.HOME), jnp.asarray(quat0), jnp.zeros(6),
                    lambda t, p, R, u: jnp.zeros(6), 0.01, 1)


def test_simulate_reads_a_unit_quaternion(platform):
    """Yawed by 0.3 rad (quat (0, 0, sin 0.15, cos 0.15)): the first state's leg lengths |p + R_z a − b| by hand."""
    yaw = 0.3
    trajectory = sd.simulate(platform, jnp.asarray(sg.HOME), jnp.array([0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2)]),
                             jnp.zeros(6), lambda t, p, R, u: jnp.zeros(6), 0.01, 1)
    c, s = np.cos(yaw), np.sin(yaw)
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    length = np.linalg.norm(np.asarray(sg.HOME) + np.asarray(platform.platform_points) @ R.T
                            - np.asarray(platform.base_points), axis=1)
    np.testing.assert_allclose(trajectory.status.length[0], length, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# flexible links: assumed modes and the Ritz reduction

@pytest.mark.parametrize("n_modes, error", [(4.0, TypeError), (2.5, TypeError), (True, TypeError), (0, ValueError)])
def test_mode_counts_must_be_ints(n_modes, error):
    with pytest.raises(error, match=r"argument 'n_modes'"):
        modal.hub_beam_modes(rfem.Beam(n_segments=1, **UNIT), n_modes, hub_inertia=1.0)
    with pytest.raises(error, match=r"argument 'n_modes'"):
        reduced.reduce(clamped_beam(4), n_modes, {0: rfem.Beam(n_segments=4, **UNIT)})


@pytest.mark.parametrize("n_segments, error", [(4.0, TypeError), (2.5, TypeError), (0, ValueError)])
def test_segment_counts_must_be_ints(n_segments, error):
    with pytest.raises(error, match=r"field 'n_segments'"):
        modal.hub_beam_modes(rfem.Beam(n_segments=n_segments, **UNIT), 2, hub_inertia=1.0)
    with pytest.raises(error, match=r"field 'n_segments'"):
        reduced.reduce(clamped_beam(4), 2, {0: rfem.Beam(n_segments=n_segments, **UNIT)})


def _quad(f, length):
    return scipy.integrate.quad(f, 0.0, length, epsabs=1e-13, epsrel=1e-13)[0]


def _modal_reference(length, rho, EI, beta, hub_inertia, r, m):
    """J₀, b, M_ee, K, K_G, C of the module doc by adaptive quadrature (scipy), φ_i = (x/L)^(i+1)."""
    phi = [lambda x, i=i: (x / length) ** (i + 1) for i in range(1, m + 1)]
    d_phi = [lambda x, i=i: (i + 1) * x ** i / length ** (i + 1) for i in range(1, m + 1)]
    dd_phi = [lambda x, i=i: (i + 1) * i * x ** (i - 1) / length ** (i + 1) for i in range(1, m + 1)]

    def outboard(x):
        return _quad(lambda xi: rho * (r + xi), length) - _quad(lambda xi: rho * (r + xi), x)

    pairs = [(i, j) for i in range(m) for j in range(m)]
    M = np.array([_quad(lambda x, i=i, j=j: rho * phi[i](x) * phi[j](x), length) for i, j in pairs]).reshape(m, m)
    K = np.array([_quad(lambda x, i=i, j=j: EI * dd_phi[i](x) * dd_phi[j](x), length) for i, j in pairs]).reshape(m, m)
    K_G = np.array([_quad(lambda x, i=i, j=j: outboard(x) * d_phi[i](x) * d_phi[j](x), length)
                    for i, j in pairs]).reshape(m, m)
    b = np.array([_quad(lambda x, i=i: rho * (r + x) * phi[i](x), length) for i in range(m)])
    J0 = hub_inertia + _quad(lambda x: rho * (r + x) ** 2, length)
    return J0, b, M, K, K_G, beta * K


def test_modal_functions_match_quadrature():
    """Every modal function at a random state against the module doc's formulas with integrals by scipy's
    adaptive quadrature (not the module's Gauss–Legendre rule); an np.int64 mode count is an int. (The hub
    torque's sign was flipped in `forward_dynamics_modal` before: −b.at[0].add(τ) negated τ too.)"""
    beam = rfem.Beam(length=2.0, bending_stiffness=50.0, mass_per_length=1.5, n_segments=1, damping=0.01)
    mm = modal.hub_beam_modes(beam, np.int64(2), hub_inertia=0.5, hub_radius=0.3)
    J0, b, M, K, K_G, C = _modal_reference(2.0, 1.5, 50.0, 0.01, 0.5, 0.3, 2)
    for got, want in ((mm.J0, J0), (mm.b, b), (mm.M_ee, M), (mm.K, K), (mm.K_G, K_G), (mm.C, C)):
        np.testing.assert_allclose(got, want, rtol=1e-10)
    rng = np.random.default_rng(4)
    q, v = rng.normal(0.0, 0.3, 3), rng.normal(0.0, 0.3, 3)
    eta, theta_dot, eta_dot, A = q[1:], v[0], v[1:], M - K_G
    mass = np.block([[np.array([[J0 + eta @ A @ eta]]), b[None]], [b[:, None], M]])
    bias = np.concatenate([[2 * theta_dot * eta @ A @ eta_dot], (K - theta_dot ** 2 * A) @ eta + C @ eta_dot])
    q, v = jnp.asarray(q), jnp.asarray(v)
    np.testing.assert_allclose(modal.modal_mass_matrix(mm, q), mass, rtol=1e-10)
    np.testing.assert_allclose(modal.modal_bias(mm, q, v), bias, rtol=1e-10)
    np.testing.assert_allclose(modal.forward_dynamics_modal(mm, q, v, jnp.asarray(0.7)),
                               np.linalg.solve(mass, np.array([0.7, 0.0, 0.0]) - bias), rtol=1e-9)
    np.testing.assert_allclose(modal.modal_driven_dynamics(mm, q[1:], v[1:], v[0], jnp.asarray(0.4)),
                               np.linalg.solve(M, -b * 0.4 - (K - theta_dot ** 2 * A) @ eta - C @ eta_dot), rtol=1e-9)
    np.testing.assert_allclose(modal.modal_energy(mm, q, v), 0.5 * np.asarray(v) @ mass @ np.asarray(v)
                               + 0.5 * eta @ K @ eta, rtol=1e-10)
    np.testing.assert_allclose(modal.modal_tip_deflection(mm, q[1:]), np.sum(eta), rtol=1e-12)     # φ_i(L) = 1
    np.testing.assert_allclose(modal.rotating_frequencies(mm, jnp.asarray(1.5)),
                               np.sqrt(scipy.linalg.eigh(K - 1.5 ** 2 * A, M, eigvals_only=True)), rtol=1e-9)


@pytest.mark.parametrize("call, name", [
    (lambda mm, z: modal.modal_mass_matrix(mm, z(2)), "q"),
    (lambda mm, z: modal.modal_bias(mm, z(3), z(4)), "v"),
    (lambda mm, z: modal.forward_dynamics_modal(mm, z(3), z(3), z(2)), "tau_hub"),
    (lambda mm, z: modal.forward_dynamics_modal(mm, z(4), z(3), z()), "q"),
    (lambda mm, z: modal.modal_driven_dynamics(mm, z(3), z(2), z(), z()), "eta"),
    (lambda mm, z: modal.modal_driven_dynamics(mm, z(2), z(1), z(), z()), "eta_dot"),
    (lambda mm, z: modal.modal_driven_dynamics(mm, z(2), z(2), z(2), z()), "theta_dot"),
    (lambda mm, z: modal.modal_energy(mm, z(3), z(2)), "v"),
    (lambda mm, z: modal.modal_tip_deflection(mm, z(3)), "eta"),
    (lambda mm, z: modal.rotating_frequencies(mm, z(2)), "spin_rate")])
def test_modal_states_of_another_length_are_named(call, name):
    mm = modal.hub_beam_modes(rfem.Beam(n_segments=1, **UNIT), 2, hub_inertia=1.0)
    with pytest.raises(ValueError, match=rf"argument '{name}' has shape"):
        call(mm, lambda *shape: jnp.zeros(shape))


def test_reduction_of_a_clamped_beam():
    """No rigid coordinates (q_r = η): expand failed on valid input (an empty float index). η = e₁ is
    w = (x/L)²: θ_i = w'(ξ_i) − w'(ξ_{i−1}) = 2 (ξ_i − ξ_{i−1}) / L² with ξ = (0, h, 2h, L − h/4). With a complete
    basis (m = N) the reduced dynamics are the chain's: T v̇_r = ABA's accelerations under τ = T⁻ᵀ τ_r."""
    n = 3
    fm, beams = clamped_beam(n), {0: rfem.Beam(n_segments=n, **UNIT)}
    rm = reduced.reduce(fm, 2, beams)
    h = 1.0 / n
    xi = np.array([0.0, h, 2 * h, 1.0 - h / 4])
    q, v = reduced.expand(rm, jnp.array([1.0, 0.0]), jnp.array([0.0, 2.0]))
    np.testing.assert_allclose(q, 2 * np.diff(xi), rtol=1e-12)
    np.testing.assert_allclose(v, 2 * 3 * np.diff(xi ** 2), rtol=1e-12)            # η₂: w' = 3 x² (L = 1)
    full = reduced.reduce(fm, n, beams)
    rng = np.random.default_rng(5)
    q_r, v_r, tau_r = (jnp.asarray(rng.normal(0.0, 0.2, n)) for _ in range(3))
    q, v = reduced.expand(full, q_r, v_r)
    chain = rfem.forward_dynamics(fm, q, v, jnp.linalg.solve(full.T.T, tau_r))
    np.testing.assert_allclose(full.T @ reduced.forward_dynamics_reduced(full, q_r, v_r, tau_r), chain,
                               rtol=1e-8, atol=1e-8 * float(jnp.max(jnp.abs(chain))))


def test_reduced_states_of_another_length_are_named():
    rm = reduced.reduce(clamped_beam(3), 2, {0: rfem.Beam(n_segments=3, **UNIT)})
    z = jnp.zeros(2)
    for call, name in ((lambda: reduced.expand(rm, jnp.zeros(3), z), "q_r"),
                       (lambda: reduced.expand(rm, z, jnp.zeros(1)), "v_r"),
                       (lambda: reduced.forward_dynamics_reduced(rm, z, z, jnp.zeros(3)), "tau_r")):
        with pytest.raises(ValueError, match=rf"argument '{name}' has shape"):
            call()
    with pytest.raises(ValueError, match=r"argument 'n_modes' = 4 exceeds"):
        reduced.reduce(clamped_beam(3), 4, {0: rfem.Beam(n_segments=3, **UNIT)})


# ---------------------------------------------------------------------------------------------
# orbit frames

ORBIT = orbit.circular_orbit(a=7.0e6)
N = float(np.sqrt(orbit.EARTH_MU / 7.0e6 ** 3))                 # mean motion; at t = 0: f = 0, LVLH = orbital axes


@pytest.mark.parametrize("call, name", [
    (lambda x, y: orbit.orbital_to_lvlh(ORBIT, 0.0, x, y), "r"),
    (lambda x, y: orbit.orbital_to_lvlh(ORBIT, 0.0, y, x), "v"),
    (lambda x, y: orbit.lvlh_to_orbital(ORBIT, 0.0, x, y), "r_lvlh"),
    (lambda x, y: orbit.lvlh_to_orbital(ORBIT, 0.0, y, x), "v_lvlh"),
    (lambda x, y: orbit.eci_to_orbital(ORBIT, 0.0, x, y), "r_eci"),
    (lambda x, y: orbit.eci_to_orbital(ORBIT, 0.0, y, x), "v_eci"),
    (lambda x, y: orbit.orbital_to_eci(ORBIT, 0.0, x, y), "r"),
    (lambda x, y: orbit.orbital_to_eci(ORBIT, 0.0, y, x), "v"),
    (lambda x, y: orbit.lvlh_acceleration(ORBIT, 0.0, x, y), "r_lvlh"),
    (lambda x, y: orbit.lvlh_acceleration(ORBIT, 0.0, y, x, linear=False), "v_lvlh"),
    (lambda x, y: orbit.gravity_gradient_acceleration(ORBIT, 0.0, x), "r"),
    (lambda x, y: orbit.relative_two_body_acceleration(ORBIT, 0.0, x), "r"),
    (lambda x, y: orbit.libration_angles(ORBIT, 0.0, x), "chord"),
    (lambda x, y: orbit.gravity_gradient_torque(ORBIT, 0.0, jnp.eye(2)), "inertia"),
    (lambda x, y: orbit.gravity_gradient_torque(ORBIT, 0.0, jnp.eye(3), x), "radial")])
def test_orbit_frames_refuse_two_vectors(call, name):
    with pytest.raises(ValueError, match=rf"argument '{name}' has shape \(2,\), expected \(\.\.\., 3\)|"
                                         rf"argument '{name}' has shape \(2, 2\)"):
        call(jnp.ones(2), jnp.ones(3))


def test_orbit_frames_closed_forms():
    """Circular orbit at t = 0 (f = 0): C = 1, ω = n z, R = (a, 0, 0), V = (0, n a, 0); tidal field
    n² (2x, −y, −z); Clohessy–Wiltshire; g(R + r) − g(R) by hand; torque 3 n² i × (J i). Batches of 2."""
    r, v = np.array([[10.0, -20.0, 5.0], [-3.0, 7.0, 2.0]]), np.array([[0.1, 0.2, -0.3], [0.5, -0.4, 0.2]])
    cross = np.stack([-N * r[:, 1], N * r[:, 0], np.zeros(2)], 1)        # ω × r
    r_l, v_l = orbit.orbital_to_lvlh(ORBIT, 0.0, jnp.asarray(r), jnp.asarray(v))
    np.testing.assert_allclose(r_l, r, rtol=1e-12)
    np.testing.assert_allclose(v_l, v - cross, rtol=1e-12)
    r_o, v_o = orbit.lvlh_to_orbital(ORBIT, 0.0, jnp.asarray(r), jnp.asarray(v))
    np.testing.assert_allclose(r_o, r, rtol=1e-12)
    np.testing.assert_allclose(v_o, v + cross, rtol=1e-12)
    R, V = np.array([7.0e6, 0.0, 0.0]), np.array([0.0, N * 7.0e6, 0.0])
    r_e, v_e = orbit.orbital_to_eci(ORBIT, 0.0, jnp.asarray(r[0]), jnp.asarray(v[0]))
    np.testing.assert_allclose(r_e, R + r[0], rtol=1e-12)
    np.testing.assert_allclose(v_e, V + v[0], rtol=1e-12)
    np.testing.assert_allclose(orbit.eci_to_orbital(ORBIT, 0.0, r_e, v_e)[1], v[0], rtol=1e-9)
    np.testing.assert_allclose(orbit.gravity_gradient_acceleration(ORBIT, 0.0, jnp.asarray(r)),
                               N ** 2 * r * np.array([2.0, -1.0, -1.0]), rtol=1e-12)

    def g(x):
        return -orbit.EARTH_MU * x / np.linalg.norm(x) ** 3

    np.testing.assert_allclose(orbit.relative_two_body_acceleration(ORBIT, 0.0, jnp.asarray(r[0])),
                               g(R + r[0]) - g(R), rtol=1e-9)
    inertia, radial = np.diag([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 0.0]) / np.sqrt(2)
    np.testing.assert_allclose(orbit.gravity_gradient_torque(ORBIT, 0.0, jnp.asarray(inertia), jnp.asarray(radial)),
                               3 * N ** 2 * np.cross(radial, inertia @ radial), rtol=1e-12)
    # no radial given: i = x, and J i ∥ i for a diagonal J -> no torque
    np.testing.assert_allclose(orbit.gravity_gradient_torque(ORBIT, 0.0, jnp.asarray(inertia)), 0.0, atol=1e-20)


def test_batched_libration_and_lvlh_acceleration_use_components():
    """A (2, 3) batch: the angles of each chord (θ = π/4, φ = 0 and θ = 0, φ = π/4), and Clohessy–Wiltshire
    ẍ = 3n²x + 2nẏ, ÿ = −2nẋ, z̈ = −n²z per row (both indexed rows of the batch before)."""
    theta, phi = orbit.libration_angles(ORBIT, 0.0, jnp.array([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]]))
    np.testing.assert_allclose(theta, [np.pi / 4, 0.0], atol=1e-12)
    np.testing.assert_allclose(phi, [0.0, np.pi / 4], atol=1e-12)
    r, v = np.array([[10.0, -20.0, 5.0], [-3.0, 7.0, 2.0]]), np.array([[0.1, 0.2, -0.3], [0.5, -0.4, 0.2]])
    cw = np.stack([3 * N ** 2 * r[:, 0] + 2 * N * v[:, 1], -2 * N * v[:, 0], -N ** 2 * r[:, 2]], 1)
    batch = orbit.lvlh_acceleration(ORBIT, 0.0, jnp.asarray(r), jnp.asarray(v))      # rank promotion 'raise'
    np.testing.assert_allclose(batch, cw, rtol=1e-12, atol=1e-12 * np.abs(cw).max())
    np.testing.assert_allclose(orbit.lvlh_acceleration(ORBIT, 0.0, jnp.asarray(r[1]), jnp.asarray(v[1])), cw[1],
                               rtol=1e-12)


def test_batched_frame_maps_equal_their_rows():
    """(2, 3) batches under `jax_numpy_rank_promotion='raise'` (the orbit's (3,) vectors are broadcast
    explicitly): each row equals the unbatched call."""
    r, v = jnp.asarray([[10.0, -20.0, 5.0], [-3.0, 7.0, 2.0]]), jnp.asarray([[0.1, 0.2, -0.3], [0.5, -0.4, 0.2]])
    for fn in (orbit.eci_to_orbital, orbit.orbital_to_eci, orbit.orbital_to_lvlh, orbit.lvlh_to_orbital):
        rows = [fn(ORBIT, 30.0, r[k], v[k]) for k in range(2)]
        for got, want in zip(fn(ORBIT, 30.0, r, v), zip(*rows, strict=True), strict=True):
            np.testing.assert_allclose(got, np.stack(want), rtol=1e-14, err_msg=fn.__name__)
    for linear in (True, False):
        rows = np.stack([orbit.lvlh_acceleration(ORBIT, 30.0, r[k], v[k], linear=linear) for k in range(2)])
        np.testing.assert_allclose(orbit.lvlh_acceleration(ORBIT, 30.0, r, v, linear=linear), rows, rtol=1e-12)
    rows = np.stack([orbit.relative_two_body_acceleration(ORBIT, 30.0, r[k]) for k in range(2)])
    np.testing.assert_allclose(orbit.relative_two_body_acceleration(ORBIT, 30.0, r), rows, rtol=1e-12)


def test_flexible_model_without_beams_is_the_rigid_model():
    """No beams: no deformation joints (an empty index was a float array before, and indexing failed);
    Q_e = 0, the dynamics are the rigid model's ABA and the energy its ½ vᵀ M v + potential."""
    import jaxsoa
    from tests.helpers.trees import random_tree

    tree = random_tree(np.random.default_rng(0), 3, link_types=[1, 1, 2])
    fm = rfem.flexible_model(tree, {}, dtype=jnp.float64)
    rng = np.random.default_rng(1)
    q, v, tau = (jnp.asarray(rng.normal(size=3)) for _ in range(3))
    np.testing.assert_array_equal(rfem.elastic_forces(fm, q, v), np.zeros(3))
    np.testing.assert_allclose(rfem.forward_dynamics(fm, q, v, tau), jaxsoa.aba(fm.model, q, v, tau), rtol=1e-13)
    M = jaxsoa.crba(fm.model, q)
    g = jaxsoa.rnea(fm.model, q, jnp.zeros(3), jnp.zeros(3))                     # ∂U/∂q = g(q)
    energy = jax.grad(lambda q: rfem.mechanical_energy(fm, q, v))(q)
    np.testing.assert_allclose(energy, jax.grad(lambda q: 0.5 * v @ jaxsoa.crba(fm.model, q) @ v)(q) + g,
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(rfem.mechanical_energy(fm, q, jnp.zeros(3)) - rfem.mechanical_energy(fm, q, v),
                               -0.5 * v @ M @ v, rtol=1e-12)
