"""Class-prior (mixture-proportion) estimation for PU data: the Elkan–Noto estimator.

Reference: C. Elkan and K. Noto, *Learning classifiers from only positive and unlabeled data*, KDD 2008
(§2, Lemma 1 and estimator ``e1``).

Under SCAR (labeling ``s`` independent of ``x`` given ``y = 1``), a "non-traditional" classifier that
predicts *labeled vs unlabeled* satisfies ``g(x) = p(s=1 | x) = c · p(y=1 | x)`` with the label frequency
``c = p(s=1 | y=1)``. Where positives and negatives do not overlap, ``p(y=1 | x) = 1`` on the positives, so
``g(x) = c`` there, and ``e1`` estimates ``c`` as the mean of ``g`` over held-out *labeled* examples:

    ĉ = (1 / |V_L|) Σ_{x ∈ V_L} g(x).

From ``p(s=1) = α c`` the population prior is ``α̂ = (n_L / n) / ĉ``, and the prior of the unlabeled pool
follows from Bayes' rule, ``π̂ = α̂ (1 − ĉ) / (1 − α̂ ĉ)`` (equal to ``(n₊ − n_L)/(n − n_L)`` when ĉ and α̂
are exact).

Known limitation (Elkan & Noto §2; Bekker & Davis 2020): where the classes overlap, ``p(y=1|x) < 1`` on some
positives, so ``ĉ`` is biased low and ``α̂`` biased high. The plugin therefore reports the estimate next to
the true prior, and its error.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from contrastlab.platform.errors import ConfigError


@dataclass(frozen=True)
class PriorEstimate:
    """Result of :func:`elkan_noto`."""

    label_frequency: float
    """``ĉ``: estimated ``p(s=1 | y=1)``."""
    population_prior: float
    """``α̂ = (n_L/n) / ĉ``, clipped to ``(0, 1)``: the positive fraction of the whole set."""
    unlabeled_pool_prior: float
    """``π̂ = α̂(1 − ĉ)/(1 − α̂ĉ)``: the positive fraction among unlabeled examples."""
    n_holdout_labeled: int
    """Held-out labeled examples averaged by ``e1``."""
    method: str = "elkan_noto_e1"
    """Estimator name."""

    def as_dict(self) -> dict[str, float | int | str]:
        """JSON-friendly fields."""
        return asdict(self)


def _classifier(dim: int, hidden: int) -> nn.Module:
    if hidden <= 0:
        return nn.Linear(dim, 1)
    return nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))


def _fit(model: nn.Module, x: Tensor, s: Tensor, *, hidden: int, steps: int, lr: float, weight_decay: float) -> None:
    """Fit ``g`` to ``s ∈ {0, 1}`` by logistic (cross-entropy) loss, full batch."""
    target = s.to(x.dtype)

    def objective() -> Tensor:
        logits = model(x).squeeze(1)  # [n]
        reg = sum((p**2).sum() for n_, p in model.named_parameters() if n_.endswith("weight"))
        return F.binary_cross_entropy_with_logits(logits, target) + 0.5 * weight_decay * reg

    if hidden <= 0:  # convex: L-BFGS converges to the (unique) regularised optimum
        opt = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=steps, line_search_fn="strong_wolfe")

        def closure() -> Tensor:
            opt.zero_grad()
            loss = objective()
            loss.backward()
            return loss

        opt.step(closure)
        return
    opt2 = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        opt2.zero_grad()
        objective().backward()
        opt2.step()


def estimator_sample(observed: Tensor, max_unlabeled: int, seed: int) -> tuple[Tensor, int]:
    """``(indices, n_U)``: every labeled example (``observed == 1``) and a uniform random subsample of at most
    ``max_unlabeled`` of the ``n_U`` unlabeled ones, for :func:`elkan_noto` with ``unlabeled_total=n_U``."""
    observed = torch.as_tensor(observed).reshape(-1)
    unlabeled = torch.nonzero(observed != 1).flatten()
    gen = torch.Generator().manual_seed(int(seed))
    sub = unlabeled[torch.randperm(unlabeled.numel(), generator=gen)[:max_unlabeled]]
    return torch.cat([torch.nonzero(observed == 1).flatten(), sub]), int(unlabeled.numel())


def elkan_noto(
    features: Tensor,
    observed: Tensor,
    *,
    holdout_fraction: float = 0.2,
    hidden: int = 32,
    steps: int = 300,
    lr: float = 1e-2,
    weight_decay: float = 1e-4,
    seed: int = 0,
    unlabeled_total: int | None = None,
) -> PriorEstimate:
    """Estimate the label frequency and class priors with Elkan & Noto's ``e1`` (KDD 2008).

    Args:
        features: ``[n, d]`` inputs of the whole training set (labeled and unlabeled), e.g. frozen encoder
            features; they are standardised internally.
        observed: ``[n]`` observed labels, 1 for labeled positives and -1 for unlabeled.
        holdout_fraction: fraction of labeled and of unlabeled examples held out (stratified) for ``e1``.
        hidden: width of the one-hidden-layer MLP classifier (Adam); 0 fits a logistic regression (L-BFGS).
            The MLP is the default: ``c · p(y=1|x)`` plateaus at ``c`` on the positives, which a ReLU network
            can represent and a logistic model cannot (a logistic ``g`` biases ``ĉ`` low, measured ≈ −0.04).
        steps: L-BFGS iterations or Adam steps.
        lr: Adam learning rate (MLP only).
        weight_decay: L2 penalty on the weights.
        seed: seed of the held-out split and of the initialisation.
        unlabeled_total: the number of unlabeled examples that those in ``observed`` were drawn from uniformly
            (``None``: all of them were passed). Keeping every labeled example and a subsample of ``m`` of the
            ``n_U`` unlabeled ones multiplies the odds ``g/(1−g)`` by ``n_U/m``; the estimate undoes that
            (``logit g = logit g' + log(m/n_U)``) and uses the whole set's labeled share ``n_L/(n_L + n_U)``.
    """
    if not 0.0 < holdout_fraction < 1.0:
        raise ConfigError(f"prior estimator: holdout_fraction={holdout_fraction} is outside (0, 1)")
    x = torch.as_tensor(features).float().reshape(len(features), -1)  # [n, d]
    s = (torch.as_tensor(observed).reshape(-1) == 1).long()  # [n] 1 = labeled
    n, n_l = int(s.numel()), int(s.sum())
    if n_l < 2 or n_l == n:
        raise ConfigError(f"prior estimator needs >= 2 labeled and >= 1 unlabeled examples, got {n_l} of {n}")
    n_u_total = n - n_l if unlabeled_total is None else int(unlabeled_total)
    if n_u_total < n - n_l:
        raise ConfigError(f"prior estimator: unlabeled_total={n_u_total} is below the {n - n_l} unlabeled passed")
    log_kept = math.log((n - n_l) / n_u_total)  # 0 without subsampling
    gen = torch.Generator().manual_seed(int(seed))
    train_mask = torch.ones(n, dtype=torch.bool)
    holdout_lab = torch.empty(0, dtype=torch.long)
    for value in (1, 0):  # stratified by s
        idx = torch.nonzero(s == value).flatten()
        idx = idx[torch.randperm(idx.numel(), generator=gen)]
        k = min(idx.numel() - 1, max(1, round(holdout_fraction * idx.numel())))
        train_mask[idx[:k]] = False
        if value == 1:
            holdout_lab = idx[:k]
    mean = x[train_mask].mean(0, keepdim=True)
    std = x[train_mask].std(0, keepdim=True).clamp_min(1e-6)
    x = (x - mean) / std
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = _classifier(x.shape[1], hidden)
        with torch.enable_grad():
            _fit(model, x[train_mask], s[train_mask], hidden=hidden, steps=steps, lr=lr, weight_decay=weight_decay)
    with torch.no_grad():
        g = torch.sigmoid(model(x[holdout_lab]).squeeze(1) + log_kept)  # [|V_L|] ≈ c on positives
    c_hat = float(g.mean().clamp(1e-6, 1.0))
    eps = 1e-4
    alpha = min(max((n_l / (n_l + n_u_total)) / c_hat, eps), 1.0 - eps)
    pool = alpha * (1.0 - c_hat) / max(1.0 - alpha * c_hat, 1e-12)
    pool = min(max(pool, eps), 1.0 - eps)
    return PriorEstimate(
        label_frequency=c_hat,
        population_prior=alpha,
        unlabeled_pool_prior=pool,
        n_holdout_labeled=int(holdout_lab.numel()),
    )
