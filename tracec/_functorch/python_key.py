"""``torch._functorch.python_key``: ``make_fx`` (imported by ``functorch``).
tracec has no FX graph tracer of tensor programs (its tracer is
``tracec.compile``'s): calling it says so."""


def make_fx(f, decomposition_table=None, tracing_mode="real", _allow_non_fake_inputs=False,
            *, pre_dispatch=False, record_module_stack=False,
            _allow_fake_constant=False, _error_on_data_dependent_ops=True):
    def unavailable(*args, **kwargs):
        raise NotImplementedError("make_fx: tracec does not trace programs into torch.fx "
                                  "graphs (use tracec.compile / torch.compile)")
    return unavailable
