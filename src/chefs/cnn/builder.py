"""Build a convolutional network from an ICP DAG (eqs. 17-20 of 002).

Every node reachable from the input X is a tensor (eq. 17)::

    T(i) = ReLU( b_i + sum_{k in Parents(i)} W(ki) * P_ki(T(k)) )

with shapes set by the order values (:class:`chefs.cnn.ShapeRule`, eqs.
18-19), ``P_ki`` the adaptive average pooling from the parent's resolution to
the child's (the identity when they agree) and ``W(ki) *`` a 3x3 convolution,
stride 1, zero padding 1, from the parent's channels to the child's. The output
Y is a softmax of linear maps of its parents (eq. 20)::

    logits = b_Y + sum_{k in Parents(Y)} V(k) vec(T(k)),   Y = softmax(logits)

The per-node biases ``b_i`` and ``b_Y`` are not printed in eqs. 17 and 20;
they are the usual convolution biases, one per node rather than one per edge
(a sum of per-edge biases is one bias). Nodes not reachable from X have no
parameters; if X has no child, Y is unreachable too and the network has no
parameter at all: it outputs the uniform distribution (zero logits).

Parameter names carry the order values (exact ``repr`` of the floats) so that
weights can be matched between graphs (warm starts) and saved in NPZ files::

    conv|<theta_parent>|<theta_child>   shape (C_child, C_parent, 3, 3)
    head|<theta_parent>|<theta_Y>       shape (num_classes, C*H*W of parent)
    bias|<theta>                        shape (C,) or (num_classes,) for Y
"""

from __future__ import annotations

import math

import numpy as np

from ..graph import DAG
from .network import io_nodes, network_edges, reachable_mask
from .shapes import ShapeRule

__all__ = ["ICPConvNet", "build_network", "conv_name", "head_name", "bias_name", "param_nodes"]


def _torch():
    try:
        import torch
    except ImportError:
        raise ValueError("the CNN experiments need PyTorch: pip install 'indian-chefs[cnn]'") from None
    return torch


def conv_name(theta_parent: float, theta_child: float) -> str:
    return f"conv|{float(theta_parent)!r}|{float(theta_child)!r}"


def head_name(theta_parent: float, theta_child: float) -> str:
    return f"head|{float(theta_parent)!r}|{float(theta_child)!r}"


def bias_name(theta: float) -> str:
    return f"bias|{float(theta)!r}"


def param_nodes(name: str) -> tuple[float, ...]:
    """Order values named by a parameter (one for a bias, two for an edge)."""
    parts = name.split("|")
    return tuple(float(p) for p in parts[1:])


