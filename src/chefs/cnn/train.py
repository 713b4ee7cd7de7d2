"""Training and the point estimate of the model evidence (eq. 21 of 002).

The evidence of a graph G is approximated by the likelihood at the weights
found by Adam (eq. 21)::

    log p(y | G, x)  ~  log p(y | G, W_hat, x) = sum_n log softmax(f_G(x_n; W_hat))[y_n]

summed over a fixed evidence set (the training set, or a fixed seeded subset of
it), the same for every graph compared. Adam uses the paper's settings
(beta1 = 0.9, beta2 = 0.999, eps = 1e-8) with a configurable step size; the
printed "alpha = 0.1" is the step size (see ``docs/derivations-cnn.md`` for the
default used here).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from ..graph import DAG
from .builder import _torch, build_network
from .data import Dataset
from .shapes import ShapeRule

__all__ = ["TrainConfig", "Evaluator", "FitResult"]


@dataclass(frozen=True)
class TrainConfig:
    """Training settings.

    Parameters
    ----------
    steps : int
        Adam steps from scratch (paper: 540 iterations of batch 100).
    warm_steps : int
        Adam steps for a proposal started from the current state's weights.
    lr : float
        Adam step size (eq. 21 of 002 prints 0.1).
    batch_size : int
        Minibatch size (paper: 100).
    new_edge_init : {"preserve", "random"}
        Warm start: new edges start so as to keep the current network's
        function (zero into existing nodes, identity/copy for a node born on
        an edge; :func:`chefs.cnn.builder.init_arrays`), or at random.
    evidence_size : int or None
        Evaluate the evidence on this many fixed training images (None: all).
    device : str
        ``"cpu"`` or ``"cuda"``.
    threads : int
        ``torch.set_num_threads`` inside the evaluator (default 1: parallelism comes from chains; 0 leaves it as is).
    tf32 : bool
        On a GPU, let cuDNN convolutions and matrix products use TF32 (10-bit
        mantissa; log evidence off by up to about 1e-3 relative; it pays for
        large convolutions, not for these small networks on an H100).
        Default False: float32 throughout, as on the CPU. The setting is
        global to the process (``torch.backends``); ignored on the CPU.
    """

    steps: int = 540
    warm_steps: int = 100
    lr: float = 0.01
    batch_size: int = 100
    new_edge_init: str = "preserve"
    evidence_size: int | None = None
    device: str = "cpu"
    threads: int = 1
    tf32: bool = False

    def __post_init__(self):
        for name in ("steps", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if isinstance(self.warm_steps, bool) or int(self.warm_steps) != self.warm_steps or self.warm_steps < 0:
            raise ValueError(f"warm_steps must be a non-negative integer, got {self.warm_steps!r}")
        if not (math.isfinite(float(self.lr)) and float(self.lr) > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")
        if self.new_edge_init not in ("preserve", "random"):
            raise ValueError(f"new_edge_init must be 'preserve' or 'random', got {self.new_edge_init!r}")
        if self.evidence_size is not None and int(self.evidence_size) < 1:
            raise ValueError(f"evidence_size must be a positive integer or None, got {self.evidence_size!r}")
        if self.device not in ("cpu", "cuda") and not str(self.device).startswith("cuda:"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        if int(self.threads) < 0:
            raise ValueError(f"threads must be >= 0, got {self.threads}")
        if not isinstance(self.tf32, bool):
            raise ValueError(f"tf32 must be True or False, got {self.tf32!r}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class FitResult:
    """Outcome of training one network: evidence (eq. 21 of 002), weights and cost."""

    log_evidence: float
    weights: dict
    steps: int
    seconds: float
    warm: bool
    num_parameters: int


def check_device(device: str) -> str:
    """Return ``device``; raise ``ValueError`` if it is not cpu/cuda/cuda:N or names a GPU torch does not see.

    Everything else about the device is handled in :class:`Evaluator`: the
    data tensors, minibatch indices and the network are created on it, weights
    come back to the CPU as numpy arrays (checkpoints, warm starts), and all
    random numbers come from the chain's numpy ``Generator`` (torch's global
    RNG is never used), so the same seed draws the same proposals, initial
    weights and minibatches on any device. GPU kernels are not bit-for-bit
    deterministic, so a GPU run is not reproducible to the last bit
    (``tests/test_cnn_cuda.py`` checks the GPU path where a GPU is present).
    """
    torch = _torch()
    device = str(device)
    if device != "cpu" and device != "cuda" and not device.startswith("cuda:"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError("--device cuda was asked for but torch sees no GPU; use --device cpu")
        if ":" in device:
            idx = device.split(":", 1)[1]
            if not idx.isdigit() or int(idx) >= torch.cuda.device_count():
                raise ValueError(f"no GPU {device!r}: torch sees {torch.cuda.device_count()} GPU(s)")
    return device


class Evaluator:
    """Train networks of graphs on a fixed data set and score them (eq. 21 of 002).

    Parameters
    ----------
    data : Dataset
    config : TrainConfig
    shape_rule : ShapeRule
    evidence_rng : numpy.random.Generator, optional
        Draws the fixed evidence subset when ``config.evidence_size`` is set.
    """

    def __init__(self, data: Dataset, config: TrainConfig, shape_rule: ShapeRule,
                 evidence_rng: np.random.Generator | None = None):
        torch = _torch()
        if not isinstance(data, Dataset):
            raise ValueError(f"data must be a chefs.cnn.Dataset, got {type(data).__name__}")
        self.torch = torch
        self.data = data
        self.config = config
        self.shape_rule = shape_rule
        self.device = check_device(config.device)
        if config.threads:
            torch.set_num_threads(int(config.threads))
        if self.device.startswith("cuda"):
            torch.backends.cudnn.allow_tf32 = config.tf32
            torch.backends.cuda.matmul.allow_tf32 = config.tf32
        dev = self.device
        self.x_train = torch.as_tensor(data.x_train, device=dev)
        self.y_train = torch.as_tensor(data.y_train, device=dev)
        self.x_test = torch.as_tensor(data.x_test, device=dev)
        n = data.y_train.size
        if config.evidence_size is None or config.evidence_size >= n:
            idx = np.arange(n)
        else:
            r = evidence_rng if evidence_rng is not None else np.random.default_rng(0)
            idx = np.sort(r.choice(n, size=int(config.evidence_size), replace=False))
        self.evidence_index = idx
        self.x_ev = self.x_train[torch.as_tensor(idx, device=dev)]
        self.y_ev = self.y_train[torch.as_tensor(idx, device=dev)]

    def build(self, dag: DAG, rng=None, init=None):
        return build_network(dag, self.data.input_shape, self.data.num_classes, self.shape_rule,
                             rng=rng, init=init, new_edge_init=self.config.new_edge_init, device=self.device)

    def train(self, net, steps: int, rng: np.random.Generator, monitor=None):
        """Run ``steps`` Adam steps on random minibatches (epochs of a seeded permutation):
        the optimiser of eq. 21 of 002 (docs/derivations-cnn.md section 4).

        ``monitor(step, net)`` is called after every step when given; if it
        returns True training stops early. Returns the number of steps run.
        """
        torch = self.torch
        if steps <= 0 or not list(net.parameters()):
            return 0
        opt = torch.optim.Adam(net.parameters(), lr=float(self.config.lr), betas=(0.9, 0.999), eps=1e-8)
        n = self.y_train.shape[0]
        bs = min(int(self.config.batch_size), n)
        perm = rng.permutation(n)
        pos = 0
        net.train()
        for step in range(1, int(steps) + 1):
            if pos + bs > n:
                perm = rng.permutation(n)
                pos = 0
            idx = torch.as_tensor(perm[pos:pos + bs], device=self.device)
            pos += bs
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(net(self.x_train[idx]), self.y_train[idx])
            loss.backward()
            opt.step()
            if monitor is not None and monitor(step, net):
                return step
        return int(steps)

    def _batched(self, net, x, fn):
        torch = self.torch
        out = []
        net.eval()
        with torch.no_grad():
            for s in range(0, x.shape[0], 1000):
                out.append(fn(net(x[s:s + 1000])))
        return out

    def log_evidence(self, net) -> float:
        """``sum_n log p(y_n | x_n, G, W)`` over the fixed evidence set (eq. 21 of 002)."""
        torch = self.torch
        parts = self._batched(net, self.x_ev, lambda z: torch.log_softmax(z, dim=1))
        logp = torch.cat(parts)
        return float(logp.gather(1, self.y_ev.view(-1, 1)).sum().item())

    def mean_loss(self, net) -> float:
        """Mean cross-entropy on the evidence set (``-log_evidence / n``)."""
        return -self.log_evidence(net) / self.y_ev.shape[0]

    def test_proba(self, net) -> np.ndarray:
        """Class probabilities on the test set, float32 (N_test, num_classes)."""
        torch = self.torch
        parts = self._batched(net, self.x_test, lambda z: torch.softmax(z, dim=1))
        return torch.cat(parts).cpu().numpy().astype(np.float32)

    def fit(self, dag: DAG, rng: np.random.Generator, warm: dict | None = None) -> FitResult:
        """Train the network of ``dag`` and return its log evidence (eq. 21 of 002).

        From scratch (``warm=None``): fresh weights, ``config.steps`` steps.
        Warm start: parameters shared with ``warm`` (same edge keys
        ``(theta_parent, theta_child)``) are copied, and ``config.warm_steps``
        steps are run.
        """
        t0 = time.perf_counter()
        net = self.build(dag, rng=rng, init=warm)
        steps = self.config.warm_steps if warm is not None else self.config.steps
        done = self.train(net, steps, rng)
        lev = self.log_evidence(net)
        if not math.isfinite(lev):
            lev = -math.inf
        return FitResult(lev, net.arrays(), done, time.perf_counter() - t0, warm is not None, net.num_parameters())
