"""Scaling-law predictions reproduce the seed's constants and worked values (T3, T4)."""

import pytest

from lmforge.pipeline.probes.scaling import (
    N_C,
    loss_from_compute,
    loss_from_params,
    loss_from_tokens,
    non_embedding_params,
    non_embedding_params_exact,
    scaling_prediction,
    training_compute_pf_days,
)


def test_loss_at_the_critical_parameter_count_is_one():
    assert loss_from_params(N_C) == pytest.approx(1.0)


def test_t4_worked_values():
    assert loss_from_params(1e9) == pytest.approx(2.3756, abs=1e-3)
    assert loss_from_tokens(1e10) == pytest.approx(2.2624, abs=1e-3)
    assert loss_from_compute(1.0) == pytest.approx(2.6581, abs=1e-3)


def test_more_parameters_data_or_compute_always_lower_the_predicted_loss():
    assert loss_from_params(2e6) < loss_from_params(1e6)
    assert loss_from_tokens(2e8) < loss_from_tokens(1e8)
    assert loss_from_compute(2e-3) < loss_from_compute(1e-3)


def test_gpt3_has_about_175_billion_non_embedding_parameters_t3():
    assert non_embedding_params(96, 12288) == 173_946_175_488
    assert non_embedding_params(96, 12288) == pytest.approx(175e9, rel=0.01)


def test_base_transformer_stack_count_and_exact_form_agree_when_d_ff_is_4d():
    assert non_embedding_params(6, 512) == 18_874_368
    assert non_embedding_params_exact(6, 512, d_attn=512, d_ff=2048) == 18_874_368
    assert non_embedding_params_exact(6, 512, d_attn=512, d_ff=1024) < 18_874_368


def test_non_positive_inputs_are_rejected():
    with pytest.raises(ValueError, match="n_params"):
        loss_from_params(0)


def test_prediction_for_a_run_reports_all_three_laws_and_the_limiting_one():
    pred = scaling_prediction(n_layer=2, d_model=64, n_tokens=1e6)
    assert pred["non_embedding_params"] == 98_304
    assert pred["compute_pf_days"] == pytest.approx(training_compute_pf_days(98_304, 1e6))
    assert pred["compute_pf_days"] == pytest.approx(6 * 98_304 * 1e6 / 8.64e19)
    assert pred["loss_from_params"] == pytest.approx(loss_from_params(98_304))
    assert pred["limiting_loss"] == max(pred["loss_from_params"], pred["loss_from_tokens"])


def test_measured_loss_is_reported_against_the_limiting_prediction():
    pred = scaling_prediction(n_layer=2, d_model=64, n_tokens=1e6, measured_loss=9.0)
    assert pred["measured_loss"] == 9.0
    assert pred["measured_minus_limiting"] == pytest.approx(9.0 - pred["limiting_loss"])
    assert "measured_loss" not in scaling_prediction(n_layer=2, d_model=64, n_tokens=1e6)