def _make_module_class():
    torch = _torch()
    nn = torch.nn
    F = torch.nn.functional

    class ICPConvNet(nn.Module):
        """The network of one ICP DAG (eqs. 17-20 of 002); see the module docstring.

        Build it with :func:`build_network`. ``forward(x)`` takes images of
        shape ``(B, C, H, W)`` and returns logits ``(B, num_classes)``.
        Parameters live in ``self.params`` (a ``ParameterList``) with names in
        ``self.names``; :meth:`arrays` and :meth:`load_arrays` exchange them
        as ``{name: numpy array}``.
        """

        def __init__(self, plan: dict):
            super().__init__()
            self.plan = plan
            self.names = list(plan["params"].keys())
            self.index = {n: i for i, n in enumerate(self.names)}
            self.params = nn.ParameterList(
                [nn.Parameter(torch.zeros(plan["params"][n], dtype=torch.float32)) for n in self.names]
            )

        def param(self, name):
            return self.params[self.index[name]]

        def forward(self, x):
            plan = self.plan
            if x.dim() != 4 or tuple(x.shape[1:]) != tuple(plan["input_shape"]):
                raise ValueError(f"expected images of shape (B, {', '.join(map(str, plan['input_shape']))}), "
                                 f"got {tuple(x.shape)}")
            tensors = {plan["x"]: x}
            for node in plan["order"]:
                side = plan["sides"][node]
                acc = None
                for parent in plan["parents"][node]:
                    t = tensors[parent]
                    if tuple(t.shape[-2:]) != side:
                        t = F.adaptive_avg_pool2d(t, side)
                    out = F.conv2d(t, self.param(plan["conv"][(parent, node)]), padding=1)
                    acc = out if acc is None else acc + out
                b = self.param(plan["bias"][node]).view(1, -1, 1, 1)
                tensors[node] = F.relu(acc + b)
            if plan["y"] not in plan["bias"]:  # X has no child: no parameters, uniform output
                return x.new_zeros((x.shape[0], plan["num_classes"]))
            logits = self.param(plan["bias"][plan["y"]]).unsqueeze(0).expand(x.shape[0], -1)
            for parent in plan["parents"][plan["y"]]:
                v = self.param(plan["head"][parent])
                logits = logits + tensors[parent].flatten(1) @ v.t()
            return logits

        def arrays(self) -> dict:
            """Parameters as ``{name: float32 numpy array}`` (copies, on the CPU)."""
            return {n: p.detach().cpu().numpy().copy() for n, p in zip(self.names, self.params)}

        def load_arrays(self, arrays: dict) -> list:
            """Copy every parameter whose name and shape match; return the names copied."""
            done = []
            with torch.no_grad():
                for n, p in zip(self.names, self.params):
                    a = arrays.get(n)
                    if a is not None and tuple(np.shape(a)) == tuple(p.shape):
                        p.copy_(torch.as_tensor(np.asarray(a), dtype=p.dtype, device=p.device))
                        done.append(n)
            return done

        def num_parameters(self) -> int:
            return int(sum(p.numel() for p in self.params))

    return ICPConvNet


_CLASS = None


def __getattr__(name):
    if name == "ICPConvNet":
        global _CLASS
        if _CLASS is None:
            _CLASS = _make_module_class()
        return _CLASS
    raise AttributeError(name)


def _plan(dag: DAG, input_shape, num_classes: int, shape_rule: ShapeRule) -> dict:
    if not isinstance(shape_rule, ShapeRule):
        raise ValueError(f"shape_rule must be a chefs.cnn.ShapeRule, got {type(shape_rule).__name__}")
    try:
        input_shape = tuple(int(s) for s in input_shape)
    except (TypeError, ValueError):
        raise ValueError(f"input_shape must be (channels, height, width), got {input_shape!r}") from None
    if len(input_shape) != 3 or min(input_shape) < 1:
        raise ValueError(f"input_shape must be (channels, height, width) with positive sizes, got {input_shape}")
    if isinstance(num_classes, bool) or int(num_classes) != num_classes or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    num_classes = int(num_classes)
    x, y = io_nodes(dag)
    mask = reachable_mask(dag, x)
    th = dag.theta
    act = np.flatnonzero(mask)
    if np.unique(th[act]).size != act.size:
        raise ValueError("nodes reachable from the input must have distinct order values "
                         "(order values are the keys of their parameters)")
    hw = input_shape[1:]
    order = [k for k in np.argsort(-th, kind="stable").tolist() if mask[k] and k not in (x, y)]
    shapes = {x: input_shape}
    for k in order:
        shapes[k] = shape_rule.shape(th[k], hw)
    parents = {k: [] for k in order + [y]}
    params: dict = {}
    conv, head, bias = {}, {}, {}
    for p, c in sorted(network_edges(dag), key=lambda e: (-th[e[1]], -th[e[0]])):
        parents[c].append(p)
        if c == y:
            head[p] = head_name(th[p], th[c])
            params[head[p]] = (num_classes, int(np.prod(shapes[p])))
        else:
            conv[(p, c)] = conv_name(th[p], th[c])
            params[conv[(p, c)]] = (shapes[c][0], shapes[p][0], 3, 3)
    for k in order + ([y] if mask[y] else []):
        bias[k] = bias_name(th[k])
        params[bias[k]] = (shapes[k][0],) if k != y else (num_classes,)
    return {
        "x": x, "y": y, "order": order, "parents": parents, "input_shape": input_shape,
        "sides": {k: tuple(shapes[k][1:]) for k in shapes}, "shapes": shapes,
        "conv": conv, "head": head, "bias": bias, "params": params, "num_classes": num_classes,
        "theta": {k: float(th[k]) for k in order + [x, y]},
    }


