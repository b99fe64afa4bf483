"""Bad inputs to the model builders and the functions that take a model or a tree without going through an
entry point: a model dtype that would truncate (int) or cannot hold the checks' tolerances (float16), fields
whose interface counts disagree, a traced parent that is not a tree (finite wrong numbers before: now
NaN-marked), `unroll`, `stack_models` of one model, `path_matrix` of a model, `neutral(None)` and a bad PRNG
key. Each error names the argument or field (docs/user_guide.md, "Errors and checks")."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsoa
from jaxsoa.multibody.traversal import path_matrix, tree_traversal
from tests.multibody.test_build import valid_fields


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.float16, jnp.bfloat16, jnp.complex64, "bogus"])
def test_build_model_rejects_non_model_dtypes(dtype):
    with pytest.raises(TypeError, match="argument 'dtype' must be float32 or float64"):
        jaxsoa.build_model(**valid_fields(), dtype=dtype)


def test_build_model_field_shapes():
    fields = valid_fields()
    with pytest.raises(TypeError, match="field 'joint_types' must be a sequence"):
        jaxsoa.build_model(**{**fields, "joint_types": None})
    two = np.stack([fields["mass"], fields["mass"]], 1)                   # two interfaces per link
    with pytest.raises(ValueError, match="field 'com' has shape \\(4, 3\\) \\(one interface per link\\), but 'mass'"):
        jaxsoa.build_model(**{**fields, "mass": two})
    with pytest.raises(ValueError, match="field 'mass' is not a rectangular array"):
        jaxsoa.build_model(**{**fields, "mass": [[1.0], [1.0, 2.0], [1.0], [1.0]]})
    for unroll in (0, -1, 2.5, "x", True):
        with pytest.raises(ValueError, match="argument 'unroll' must be an int ≥ 1"):
            jaxsoa.build_model(**fields, unroll=unroll)
    with pytest.raises(ValueError, match="argument 'unroll'"):
        tree_traversal(np.array([-1, 0]), unroll=0)


def test_with_parent_checks_the_length_and_marks_a_traced_non_tree():
    model = jaxsoa.build_model(**valid_fields(), dtype=jnp.float64)
    with pytest.raises(ValueError, match="argument 'parent' has shape \\(3,\\), expected \\(4,\\)"):
        model.with_parent(np.array([-1, 0, 1]))
    q, v = jaxsoa.neutral(model), jnp.zeros(model.nv)
    rebuilt = jax.jit(lambda p: jaxsoa.aba(model.with_parent(p), q, v, v))
    assert np.all(np.isfinite(rebuilt(jnp.asarray([-1, 0, 1, 1]))))
    np.testing.assert_allclose(rebuilt(jnp.asarray([-1, 0, 1, 1])), jaxsoa.aba(model, q, v, v), rtol=1e-12)
    for bad in ([-1, 0, 5, 1], [-1, 2, 1, 1], [-1, 0, 2, 1], [-1, -1, 1, 1]):   # range, cycle, self, two roots
        assert np.all(np.isnan(rebuilt(jnp.asarray(bad)))), bad


def test_functions_without_an_entry_point_check_their_model():
    model = jaxsoa.build_model(**valid_fields(), dtype=jnp.float64)
    with pytest.raises(TypeError, match="stack_models: expected a sequence of jaxsoa Models, got a single Model"):
        jaxsoa.stack_models(model)
    with pytest.raises(ValueError, match="models\\[0\\] is already a stack"):
        jaxsoa.stack_models([jaxsoa.stack_models([model, model])] * 2)
    with pytest.raises(ValueError, match="argument 'parent' is empty"):
        tree_traversal(np.zeros(0, np.int32))
    with pytest.raises(TypeError, match="argument 'model' must be a jaxsoa Model"):
        jaxsoa.neutral(None)
    with pytest.raises(TypeError, match="argument 'model' must be a jaxsoa Model"):
        jaxsoa.random_configuration(None, jax.random.key(0))
    with pytest.raises(TypeError, match="argument 'key' must be a JAX PRNG key"):
        jaxsoa.random_configuration(model, 0)
    assert jaxsoa.random_configuration(model, jax.random.PRNGKey(0)).shape == (model.nq,)
    assert np.array_equal(path_matrix(model), path_matrix(model.traversal))
    with pytest.raises(TypeError, match="argument 'trav' must be a Traversal or a Model"):
        path_matrix(np.array([-1, 0]))


def test_static_frames_without_inertia_load_and_moving_ones_do_not():
    """nv = 0 (welded frames only, as a static MJCF scene) needs no inertia; one moving joint does."""
    fields = {**valid_fields(), "mass": np.zeros(4), "com": np.zeros((4, 3)), "inertia_com": np.zeros((4, 3, 3))}
    static = jaxsoa.build_model(**{**fields, "joint_types": [jaxsoa.JointType.FIXED] * 4}, dtype=jnp.float64)
    assert static.nv == 0 and jaxsoa.aba(static, jnp.zeros(0), jnp.zeros(0), jnp.zeros(0)).shape == (0,)
    with pytest.raises(ValueError, match=r"fields 'mass' and 'inertia_com' are zero for every link"):
        jaxsoa.build_model(**fields)


def test_check_inertia_warns_instead_of_raising():
    """`check_inertia="warn"` loads a triangle-inequality violation (as Pinocchio does) with a warning naming
    the link; the default raises naming the option; negative masses raise either way."""
    fields = valid_fields()
    bad = np.array(fields["inertia_com"], float)
    bad[2] = np.diag([0.01, 0.01, 0.05])
    with pytest.raises(ValueError, match=r"link 'lower'.*triangle inequality.*check_inertia='warn'"):
        jaxsoa.build_model(**{**fields, "inertia_com": bad})
    with pytest.warns(UserWarning, match=r"link 'lower'.*triangle inequality"):
        model = jaxsoa.build_model(**{**fields, "inertia_com": bad}, check_inertia="warn", dtype=jnp.float64)
    np.testing.assert_array_equal(np.asarray(model.inertia_com[2, 0]), bad[2])
    with pytest.raises(ValueError, match=r"field 'mass' = -1.0 is negative"):
        jaxsoa.build_model(**{**fields, "mass": np.r_[1.0, -1.0, 1.0, 1.0]}, check_inertia="warn")
    with pytest.raises(ValueError, match=r"argument 'check_inertia' must be 'raise' or 'warn'"):
        jaxsoa.build_model(**{**fields, "inertia_com": bad}, check_inertia="off")
