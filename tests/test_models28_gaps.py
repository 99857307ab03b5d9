"""Gaps the models28 programs (tests/programs/models28) found in tracec,
each checked against torch 2.13."""
import numpy as np
import pytest

import tracec

pt = pytest.importorskip("torch")


def _raised(makers, exc=Exception):
    """(type name, message) of what each of ``makers`` raises (each must raise ``exc``)."""
    out = []
    for make in makers:
        with pytest.raises(exc) as e:
            make()
        out.append((type(e.value).__name__, str(e.value)))
    return out


def _graph_names(lib):
    x = lib.ones(2, 3, requires_grad=True)
    w = lib.ones(3, 4, requires_grad=True)
    y = (x.view(3, 2).t() @ w.exp()).relu()
    z = (y * 2).sum()
    names = [type(y.grad_fn).__name__, type(z.grad_fn).__name__]
    # torchviz's walk: every node's class name through next_functions
    seen, todo = [], [z.grad_fn]
    while todo:
        fn = todo.pop()
        seen.append(type(fn).__name__)
        todo.extend(f for f, _ in reversed(fn.next_functions) if f is not None)
    return names, seen, type(z.grad_fn).__module__


def test_grad_fn_class_is_named_as_torchs_node():
    # type(logits.grad_fn).__name__ was "Node" for every built-in backward
    # (its repr and name() were right); torchviz names graph nodes by it
    assert _graph_names(tracec) == _graph_names(pt)
    x = tracec.ones(2, requires_grad=True)
    y = x * 3
    assert isinstance(y.grad_fn, tracec.autograd.graph.Node)
    y.sum().backward()          # a retyped node still runs its backward
    assert x.grad.tolist() == [3.0, 3.0]


def _cuda_types(lib):
    C = lib.cuda.FloatTensor
    out = [repr(C), str(C.dtype).split(".")[1], C.is_cuda, C.__name__, isinstance(lib.ones(2), C),
           isinstance(lib.ones(2), lib.FloatTensor), str(lib.cuda.LongTensor.dtype).split(".")[1],
           sorted(n for n in dir(lib.cuda) if n.endswith("Tensor") and n[0].isupper())]
    x = lib.ones(2, 3)
    # build_targets' spelling: the CPU type is chosen without touching CUDA
    FloatTensor = lib.cuda.FloatTensor if x.is_cuda else lib.FloatTensor
    out.append(tuple(FloatTensor(2, 3).fill_(0).shape))
    return out + _raised((lambda: C(2, 3), lambda: C([1.0]), lambda: lib.cuda.BoolTensor(2)),
                         TypeError)


def test_torch_cuda_legacy_tensor_types_exist_on_cpu():
    # eriklindernoren/PyTorch-YOLOv3: `torch.cuda.FloatTensor if cuda else
    # torch.FloatTensor`; torch.cuda had no FloatTensor (AttributeError)
    assert _cuda_types(tracec) == _cuda_types(pt)
    with pytest.raises(RuntimeError):
        tracec.ones(2).type(tracec.cuda.FloatTensor)       # no eager CUDA tensors here


def _device_state_helpers(lib):
    from importlib import import_module
    ck = import_module(lib.__name__ + ".utils.checkpoint")
    x = lib.ones(2, requires_grad=True)
    ids, states = ck.get_device_states(x, [lib.zeros(1)], {"k": 3})
    ck.set_device_states(ids, states)
    ck.set_device_states([], [], device_type="meta")
    d = ck.detach_variable((x, 3, lib.ones(1)))
    with pytest.raises(RuntimeError, match="Only tuple of tensors is supported"):
        ck.detach_variable([x])
    return (ids, states, lib.cuda._initialized, lib.cuda.is_initialized(),
            [getattr(a, "requires_grad", None) for a in d], d[0] is x, d[0].is_leaf)


def test_checkpoint_device_state_helpers_and_cuda_initialized():
    # reformer-pytorch's reversible.py imports get_device_states /
    # set_device_states from torch.utils.checkpoint (ImportError) and reads
    # torch.cuda._initialized (AttributeError)
    assert _device_state_helpers(tracec) == _device_state_helpers(pt)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        tracec.utils.checkpoint.check_backward_validity((tracec.ones(1), 2))