def _adaptive_windows(n_in: int, n_out: int):
    """Windows of ``adaptive_avg_pool`` along one axis (PyTorch's rule)."""
    return [(math.floor(o * n_in / n_out), math.ceil((o + 1) * n_in / n_out)) for o in range(n_out)]


def _pool_sum(v: np.ndarray, out_hw) -> np.ndarray:
    """Sum of the last two axes of ``v`` over adaptive pooling windows (adjoint-like transfer of a head)."""
    h, w = v.shape[-2:]
    if (h, w) == tuple(out_hw):
        return v.copy()
    rows = _adaptive_windows(h, out_hw[0])
    cols = _adaptive_windows(w, out_hw[1])
    out = np.empty(v.shape[:-2] + tuple(out_hw), dtype=v.dtype)
    for a, (r0, r1) in enumerate(rows):
        for b, (c0, c1) in enumerate(cols):
            out[..., a, b] = v[..., r0:r1, c0:c1].sum(axis=(-2, -1))
    return out


def _births(plan: dict, keep: dict) -> dict:
    """New hidden nodes j with one parent k and one child i whose old edge k -> i had weights in ``keep``."""
    children: dict = {}
    for (p, c) in plan["conv"]:
        children.setdefault(p, []).append(c)
    for p in plan["head"]:
        children.setdefault(p, []).append(plan["y"])
    th = plan["theta"]
    out = {}
    for j in plan["order"]:
        if plan["bias"][j] in keep or len(plan["parents"][j]) != 1 or len(children.get(j, [])) != 1:
            continue
        k, i = plan["parents"][j][0], children[j][0]
        if k in children and i in children[k]:
            continue
        old = (head_name if i == plan["y"] else conv_name)(th[k], th[i])
        if old in keep:
            out[j] = (k, i, old)
    return out


