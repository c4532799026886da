"""The cheaper dropout sampler must have nn.Dropout's distribution: rate, scale, lanes, gradient."""

import math

import pytest

torch = pytest.importorskip("torch")  # the [neural] extra

from gandalf_xmc.models.dropout import FastDropout, fast_dropout, keep_mask


def test_drop_rate_is_p_in_every_lane_of_a_draw():
    torch.manual_seed(0)
    n, p = 1 << 22, 0.2
    keep = keep_mask((n,), p)
    sd = math.sqrt(p * (1 - p) / (n / 4))  # binomial spread of one lane's rate
    # each 64-bit draw feeds four consecutive elements; a biased lane (e.g. a sign bit that is
    # always 0) would show a rate far from p at its position
    for lane in range(4):
        rate = 1.0 - keep[lane::4].float().mean().item()
        assert abs(rate - p) < 5 * sd, (lane, rate)


def test_masks_of_consecutive_calls_are_independent():
    torch.manual_seed(1)
    a, b = keep_mask((1 << 20,), 0.5), keep_mask((1 << 20,), 0.5)
    both = (a & b).float().mean().item()
    assert abs(both - 0.25) < 5 * math.sqrt(0.25 * 0.75 / (1 << 20))


def test_kept_elements_are_scaled_by_their_exact_keep_probability_and_the_mean_is_kept():
    torch.manual_seed(2)
    x = torch.full((1 << 21,), 3.0)
    y = fast_dropout(x, 0.3)
    keep_probability = 1.0 - round(0.3 * 65536) / 65536
    kept = y != 0
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 3.0 / keep_probability))
    n = x.numel()
    assert abs(y.mean().item() - 3.0) < 5 * 3.0 * math.sqrt(0.3 / (0.7 * n))  # unbiased: E[y] = x


def test_gradient_is_the_same_mask_and_scale():
    torch.manual_seed(3)
    x = torch.randn(64, 48, 5, requires_grad=True)
    y = fast_dropout(x, 0.2)
    (y * 2.0).sum().backward()
    expected = torch.where(y != 0, 2.0 / (1.0 - round(0.2 * 65536) / 65536), 0.0)
    torch.testing.assert_close(x.grad, expected)


def test_seeded_and_identity_outside_training():
    x = torch.randn(32, 16)
    torch.manual_seed(4)
    a = fast_dropout(x, 0.2)
    torch.manual_seed(4)
    torch.testing.assert_close(fast_dropout(x, 0.2), a)
    module = FastDropout(0.2).eval()
    assert module(x) is x
    assert fast_dropout(x, 0.0) is x
    assert torch.count_nonzero(fast_dropout(x, 1.0)) == 0
    with pytest.raises(ValueError, match="probability"):
        FastDropout(1.5)
