"""Tether initial states at build (`straight_state`): a slack tether and coincident ends raise
`ValueError` naming the arguments; valid and explicitly allowed states give the same numbers as
the plain interpolation."""

import numpy as np
import pytest

from jaxsoa.systems.tether.fem import SLACK_TOLERANCE, straight_state, tether_params

PARAMS = tether_params(0.5, 100.0, 0.0, 10.0, 4)


def test_slack_tether_names_the_ends_and_s():
    with pytest.raises(ValueError, match="slack") as info:
        straight_state(PARAMS, [0.0, 0.0, 0.0], [3.8, 0.0, 0.0], [2.0, 6.0])
    assert all(name in str(info.value) for name in ("r_M", "r_P", "s_M − s_P", "allow_slack"))


def test_coincident_ends():
    for allow_slack in (False, True):
        with pytest.raises(ValueError, match="r_P and r_M coincide"):
            straight_state(PARAMS, [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [2.0, 6.0], allow_slack=allow_slack)


@pytest.mark.parametrize("name", ["r_P", "r_M", "v_P", "v_M", "s_dot"])
def test_non_finite_or_misshaped_arguments(name):
    args = dict(r_P=[0.0, 0.0, 0.0], r_M=[4.2, 0.0, 0.0], v_P=[0.0, 0.0, 0.0], v_M=[0.0, 0.0, 0.0], s_dot=[0.0, 0.0])
    bad = list(args[name])
    with pytest.raises(ValueError, match=rf"{name} .*not finite"):
        straight_state(PARAMS, s=[2.0, 6.0], **(args | {name: [*bad[:-1], np.nan]}))
    with pytest.raises(ValueError, match=rf"{name} must have shape"):
        straight_state(PARAMS, s=[2.0, 6.0], **(args | {name: [*bad, 0.0]}))


def test_valid_states_keep_their_numbers():
    """Taut, unstretched up to rounding (39.8 − 0.6 vs 49.2 − 10) and allowed-slack states are the
    linear interpolation of the ends, as before."""
    sbar = np.linspace(0.0, 1.0, 5)[:, None]
    for r_M, s, allow in (([4.2, 0.0, 0.0], [2.0, 6.0], False), ([39.8, 0.0, 0.0], [10.0, 10.0 + 39.2], False),
                          ([3.8, 0.0, 0.0], [2.0, 6.0], True)):
        r_P = [0.6, 0.0, 0.0] if r_M[0] == 39.8 else [0.0, 0.0, 0.0]
        state = straight_state(PARAMS if s[1] <= 10.0 else tether_params(0.5, 100.0, 0.0, 60.0, 4), r_P, r_M, s,
                               v_M=[0.0, 1.0, 0.0], allow_slack=allow)
        np.testing.assert_array_equal(np.asarray(state.r), (1 - sbar) * np.asarray(r_P) + sbar * np.asarray(r_M))
        np.testing.assert_array_equal(np.asarray(state.v), sbar * np.array([0.0, 1.0, 0.0]))
    assert SLACK_TOLERANCE == 1e-9
