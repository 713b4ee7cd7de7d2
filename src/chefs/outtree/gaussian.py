"""Conjugate Gaussian root and conditional models for tdid sampling (paper 004).

Root model (sec. 2 of 004): ``X_r ~ N(mu, Sigma_m)`` with a Normal-inverse-Wishart
prior ``NIW(mu0, kappa0, Psi0, nu0)``; ``theta_m`` is integrated out exactly, so
the root weight ``rho_r = int p(X_r | theta_m) p(theta_m)`` is a multivariate
Student-t (the first term of the bound in sec. 3 of 004).

Conditional model: ``X_u = A X_v + c + eps``, ``eps ~ N(0, Sigma)``, written as
``X_u = B z_v + eps`` with ``z_v = [X_v; 1]`` and ``B = [A, c]`` (d x (d+1)).
Prior: matrix-normal-inverse-Wishart, ``Sigma ~ IW(Psi, nu)``,
``B | Sigma ~ MN(M, Sigma, V)`` (``vec B ~ N(vec M, V kron Sigma)``). The variational
factor ``q_c(theta_c)`` of sec. 3 is the same family with weighted statistics
(``W_uv`` weights each parent/child pair). Formulas: ``docs/derivations-outtree.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import digamma, gammaln, multigammaln

LOG_2PI = float(np.log(2.0 * np.pi))


def _logdet_pd(S: np.ndarray) -> float:
    L = np.linalg.cholesky(S)
    return float(2.0 * np.sum(np.log(np.diag(L))))


def _mvdigamma(x: float, d: int) -> float:
    return float(np.sum(digamma(x - 0.5 * np.arange(d))))


@dataclass(frozen=True)
class NIW:
    """Normal-inverse-Wishart prior of the root model (004, sec. 2)."""

    mu0: np.ndarray
    kappa0: float
    psi0: np.ndarray
    nu0: float

    @classmethod
    def from_data(cls, X: np.ndarray) -> "NIW":
        """Weak empirical-Bayes prior: centred on the data mean, prior mean of
        ``Sigma_m`` equal to the data covariance, ``kappa0 = 1``, ``nu0 = d + 2``
        (our choice; docs/derivations-outtree.md section 7)."""
        d = X.shape[1]
        cov = np.atleast_2d(np.cov(X, rowvar=False)) + 1e-9 * np.eye(d)
        nu0 = d + 2.0
        return cls(X.mean(axis=0), 1.0, cov * (nu0 - d - 1.0), nu0)

    def log_predictive(self, X: np.ndarray) -> np.ndarray:
        """``log int N(x | mu, Sigma) NIW(mu, Sigma) d(mu, Sigma)`` for each row.

        Multivariate Student-t with ``nu0 - d + 1`` degrees of freedom, location
        ``mu0`` and scale ``Psi0 (kappa0 + 1) / (kappa0 (nu0 - d + 1))``: the root
        weight ``rho_r = int p(X_r | theta_m) p(theta_m)`` of 004 sec. 3
        (docs/derivations-outtree.md section 5).
        """
        X = np.atleast_2d(X)
        d = X.shape[1]
        dof = self.nu0 - d + 1.0
        scale = self.psi0 * (self.kappa0 + 1.0) / (self.kappa0 * dof)
        L = np.linalg.cholesky(scale)
        y = np.linalg.solve(L, (X - self.mu0).T)
        maha = np.sum(y * y, axis=0)
        return (gammaln(0.5 * (dof + d)) - gammaln(0.5 * dof) - 0.5 * d * np.log(dof * np.pi)
                - np.sum(np.log(np.diag(L))) - 0.5 * (dof + d) * np.log1p(maha / dof))

    def sample_predictive(self, n: int, rng: np.random.Generator) -> np.ndarray:
        d = self.mu0.size
        dof = self.nu0 - d + 1.0
        scale = self.psi0 * (self.kappa0 + 1.0) / (self.kappa0 * dof)
        L = np.linalg.cholesky(scale)
        z = rng.standard_normal((n, d)) @ L.T
        g = rng.chisquare(dof, size=n) / dof
        return self.mu0 + z / np.sqrt(g)[:, None]


@dataclass(frozen=True)
class MNIW:
    """Matrix-normal-inverse-Wishart distribution over ``(B, Sigma)``.

    ``Sigma ~ IW(psi, nu)`` and ``vec B | Sigma ~ N(vec M, V kron Sigma)``.
    Used both as the prior ``p_c(theta_c)`` and as ``q_c(theta_c)`` (004, sec. 3).
    """

    M: np.ndarray  # (d, d+1)
    V: np.ndarray  # (d+1, d+1)
    psi: np.ndarray  # (d, d)
    nu: float

    @property
    def dim(self) -> int:
        return self.psi.shape[0]

    @classmethod
    def default_prior(cls, X: np.ndarray, noise_scale: float = 0.1) -> "MNIW":
        """Weak random-walk prior: ``A ~ I``, ``c ~ 0``, prior mean noise
        ``noise_scale^2`` times the data covariance, ``nu = d + 2`` (our choice;
        docs/derivations-outtree.md section 7).

        ``V`` is set so that one unit of data spread in ``A`` or ``c`` is a
        one-sigma change (in noise units) — a weak prior.
        """
        d = X.shape[1]
        cov = np.atleast_2d(np.cov(X, rowvar=False)) + 1e-9 * np.eye(d)
        nu = d + 2.0
        psi = cov * noise_scale ** 2 * (nu - d - 1.0)
        M = np.hstack([np.eye(d), np.zeros((d, 1))])
        # prior precision of B's columns: weak, scaled by the data spread
        mean = X.mean(axis=0)
        scale2 = float(np.trace(cov) / d) + float(mean @ mean / d)
        V = np.eye(d + 1) * (1.0 / (noise_scale ** 2)) / max(scale2, 1e-12)
        V[d, d] = 1.0 / noise_scale ** 2
        return cls(M, V, psi, nu)

    def posterior(self, X: np.ndarray, W: np.ndarray) -> "MNIW":
        """Weighted conjugate update ``q_c ∝ p_c prod_{u != v} p(X_u | X_v)^{W_uv}``
        (004, sec. 3, last update). ``W[u, v]`` weights child ``u`` with parent ``v``.
        """
        T, d = X.shape
        Z = np.hstack([X, np.ones((T, 1))])
        wc = W.sum(axis=1)  # weight of each child
        wp = W.sum(axis=0)  # weight of each parent
        N = float(W.sum())
        Szz = (Z * wp[:, None]).T @ Z
        Sxz = X.T @ (W @ Z)
        Sxx = (X * wc[:, None]).T @ X
        V0inv = np.linalg.inv(self.V)
        Vn_inv = V0inv + Szz
        Vn = np.linalg.inv(Vn_inv)
        Vn = 0.5 * (Vn + Vn.T)
        Mn = (self.M @ V0inv + Sxz) @ Vn
        psin = self.psi + Sxx + self.M @ V0inv @ self.M.T - Mn @ Vn_inv @ Mn.T
        psin = 0.5 * (psin + psin.T)
        return MNIW(Mn, Vn, psin, self.nu + N)

    def log_evidence(self, post: "MNIW") -> float:
        """``log int p_c(theta) prod p(X_u|X_v, theta)^{W_uv} dtheta`` given the
        weighted posterior ``post = self.posterior(X, W)`` (N = post.nu - self.nu).

        The ``log Ev(W)`` term of the bound after the ``q_c`` update (004 sec. 3;
        docs/derivations-outtree.md sections 4 and 5).
        """
        d = self.dim
        N = post.nu - self.nu
        return (-0.5 * N * d * np.log(np.pi)
                + 0.5 * d * (_logdet_pd(post.V) - _logdet_pd(self.V))
                + 0.5 * self.nu * _logdet_pd(self.psi) - 0.5 * post.nu * _logdet_pd(post.psi)
                + multigammaln(0.5 * post.nu, d) - multigammaln(0.5 * self.nu, d))

    def expected_log_lik(self, X: np.ndarray) -> np.ndarray:
        """``log beta_uv = E_q[log N(X_u | B z_v, Sigma)]`` for every pair (004, sec. 3).

        ``= -d/2 log 2pi - 1/2 E log|Sigma| - nu/2 (x_u - M z_v)' psi^{-1} (x_u - M z_v)
        - d/2 z_v' V z_v``.
        """
        T, d = X.shape
        Z = np.hstack([X, np.ones((T, 1))])
        e_logdet = _logdet_pd(self.psi) - _mvdigamma(0.5 * self.nu, d) - d * np.log(2.0)
        L = np.linalg.cholesky(self.psi / self.nu)
        Xw = np.linalg.solve(L, X.T).T
        Pw = np.linalg.solve(L, (Z @ self.M.T).T).T
        sq = (Xw * Xw).sum(1)[:, None] + (Pw * Pw).sum(1)[None, :] - 2.0 * Xw @ Pw.T
        sq = np.maximum(sq, 0.0)
        zvz = np.einsum("ij,jk,ik->i", Z, self.V, Z)
        out = -0.5 * d * LOG_2PI - 0.5 * e_logdet - 0.5 * sq - 0.5 * d * zvz[None, :]
        np.fill_diagonal(out, 0.0)
        return out

    def kl(self, prior: "MNIW") -> float:
        """``KL(self || prior)`` in closed form (for checking the ELBO, 004 sec. 3)."""
        d = self.dim
        p = d + 1
        nu1, nu0 = self.nu, prior.nu
        psi1inv = np.linalg.inv(self.psi)
        kl_iw = (0.5 * nu0 * (_logdet_pd(self.psi) - _logdet_pd(prior.psi))
                 + 0.5 * nu1 * np.trace(prior.psi @ psi1inv) - 0.5 * nu1 * d
                 + multigammaln(0.5 * nu0, d) - multigammaln(0.5 * nu1, d)
                 + 0.5 * (nu1 - nu0) * _mvdigamma(0.5 * nu1, d))
        V0inv = np.linalg.inv(prior.V)
        D = self.M - prior.M
        e_sinv = nu1 * psi1inv
        kl_mn = 0.5 * (d * np.trace(V0inv @ self.V) + np.trace(e_sinv @ D @ V0inv @ D.T)
                       - d * p + d * (_logdet_pd(prior.V) - _logdet_pd(self.V)))
        return float(kl_iw + kl_mn)

    def point_estimate(self) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean of ``B`` and of ``Sigma`` (``psi / (nu - d - 1)``): the plug-in
        parameters of the predictive (docs/derivations-outtree.md section 7)."""
        d = self.dim
        denom = self.nu - d - 1.0
        if denom <= 0:
            denom = self.nu + d + 1.0  # fall back to the mode
        return self.M.copy(), self.psi / denom


def gaussian_log_lik_matrix(X_child: np.ndarray, X_parent: np.ndarray, B: np.ndarray,
                            Sigma: np.ndarray) -> np.ndarray:
    """``out[u, v] = log N(X_child[u] | B [X_parent[v]; 1], Sigma)`` (plug-in weights).

    The pairwise conditionals ``beta_uv = p(X_u | X_v, theta_c)`` of 004 sec. 2 for the
    Gaussian conditional model (docs/derivations-outtree.md sections 1 and 5).
    """
    d = X_child.shape[1]
    L = np.linalg.cholesky(Sigma)
    mean = X_parent @ B[:, :d].T + B[:, d]
    Xw = np.linalg.solve(L, X_child.T).T
    Pw = np.linalg.solve(L, mean.T).T
    sq = (Xw * Xw).sum(1)[:, None] + (Pw * Pw).sum(1)[None, :] - 2.0 * Xw @ Pw.T
    sq = np.maximum(sq, 0.0)
    return -0.5 * d * LOG_2PI - np.sum(np.log(np.diag(L))) - 0.5 * sq
