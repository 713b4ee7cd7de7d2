import json

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chefs import DAG, ICP, read_jsonl, write_jsonl


def test_valid_graph_and_counts():
    g = DAG([0.0, 0.0, 0.5, 0.9], [True, True, False, False], [2, 2, 3], [0, 1, 2], fixed=[True, True, False, False])
    assert (g.num_nodes, g.num_edges, g.num_hidden, g.depth()) == (4, 3, 2, 2)
    assert list(g.out_degree()) == [0, 0, 2, 1]
    assert list(g.num_below()) == [0, 0, 2, 3]
    assert g.adjacency()[2, 0] and not g.adjacency()[0, 2]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(theta=[0.1, 0.5], observed=[True, True], parents=[0], children=[1]), "against the order"),
        (dict(theta=[0.5, 0.5], observed=[True, True], parents=[0], children=[1]), "against the order"),
        (dict(theta=[0.1, 0.5], observed=[True, False]), "no child"),
        (dict(theta=[0.1, 0.5], observed=[True, True], parents=[1], children=[5]), "out of range"),
        (dict(theta=[0.1, 1.5], observed=[True, True]), r"\[0, 1\]"),
        (dict(theta=[0.1, 0.5], observed=[True, True], parents=[1, 1], children=[0, 0]), "repeated"),
        (dict(theta=[0.1, 0.5], observed=[True, False], parents=[1], children=[0], fixed=[False, True]), "only observed"),
        (dict(theta=[0.1], observed=[True, True]), "one entry per node"),
    ],
)
def test_invalid_graphs_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DAG(**kwargs)


@pytest.mark.parametrize("text", ["{", "[1,2]", '{"theta":[0.1]}', '{"theta":["a"],"observed":[true],"edges":[]}',
                                  '{"theta":[0.1],"observed":[1],"edges":[]}',
                                  '{"theta":[0.1,0.2],"observed":[true,true],"edges":[[0]]}'])
def test_malformed_json_raises(text):
    with pytest.raises(ValueError):
        DAG.from_json(text)


def test_json_roundtrip_and_jsonl(tmp_path, rng):
    prior = ICP(1.0, 2.0, 1.0)
    graphs = prior.sample_many(rng, 10, 3, observed_order=[0.0, None, 1.0])
    path = tmp_path / "g.jsonl"
    assert write_jsonl(graphs, path) == 10
    back = list(read_jsonl(path))
    assert all(a == b for a, b in zip(graphs, back))
    d = json.loads(graphs[0].to_json())
    assert set(d) == {"theta", "observed", "edges", "fixed"}
    (tmp_path / "bad.jsonl").write_text(graphs[0].to_json() + "\n{oops\n")
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        list(read_jsonl(tmp_path / "bad.jsonl"))


def test_networkx_and_graphml(tmp_path, rng):
    g = ICP(1.0, 2.0, 1.0).sample(rng, 4)
    G = g.to_networkx()
    assert nx.is_directed_acyclic_graph(G)
    assert G.number_of_edges() == g.num_edges
    g.write_graphml(tmp_path / "g.graphml")
    H = nx.read_graphml(tmp_path / "g.graphml")
    assert H.number_of_nodes() == g.num_nodes and H.number_of_edges() == g.num_edges


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), D=st.integers(1, 6), gamma=st.floats(0.1, 3.0), alpha=st.floats(0.1, 5.0))
def test_prior_draws_are_valid_and_canonical(seed, D, gamma, alpha):
    g = ICP(alpha, gamma, 1.0).sample(np.random.default_rng(seed), D, max_nodes=5000)
    g.validate()
    assert g.observed[:D].all() and not g.observed[D:].any()
    assert np.all(np.diff(g.theta[D:]) >= 0)
    assert nx.is_directed_acyclic_graph(g.to_networkx())
    assert g.canonical() == g


def test_transitive_closure():
    from chefs.graph import transitive_closure

    A = np.zeros((4, 4), bool)
    A[0, 1] = A[1, 2] = True  # 0 -> 1 -> 2, 3 alone
    R = transitive_closure(A)
    assert R[0, 2] and R[0, 1] and R[1, 2] and not R[2, 0] and not R[:, 3].any() and not R[3].any()
    assert not A[0, 2]  # the input is left as it is
    A[2, 0] = True  # a cycle: every node of it reaches the others, the diagonal stays False
    R = transitive_closure(A)
    assert R[:3, :3].sum() == 6 and not np.diag(R).any()