def _batched_grads(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    z = lib.ones(1, requires_grad=True)
    y = x * lib.tensor([2.0, 3.0])
    out = [lib.autograd.grad(y, x, lib.eye(2), is_grads_batched=True, retain_graph=True)[0].tolist()]
    g = lib.autograd.grad(y, [x, z], lib.eye(2), is_grads_batched=True, allow_unused=True,
                          retain_graph=True)
    out.append((g[0].shape[0], g[1]))
    out.append(lib.autograd.grad([y, y.sum()], [x], [lib.eye(2), lib.tensor([1.0, 2.0])],
                                 is_grads_batched=True, retain_graph=True)[0].tolist())
    # create_graph: the batched vector-Jacobian products are differentiable
    h = lib.autograd.grad(y ** 2, x, lib.eye(2) * 2, is_grads_batched=True, create_graph=True)[0]
    out.append((h.tolist(), lib.autograd.grad(h.sum(), x)[0].tolist()))
    with pytest.raises(RuntimeError) as e:
        lib.autograd.grad(x * 2, x, lib.ones(2), is_grads_batched=True)
    out.append(str(e.value).replace("tracec.", "torch."))
    return out


def test_autograd_grad_is_grads_batched():
    # the Jacobian helpers of SIREN-style code (and torch.autograd.functional's
    # vectorize=True path) pass a batch of grad_outputs; tracec raised
    # NotImplementedError
    assert _batched_grads(tracec) == _batched_grads(pt)


def _loader_attrs(lib):
    data = lib.utils.data

    class AudioDataLoader(data.DataLoader):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.collate_fn = len           # allowed after __init__

    dl = AudioDataLoader([1, 2, 3], batch_size=2)
    out = [list(dl)]
    for attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                 "persistent_workers"):
        with pytest.raises(ValueError) as e:
            setattr(dl, attr, None)
        out.append(str(e.value))
    dl.num_workers = 0
    dl.pin_memory = False
    return out


def test_dataloader_refuses_its_fixed_attributes_after_init():
    # PyTorch's DataLoader.__setattr__: tracec let `loader.batch_size = 4`
    # pass silently (the batch sampler kept the old size)
    assert _loader_attrs(tracec) == _loader_attrs(pt)


def _version(t):
    return t._version


