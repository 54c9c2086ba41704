"""The GIN encoder against a dense re-computation of its layer (Xu et al. 2019, eq. 4.1) and readout (InfoGraph)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import contrastlab as cl
from contrastlab.data.graphs import GraphDataset

# Graph 0: a triangle 0-1-2 plus node 3 hanging from node 2 and an isolated node 4; graph 1: the path 5-6.
EDGES = torch.tensor([[0, 1, 1, 2, 0, 2, 2, 3, 5, 6], [1, 0, 2, 1, 2, 0, 3, 2, 6, 5]])
NODE_GRAPH = torch.tensor([0, 0, 0, 0, 0, 1, 1])


def _batch(features: torch.Tensor):
    data = GraphDataset.from_edges("T", features, EDGES, NODE_GRAPH, torch.tensor([0, 1]))
    return data.batch(torch.arange(2))


def _dense_reference(enc: nn.Module, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor,
                     batch_norm: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``h_v ← BN(ReLU(MLP((1 + 0)·h_v + Σ_{u∈N(v)} h_u)))`` with a dense adjacency; graph = ‖_k Σ_v h_v^{(k)}."""
    n = x.shape[0]
    adj = torch.zeros(n, n, dtype=torch.float64)
    adj[edge_index[1], edge_index[0]] = 1.0                                # row v sums its neighbours u
    h, layers = x.double(), []
    for conv, norm in zip(enc.convs, enc.norms, strict=True):
        lin1, lin2 = conv.nn[0], conv.nn[2]
        agg = h + adj @ h                                                   # ε = 0: the self term counts once
        out = torch.relu(agg @ lin1.weight.double().T + lin1.bias.double())
        out = torch.relu(out @ lin2.weight.double().T + lin2.bias.double())
        if batch_norm:                                                      # training mode: batch statistics
            mean, var = out.mean(0), out.var(0, unbiased=False)
            out = (out - mean) / torch.sqrt(var + norm.eps) * norm.weight.double() + norm.bias.double()
        layers.append(out)
        h = out
    nodes = torch.cat(layers, dim=1)
    onehot = torch.nn.functional.one_hot(batch, int(batch.max()) + 1).double()  # [n, G]
    return onehot.T @ nodes, nodes


@pytest.mark.parametrize("batch_norm", [False, True])
def test_gin_layers_and_readout_match_the_dense_formula(batch_norm: bool) -> None:
    torch.manual_seed(0)
    enc = cl.make_encoder("gin", in_dim=3, hidden_dim=5, num_layers=3, batch_norm=batch_norm).train()
    if batch_norm:                                                          # non-trivial affine parameters
        for norm in enc.norms:
            nn.init.uniform_(norm.weight, 0.5, 1.5)
            nn.init.uniform_(norm.bias, -0.5, 0.5)
    b = _batch(torch.randn(7, 3))
    graph, nodes = enc(b.x, b.edge_index, b.batch, b.num_graphs)
    ref_graph, ref_nodes = _dense_reference(enc, b.x, b.edge_index, b.batch, batch_norm)
    assert graph.shape == (2, 15) and nodes.shape == (7, 15)
    torch.testing.assert_close(nodes.double(), ref_nodes, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(graph.double(), ref_graph, rtol=1e-5, atol=1e-5)


def test_eval_mode_normalises_with_the_running_statistics() -> None:
    torch.manual_seed(1)
    enc = cl.make_encoder("gin", in_dim=2, hidden_dim=4, num_layers=1)
    b = _batch(torch.randn(7, 2))
    for _ in range(3):
        enc.train()(b.x, b.edge_index, b.batch, 2)                          # moves the running statistics
    norm = enc.norms[0]
    _, nodes = enc.eval()(b.x, b.edge_index, b.batch, 2)
    conv_out = torch.relu(enc.convs[0](b.x, b.edge_index))
    expected = (conv_out - norm.running_mean) / torch.sqrt(norm.running_var + norm.eps) * norm.weight + norm.bias
    torch.testing.assert_close(nodes, expected)


def test_sum_pooling_keeps_the_graph_size() -> None:
    """A 3-cycle and a 6-cycle with equal features have equal node states; the sum readout still tells them apart
    (twice the nodes, twice the embedding), which a mean readout would not."""
    torch.manual_seed(2)
    enc = cl.make_encoder("gin", in_dim=1, hidden_dim=4, num_layers=2, batch_norm=False)
    ring = [(i, (i + 1) % 3) for i in range(3)] + [(3 + i, 3 + (i + 1) % 6) for i in range(6)]
    data = GraphDataset.from_edges("R", torch.ones(9, 1), torch.tensor(ring).T,
                                   torch.tensor([0] * 3 + [1] * 6), torch.tensor([0, 1]))
    b = data.batch(torch.arange(2))
    graph, nodes = enc(b.x, b.edge_index, b.batch, 2)
    torch.testing.assert_close(nodes[:3], nodes[3:6])
    torch.testing.assert_close(graph[1], 2 * graph[0])
    assert graph[0].abs().sum() > 0


def test_building_the_encoder_leaves_no_generated_module_in_the_temp_dir(tmp_path, monkeypatch) -> None:
    """PyG renders each layer class's ``propagate`` to ``<tempdir>/torch_geometric.…_propagate_<random>.py`` (once per
    process) and never deletes it: one file per graph run and per test process piled up (332 in a day). The
    template is forced to render again here, with the temp dir pointed at ``tmp_path``, which must stay empty."""
    import sys
    import tempfile

    from torch_geometric.nn import GINConv
    from torch_geometric.nn.conv import MessagePassing

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for attr in ("propagate", "collect", "_orig_propagate", "_jinja_propagate"):   # restored after the test
        monkeypatch.setattr(GINConv, attr, getattr(GINConv, attr, None), raising=False)
    monkeypatch.setattr(GINConv, "propagate", MessagePassing.propagate)   # as before the first GINConv was built
    monkeypatch.delitem(sys.modules, "torch_geometric.nn.conv.gin_conv_GINConv_propagate", raising=False)
    enc = cl.make_encoder("gin", in_dim=2, hidden_dim=4, num_layers=2)
    assert GINConv.propagate.__module__ == "torch_geometric.nn.conv.gin_conv_GINConv_propagate"  # it did render
    b = _batch(torch.randn(7, 2))
    graph, _ = enc(b.x, b.edge_index, b.batch, b.num_graphs)
    assert graph.shape == (2, 8)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_gin_defaults_output_size_and_fixed_epsilon(check_documented_hparams) -> None:
    """GraphCL's unsupervised TU setting (32 units, 3 layers, batch norm); the embedding has L·hidden entries; GIN-0
    keeps ε = 0 fixed, so the model has no ε parameter to train."""
    from contrastlab.encoders.gin import GINEncoder

    check_documented_hparams(GINEncoder, {"hidden_dim": 32, "num_layers": 3, "batch_norm": True})
    enc = GINEncoder()
    assert enc.in_dim == 1 and enc.out_dim == 96
    enc = cl.make_encoder("gin", in_dim=2, hidden_dim=5, num_layers=3)
    assert enc.out_dim == 15 and not any("eps" in name for name, _ in enc.named_parameters())
