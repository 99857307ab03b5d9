"""tracec.nn's layers, one family per file (as PyTorch lays them out)."""
from tracec.nn.modules.module import Module  # noqa: F401
from tracec.nn.modules.container import (ModuleDict, ModuleList, ParameterDict,  # noqa: F401
                                         ParameterList, Sequential)
from tracec.nn.modules.linear import Bilinear, Identity, Linear  # noqa: F401
from tracec.nn.modules.conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d  # noqa: F401
from tracec.nn.modules.pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d,  # noqa: F401
                                       AvgPool2d, MaxPool1d, MaxPool2d)
from tracec.nn.modules.normalization import (BatchNorm1d, BatchNorm2d, GroupNorm,  # noqa: F401
                                             LayerNorm, RMSNorm)
from tracec.nn.modules.activation import (ELU, GELU, Hardtanh, LeakyReLU, LogSigmoid,  # noqa: F401
                                          LogSoftmax, Mish, ReLU, ReLU6, Sigmoid, SiLU,
                                          Softmax, Softmin, Softplus, Tanh)
from tracec.nn.modules.dropout import Dropout, Dropout1d, Dropout2d  # noqa: F401
from tracec.nn.modules.sparse import Embedding  # noqa: F401
from tracec.nn.modules.flatten import Flatten, Unflatten  # noqa: F401
from tracec.nn.modules.loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss,  # noqa: F401
                                    HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss,
                                    SmoothL1Loss)
from tracec.nn.modules.rnn import (GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase,  # noqa: F401
                                   RNNCell, RNNCellBase)
from tracec.nn.modules.attention import MultiheadAttention  # noqa: F401
from tracec.nn.modules.transformer import (Transformer, TransformerDecoder,  # noqa: F401
                                           TransformerDecoderLayer, TransformerEncoder,
                                           TransformerEncoderLayer)
from tracec.nn.modules.pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: F401
from tracec.nn.modules.upsampling import (Upsample, UpsamplingBilinear2d,  # noqa: F401
                                          UpsamplingNearest2d)