def _dirty_function(lib):
    class Double_(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            a.mul_(2)
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class Leaky(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            a.mul_(2)
            ctx.mark_dirty(a)
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x.clone()
    v0 = _version(y)
    z = Double_.apply(y)
    out = [z is y, _version(y) - v0, type(y.grad_fn).__name__, y.is_leaf, z.tolist()]
    (z * z).sum().backward()
    out.append(x.grad.tolist())
    n = lib.ones(2)
    out.append((Double_.apply(n).requires_grad, _version(n)))
    return out + _raised((lambda: Double_.apply(x), lambda: Leaky.apply(x.clone())), RuntimeError)


def test_custom_function_mark_dirty():
    # in-place custom Functions (ctx.mark_dirty): tracec's ctx had no
    # mark_dirty (AttributeError)
    assert _dirty_function(tracec) == _dirty_function(pt)


def _bad_input_errors(lib):
    nn, F = lib.nn, lib.nn.functional
    i16 = lib.tensor([[2], [0]], dtype=lib.int16)
    cases = [
        lambda: lib.ones(2, 3).gather(1, i16),                 # (accepted int16)
        lambda: lib.ones(2, 3).gather(1, i16.float()),
        lambda: lib.ones(2, 3).scatter(1, i16, 5.0),
        lambda: lib.zeros(0).argmax(), lambda: lib.zeros(0).argmin(),
        lambda: lib.zeros(0, 3).argmax(0), lambda: lib.zeros(2, 0).argmax(-1, keepdim=True),
        lambda: lib.ones(4).chunk(0), lambda: lib.ones(4).chunk(-1),
        lambda: nn.GroupNorm(3, 4),
        lambda: nn.GroupNorm(2, 4)(lib.ones(2, 6)),
        lambda: F.group_norm(lib.ones(2, 4), 2, lib.ones(4), lib.ones(3)),
        lambda: F.group_norm(lib.ones(2, 4), 2, lib.ones(2, 2)),
        lambda: F.group_norm(lib.ones(4), 2),
        lambda: nn.Hardtanh(20, 0), lambda: nn.Hardtanh(1, 1),
        lambda: F.hardtanh(lib.ones(2), 2.0, 1.0),
        lambda: (lib.ones(2, requires_grad=True) * 2).requires_grad_(False),
    ]
    out = _raised(cases)
    out.append(lib.zeros(0, 3).argmax(1).shape[0])      # a non-empty reduced dim is fine
    out.append(F.hardtanh(lib.tensor([3.0, -3.0]), 1.0, 1.0).tolist())
    return out


def test_bad_input_errors_of_the_programs_ops():
    # gather accepted int16 indices and named only int64; argmax / argmin
    # on an empty dim raised a ShapeError of tracec's wording; chunk,
    # GroupNorm (weight / bias of the wrong size surfaced as a reshape
    # error), Hardtanh (min >= max accepted) and requires_grad_ on a
    # non-leaf (its hint cut off) differed from PyTorch's
    assert _bad_input_errors(tracec) == _bad_input_errors(pt)


def _pack_lengths(lib):
    rnn = lib.nn.utils.rnn
    x = lib.ones(3, 2, 1)
    out = []
    for lengths in (lib.tensor([[3, 2]]), [[3, 2]], lib.tensor(3)):
        with pytest.raises(RuntimeError) as e:
            rnn.pack_padded_sequence(x, lengths)
        out.append(str(e.value))
    for lengths in (lib.tensor([3.0, 2.0]), [3, 2], lib.tensor([2, 3], dtype=lib.int32)):
        out.append(rnn.pack_padded_sequence(x, lengths, enforce_sorted=False).batch_sizes.tolist())
    return out


def test_pack_padded_sequence_wants_one_dimensional_lengths():
    # deepspeech's pack_padded_sequence(x, output_lengths): two-dimensional
    # lengths were flattened silently (PyTorch refuses them)
    assert _pack_lengths(tracec) == _pack_lengths(pt)


def _cuda_surface_on_cpu(lib):
    c = lib.cuda
    out = [c.seed(), c.seed_all(), c.set_rng_state(lib.zeros(3, dtype=lib.uint8)),
           c.set_rng_state_all([]), c.get_rng_state_all(), c.get_arch_list(), dict(c.memory_stats())]
    with c.device(-1):
        pass
    with c.device_of(lib.ones(1)):
        pass
    with c.stream(None):
        pass
    return out + _raised((c.get_rng_state, c.initial_seed, c.mem_get_info, c.current_stream,
                          lambda: c.device(0).__enter__(), c.Stream,
                          lambda: c.Event(enable_timing=True),
                          lambda: lib.random.fork_rng(devices=[0]).__enter__()),
                         (AssertionError, RuntimeError))


def test_torch_cuda_rng_and_context_names_on_cpu():
    # seeding / checkpointing utilities call these unguarded (torch.cuda.seed_all,
    # get_rng_state_all, set_rng_state, with torch.cuda.device(-1)); tracec.cuda
    # had none of them (AttributeError); fork_rng(devices=[0]) ignored the device
    assert _cuda_surface_on_cpu(tracec) == _cuda_surface_on_cpu(pt)


def _multi_output_function_graph(lib):
    class Two(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3

    x = lib.ones(2, requires_grad=True)
    a, b = Two.apply(x)
    s = a + b
    nf = s.grad_fn.next_functions
    out = [type(a.grad_fn).__name__, a.grad_fn is b.grad_fn, a.grad_fn.name(),
           [(type(f).__name__, i) for f, i in nf], nf[0][0] is a.grad_fn,
           [(type(f).__name__, i) for f, i in (a * b).grad_fn.next_functions]]
    s.sum().backward()
    out.append(x.grad.tolist())
    return out


def test_multi_output_function_grad_fn_is_its_node():
    # each output of a multi-output custom Function showed a private edge
    # object as grad_fn (type "_FunctionOutput", a different one per output)
    # and next_functions gave output_nr 0 for every edge
    assert _multi_output_function_graph(tracec) == _multi_output_function_graph(pt)


EINSUM_BAD = [("ij->kk", [(2, 2)]), ("ij->k", [(2, 2)]), ("ij->i->j", [(2, 2)]), ("i1->i", [(2, 2)]),
              ("ij->ii", [(2, 2)]), ("i..j->i", [(2, 2)]), ("i......->i", [(2, 2)]),
              ("ij->i..", [(2, 2)]), ("ij->i.", [(2, 2)]),
              ("...ij,...jk->...ik", [(2, 2, 3), (3, 3, 4)])]


@pytest.mark.parametrize("eq,shapes", EINSUM_BAD)
def test_einsum_equation_errors_are_torchs(eq, shapes):
    # the xLSTM / Reformer einsum equations: tracec raised ValueError (PyTorch
    # RuntimeError), named no letter for a repeated output subscript, took
    # "->" inside the output for a subscript, and named an internal label for
    # an ellipsis dimension that does not broadcast
    msgs = []
    for lib in (tracec, pt):
        with pytest.raises(Exception) as e:
            lib.einsum(eq, *[lib.ones(*s) for s in shapes])
        msgs.append((type(e.value).__name__, str(e.value)))
    assert msgs[0] == msgs[1]


def _rank_and_pad_errors(lib):
    F = lib.nn.functional
    cases = [lambda: lib.nn.Conv1d(1, 1, 3)(lib.ones(1, 1, 2, 5)),
             lambda: F.conv2d(lib.ones(2, 2), lib.ones(1, 1, 1, 1)),
             lambda: F.conv3d(lib.ones(2, 2), lib.ones(1, 1, 1, 1, 1)),
             lambda: F.conv_transpose1d(lib.ones(1, 1, 1, 2), lib.ones(1, 1, 1)),
             lambda: F.max_pool1d(lib.ones(1, 1, 1, 4), 2), lambda: F.max_pool2d(lib.ones(2), 2),
             lambda: F.max_pool3d(lib.ones(2), 2), lambda: F.avg_pool1d(lib.ones(1, 1, 1, 4), 2),
             lambda: F.avg_pool3d(lib.ones(2), 2),
             lambda: F.pad(lib.ones(2, 2), (1,)), lambda: F.pad(lib.ones(2, 2), (1, 1, 1, 1, 1, 1))]
    return _raised(cases, RuntimeError)


def test_conv_pool_rank_and_pad_length_errors():
    # deepspeech's Conv2d stack / Lookahead's F.pad: tracec's wrong-rank and
    # pad-length messages had their own wording
    assert _rank_and_pad_errors(tracec) == _rank_and_pad_errors(pt)


def _ctc_no_frames(lib):
    r = np.random.default_rng(0)
    lp = lib.tensor(r.normal(size=(6, 3, 5)).astype(np.float32)).log_softmax(-1).requires_grad_()
    tg = lib.tensor([[1, 2], [3, 4], [2, 2]])
    out = []
    for zero_infinity in (False, True):
        for reduction in ("none", "sum", "mean"):
            loss = lib.nn.CTCLoss(reduction=reduction, zero_infinity=zero_infinity)(
                lp, tg, lib.tensor([0, 5, 0]), lib.tensor([1, 2, 0]))
            g, = lib.autograd.grad(loss.sum(), lp)
            out.append(([str(round(v, 4)) for v in loss.reshape(-1).tolist()],
                        round(g.abs().sum().item(), 3), g[:, 0].abs().sum().item()))
    ctc = lib.nn.CTCLoss()
    out += _raised([lambda: ctc(lp, tg, lib.tensor([-1, 5, 2]), lib.tensor([1, 2, 0])),
                    lambda: ctc(lp, tg[None], lib.tensor([6, 5, 4]), lib.tensor([1, 2, 0])),
                    lambda: ctc(lp, tg, lib.tensor([6, 5, 4]), lib.tensor([1, -2, 0]))],
                   RuntimeError)
    return out


def test_ctc_loss_with_no_frames_and_bad_lengths():
    # deepspeech's CTCLoss(zero_infinity=True): an utterance with no frames
    # left gave a finite loss from the first frame (PyTorch: inf, zeroed;
    # -0.0 for an empty target); negative lengths and 3-d targets were not
    # refused as PyTorch refuses them
    assert _ctc_no_frames(tracec) == _ctc_no_frames(pt)
