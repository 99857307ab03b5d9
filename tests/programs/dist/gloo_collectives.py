"""The collectives of torch.distributed beyond all_reduce / broadcast /
all_gather, as data-parallel scripts call them (evaluation metrics gathered
with all_gather_object, a config broadcast with broadcast_object_list, a
loss reduced to rank 0, ...), over the gloo backend among three processes
the script starts itself."""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def work(rank, size, q):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = os.environ.get("GLOO_TEST_PORT", "29512")
    dist.init_process_group("gloo", rank=rank, world_size=size)
    out = []
    # reduce to a root (what other ranks' tensors hold after it is up to
    # the backend: gloo leaves partial sums there)
    t = torch.tensor([rank + 1.0, 2.0 * rank])
    dist.reduce(t, dst=1, op=dist.ReduceOp.SUM)
    if rank == 1:
        out.append(("reduce", t.tolist()))
    m = torch.tensor([3.0 - rank])
    dist.reduce(m, dst=0, op=dist.ReduceOp.MIN)
    if rank == 0:
        out.append(("reduce_min", m.tolist()))
    # gather to a root
    g = [torch.zeros(2, dtype=torch.int64) for _ in range(size)] if rank == 2 else None
    dist.gather(torch.tensor([rank, rank * rank]), gather_list=g, dst=2)
    out.append(("gather", None if g is None else [x.tolist() for x in g]))
    # scatter from a root
    s = torch.zeros(3)
    parts = [torch.arange(3.0) + 10 * r for r in range(size)] if rank == 0 else None
    dist.scatter(s, scatter_list=parts, src=0)
    out.append(("scatter", s.tolist()))
    # reduce-scatters
    rs = torch.zeros(2)
    dist.reduce_scatter(rs, [torch.full((2,), float(rank + r)) for r in range(size)])
    out.append(("reduce_scatter", rs.tolist()))
    rst = torch.zeros(2)
    dist.reduce_scatter_single(rst, torch.arange(6.0) * (rank + 1))
    out.append(("reduce_scatter_single", rst.tolist()))
    ag = torch.zeros(3, 2)
    dist.all_gather_single(ag, torch.tensor([[rank, -rank]], dtype=torch.float32))
    out.append(("all_gather_single", ag.tolist()))
    # all_to_all
    outs = [torch.zeros(2) for _ in range(size)]
    dist.all_to_all(outs, [torch.tensor([100.0 * rank + r, -r]) for r in range(size)])
    out.append(("all_to_all", [x.tolist() for x in outs]))
    # objects
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank, "acc": 0.5 + rank / 10, "name": "r" * (rank + 1)})
    out.append(("all_gather_object", objs))
    cfg = [{"lr": 0.1, "layers": [64, 32]}, "resnet", 7] if rank == 1 else [None, None, None]
    dist.broadcast_object_list(cfg, src=1)
    out.append(("broadcast_object_list", cfg))
    got = [None] * size if rank == 0 else None
    dist.gather_object((rank, torch.tensor([rank * 1.5])), got, dst=0)
    out.append(("gather_object", None if got is None else [(a, b.tolist()) for a, b in got]))
    sc = [None]
    dist.scatter_object_list(sc, [{"part": r} for r in range(size)] if rank == 2 else None, src=2)
    out.append(("scatter_object_list", sc))
    if rank == 0:
        dist.send_object_list([("hello", 1), [2, 3]], dst=2)
    elif rank == 2:
        box = [None, None]
        who = dist.recv_object_list(box, src=0)
        out.append(("recv_object_list", who, box))
    # batched point-to-point: a ring
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    recv = torch.zeros(2)
    ops = [dist.P2POp(dist.isend, torch.tensor([rank, rank + 0.5]), nxt),
           dist.P2POp(dist.irecv, recv, prv)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    out.append(("batch_isend_irecv", recv.tolist()))
    # wrong use, as PyTorch reports it
    try:
        dist.gather(torch.zeros(1), gather_list=[torch.zeros(1)] * size if rank != 0 else None,
                    dst=0)
    except ValueError as e:
        out.append(("gather_error", rank, str(e)))
    dist.monitored_barrier()
    out.append(("ranks", dist.get_global_rank(dist.group.WORLD, rank),
                dist.get_group_rank(dist.group.WORLD, rank), dist.get_node_local_rank(fallback_rank=rank),
                dist.is_backend_available("gloo")))
    dist.destroy_process_group()
    q.put((rank, out))


if __name__ == "__main__":
    q = mp.Queue()
    ps = [mp.Process(target=work, args=(r, 3, q)) for r in range(3)]
    for p in ps:
        p.start()
    res = dict(q.get(timeout=120) for _ in ps)
    for p in ps:
        p.join()
    for r in range(3):
        for item in res[r]:
            print(r, item)
    print([p.exitcode for p in ps])