def init_arrays(plan_or_net, rng: np.random.Generator, keep: dict | None = None,
                new_edge_init: str = "preserve") -> dict:
    """Initial parameter values as ``{name: float32 array}``, drawn from ``rng``.

    Fresh edges get He-uniform weights ``U(-s, s)``, ``s = sqrt(6 / fan_in) /
    sqrt(in_degree)`` (ReLU gain, the sum over parents keeps the variance of
    one parent); heads ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``; biases zero.

    With ``keep`` (the weights of the current state: a warm start) every
    parameter found there with the same shape is copied. With
    ``new_edge_init="preserve"`` the proposal starts from (nearly) the
    current network's function: a new edge into a node that already has
    weights starts at zero, and a node ``j`` born on an edge ``k -> i``
    (:class:`chefs.cnn.NodeBirthDeath`) gets an identity embedding ``k -> j``
    (channel ``c`` of k to channel ``c`` of j, centre tap 1) and the old
    weights of ``k -> i`` on ``j -> i`` (a head's weights summed over the
    pooling windows when j has fewer pixels), "Net2Net"-style. Exact when j
    has k's shape and ``P_ji P_kj = P_ki``; see ``docs/derivations-cnn.md``.
    ``"random"`` initialises every new edge at random.
    """
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator (use numpy.random.default_rng(seed))")
    if new_edge_init == "zero":
        new_edge_init = "preserve"
    if new_edge_init not in ("preserve", "random"):
        raise ValueError(f"new_edge_init must be 'preserve' or 'random', got {new_edge_init!r}")
    plan = plan_or_net.plan if hasattr(plan_or_net, "plan") else plan_or_net
    keep = keep or {}
    out = {}
    th_bias_kept = {param_nodes(n)[0] for n in keep if n.startswith("bias|")}
    preserve = bool(keep) and new_edge_init == "preserve"
    births = _births(plan, keep) if preserve else {}
    for name, shape in plan["params"].items():
        k = keep.get(name)
        if k is not None and tuple(np.shape(k)) == tuple(shape):
            out[name] = np.asarray(k, dtype=np.float32).copy()
            continue
        kind = name.split("|")[0]
        if kind == "bias":
            out[name] = np.zeros(shape, dtype=np.float32)
            continue
        child_theta = param_nodes(name)[1]
        if preserve and child_theta in th_bias_kept:
            out[name] = np.zeros(shape, dtype=np.float32)
            continue
        if kind == "conv":
            fan_in = shape[1] * shape[2] * shape[3]
            child = [c for (p, c), n in plan["conv"].items() if n == name][0]
            s = math.sqrt(6.0 / fan_in) / math.sqrt(len(plan["parents"][child]))
        else:
            s = 1.0 / math.sqrt(shape[1])
        out[name] = rng.uniform(-s, s, size=shape).astype(np.float32)
    for j, (k, i, old) in births.items():
        ck, cj = plan["shapes"][k][0], plan["shapes"][j][0]
        m = min(ck, cj)
        w_kj = np.zeros(plan["params"][plan["conv"][(k, j)]], dtype=np.float32)
        w_kj[np.arange(m), np.arange(m), 1, 1] = 1.0
        out[plan["conv"][(k, j)]] = w_kj
        w_old = np.asarray(keep[old], dtype=np.float32)
        if i == plan["y"]:
            hk, wk = plan["sides"][k]
            v = w_old.reshape(w_old.shape[0], ck, hk, wk)[:, :m]
            v = _pool_sum(v, plan["sides"][j])
            new = np.zeros((w_old.shape[0], cj) + tuple(plan["sides"][j]), dtype=np.float32)
            new[:, :m] = v
            out[plan["head"][j]] = new.reshape(w_old.shape[0], -1)
        else:
            name = plan["conv"][(j, i)]
            new = np.zeros(plan["params"][name], dtype=np.float32)
            new[:, :m] = w_old[:, :m]
            out[name] = new
    return out


def build_network(dag: DAG, input_shape, num_classes: int, shape_rule: ShapeRule | None = None,
                  rng: np.random.Generator | None = None, init: dict | None = None,
                  new_edge_init: str = "preserve", device="cpu"):
    """Build the convolutional network of ``dag`` (eqs. 17-20 of 002).

    Parameters
    ----------
    dag : chefs.DAG
        Two observed nodes: X at ``theta = 1`` and Y at ``theta = 0``.
    input_shape : (channels, height, width)
        Shape of one input image.
    num_classes : int
        Number of classes of Y.
    shape_rule : ShapeRule, optional
        Default ``ShapeRule()`` (5 bins, 4 channels at the first bin).
    rng : numpy.random.Generator, optional
        Draws the initial weights (:func:`init_arrays`); if None the
        parameters are left at zero (load them with ``load_arrays``).
    init : dict, optional
        Warm-start weights ``{name: array}`` copied where names and shapes match.
    new_edge_init : {"preserve", "random"}
        Warm start: start new edges so that the network's function is kept
        (see :func:`init_arrays`) or at random.
    device : str or torch.device

    Returns
    -------
    ICPConvNet
    """
    shape_rule = ShapeRule() if shape_rule is None else shape_rule
    plan = _plan(dag, input_shape, num_classes, shape_rule)
    net = __getattr__("ICPConvNet")(plan)
    if rng is not None:
        net.load_arrays(init_arrays(plan, rng, keep=init, new_edge_init=new_edge_init))
    elif init:
        net.load_arrays(init)
    return net.to(device)
