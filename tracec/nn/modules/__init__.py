"""tracec.nn's layers, one family per file (as PyTorch lays them out)."""
from tracec.nn.modules.module import Module  # noqa: F401
from tracec.nn.modules.container import (Container, ModuleDict, ModuleList, ParameterDict,  # noqa: F401
                                         ParameterList, Sequential)
from tracec.nn.modules.linear import Bilinear, Identity, Linear  # noqa: F401
from tracec.nn.modules.conv import *  # noqa: F401,F403
from tracec.nn.modules.pooling import *  # noqa: F401,F403
from tracec.nn.modules.padding import *  # noqa: F401,F403
from tracec.nn.modules.normalization import *  # noqa: F401,F403
from tracec.nn.modules.activation import *  # noqa: F401,F403
from tracec.nn.modules.dropout import *  # noqa: F401,F403
from tracec.nn.modules.sparse import Embedding, EmbeddingBag  # noqa: F401
from tracec.nn.modules.flatten import Flatten, Unflatten  # noqa: F401
from tracec.nn.modules.fold import Fold, Unfold  # noqa: F401
from tracec.nn.modules.distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from tracec.nn.modules.channelshuffle import ChannelShuffle  # noqa: F401
from tracec.nn.modules.loss import *  # noqa: F401,F403
from tracec.nn.modules.rnn import (GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase,  # noqa: F401
                                   RNNCell, RNNCellBase)
from tracec.nn.modules.attention import MultiheadAttention  # noqa: F401
from tracec.nn.modules.transformer import (Transformer, TransformerDecoder,  # noqa: F401
                                           TransformerDecoderLayer, TransformerEncoder,
                                           TransformerEncoderLayer)
from tracec.nn.modules.pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: F401
from tracec.nn.modules.upsampling import (Upsample, UpsamplingBilinear2d,  # noqa: F401
                                          UpsamplingNearest2d)
from tracec.nn.modules.lazy import *  # noqa: F401,F403
from tracec.nn.modules.data_parallel import DataParallel  # noqa: F401
from tracec.nn.modules.adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401
from tracec.nn.modules import utils  # noqa: F401,E402  (torch.nn.modules.utils._pair)
from tracec.nn.modules import batchnorm, instancenorm  # noqa: F401,E402  (their bases, by the torch path)
