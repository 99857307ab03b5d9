"""``torch.distributed.launch`` (deprecated by PyTorch for ``torchrun``) on
tracec: ``tracec.distributed.run``'s launcher plus ``--use-env``; without
it each worker gets ``--local-rank=N`` as an argument (the legacy
behaviour), as PyTorch 2.13's does, and ``main`` warns (FutureWarning)."""
from __future__ import annotations

import warnings

from tracec.distributed.run import get_args_parser, run

__all__ = ["parse_args", "launch", "main"]

_DEPRECATION = (
    "The module torch.distributed.launch is deprecated\n"
    "and will be removed in future. Use torchrun.\n"
    "Note that --use-env is set by default in torchrun.\n"
    "If your script expects `--local-rank` argument to be set, please\n"
    "change it to read from `os.environ['LOCAL_RANK']` instead. See \n"
    "https://pytorch.org/docs/stable/distributed.html#launch-utility for \n"
    "further instructions\n")


def parse_args(args):
    parser = get_args_parser()
    parser.add_argument(
        "--use-env", "--use_env", default=False, action="store_true",
        help="Use environment variable to pass 'local rank'. For legacy reasons, the default "
             "value is False. If set to True, the script will not pass --local-rank as "
             "argument, and will instead set LOCAL_RANK.")
    return parser.parse_args(args)


def launch(args) -> None:
    if args.no_python and not args.use_env:
        raise ValueError("When using the '--no-python' flag, you must also set the "
                         "'--use-env' flag.")
    run(args)


def main(args=None) -> None:
    warnings.warn(_DEPRECATION, FutureWarning, stacklevel=2)
    launch(parse_args(args))


if __name__ == "__main__":
    main()
