"""The graph trainer at unit level: model sizes, the InfoGraph pairs, both objectives, one step, frozen embeddings.

References are written from the definitions in docs/graph.md §2–3 (GraphCL: loss of the two_view batch of two
augmented views; InfoGraph mode: cos/t logits of every node against every graph, its own graph the positive).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import contrastlab as cl
from contrastlab.data.graph_augment import augment
from contrastlab.data.graphs import GraphDataset
from contrastlab.platform.config import resolve_config
from contrastlab.plugins.graph.task import GraphTask
from contrastlab.plugins.graph.trainer import GraphTrainer, build_model, embed_dataset, local_global_batch

CPU = torch.device("cpu")


def config(*sets: str, loss: str = "dcl"):
    return resolve_config(GraphTask(), preset="smoke", loss=loss, sets=["encoder.hidden_dim=6", "encoder.num_layers=2",
                                                                         *sets])


def dataset(graphs: int = 11) -> GraphDataset:
    """Paths of 3..6 nodes with random 4-d features."""
    gen = torch.Generator().manual_seed(0)
    edges, owner, offset = [], [], 0
    for k in range(graphs):
        n = 3 + k % 4
        edges += [(offset + i, offset + i + 1) for i in range(n - 1)]
        owner += [k] * n
        offset += n
    return GraphDataset.from_edges("P", torch.randn(offset, 4, generator=gen), torch.tensor(edges).T,
                                   torch.tensor(owner), torch.arange(graphs) % 2)


def test_local_global_logits_are_cosine_over_temperature_with_the_own_graph_as_positive() -> None:
    z_nodes, z_graphs = torch.randn(6, 5), torch.randn(3, 5)
    batch = torch.tensor([0, 0, 1, 1, 2, 2])
    cb = local_global_batch(z_nodes, z_graphs, batch, 0.4)
    cos = torch.tensor([[F.cosine_similarity(z_nodes[i], z_graphs[g], dim=0).item() for g in range(3)]
                        for i in range(6)])
    torch.testing.assert_close(cb.neg_logits, cos / 0.4)
    torch.testing.assert_close(cb.pos_logits[:, 0], cos[torch.arange(6), batch] / 0.4)
    own = torch.zeros(6, 3, dtype=torch.bool)
    own[torch.arange(6), batch] = True
    assert torch.equal(cb.neg_mask, ~own)                                 # the G − 1 other graphs are negatives
    assert cb.bounded and cb.temperature == 0.4


def test_projection_heads_default_to_the_embedding_size_and_the_node_head_exists_in_infograph_mode() -> None:
    d = 12                                                                # L·hidden = 2·6
    plain = build_model(config(), 4)
    assert plain.head.net[0].in_features == d and plain.head.net[0].out_features == d and plain.head.out_dim == d
    assert plain.local_head is None
    sized = build_model(config("model.proj_hidden=5", "model.proj_dim=3", "model.mode=infograph"), 4)
    assert sized.head.net[0].out_features == 5 and sized.head.out_dim == 3
    assert sized.local_head is not None and sized.local_head.net[0].out_features == 5
    assert sized.local_head.out_dim == 3
    h = torch.randn(5, 12)
    for head in (sized.head, sized.local_head):                           # Linear → ReLU → Linear, no batch norm
        head.train()
        lin1, lin2 = head.net[0], head.net[-1]
        torch.testing.assert_close(head(h), lin2(torch.relu(lin1(h))))
        torch.testing.assert_close(head(h[:1]), head(h)[:1])              # a graph's z ignores the rest of the batch


def test_compute_loss_is_the_loss_of_the_documented_batch_in_both_modes() -> None:
    data = dataset()
    b = data.batch(torch.arange(len(data)))
    torch.manual_seed(0)
    tr = GraphTrainer(config("sampler.temperature=0.3"), 4, CPU)
    got = tr.compute_loss(b, torch.Generator().manual_seed(9))
    g = torch.Generator().manual_seed(9)
    v1, v2 = augment(b, tr.spec, g), augment(b, tr.spec, g)
    z1, z2 = tr.model(v1)[1], tr.model(v2)[1]
    ref = cl.make_loss("dcl")(cl.make_sampler("two_view", temperature=0.3)(z1, z2))
    torch.testing.assert_close(got, ref)
    torch.manual_seed(0)
    info = GraphTrainer(config("sampler.temperature=0.3", "model.mode=infograph"), 4, CPU)
    got = info.compute_loss(b, torch.Generator().manual_seed(9))
    _, z, nodes = info.model(b)
    assert info.model.local_head is not None
    ref = cl.make_loss("dcl")(local_global_batch(info.model.local_head(nodes), z, b.batch, 0.3))
    torch.testing.assert_close(got, ref)


def test_step_updates_the_model_and_returns_a_detached_loss_with_the_loss_statistics() -> None:
    data = dataset()
    b = data.batch(torch.arange(len(data)))
    torch.manual_seed(0)
    tr = GraphTrainer(config(), 4, CPU)
    before = [p.detach().clone() for p in tr.model.parameters()]
    loss, stats = tr.step(b, torch.Generator().manual_seed(1))
    assert not loss.requires_grad and loss.ndim == 0
    assert stats and stats.keys() == tr.loss.last_stats.keys()           # DCL's statistics reach the logger
    assert any(not torch.equal(p0, p) for p0, p in zip(before, tr.model.parameters(), strict=True))


def test_embed_dataset_returns_encoder_outputs_in_dataset_order_whatever_the_batch_size() -> None:
    data = dataset(11)
    torch.manual_seed(0)
    model = build_model(config("model.proj_dim=3"), 4)
    model.train()
    whole = embed_dataset(model, data, 64, CPU)
    assert whole.shape == (11, 12) and model.training                    # encoder output h, mode restored
    model.eval()
    torch.testing.assert_close(whole, model(data.batch(torch.arange(11)))[0])
    for size in (1, 4, 10, 11):
        torch.testing.assert_close(embed_dataset(model, data, size, CPU), whole)
    assert not model.training                                             # eval mode stays eval
