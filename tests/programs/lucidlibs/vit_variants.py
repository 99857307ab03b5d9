"""lucidrains/vit-pytorch (the pip package, unmodified): the zoo of vision
transformer variants a user picks from (DeepViT, CrossViT, PiT, CvT,
Twins-SVT, CCT, MaxViT, RegionViT, NesT, ScalableViT,
NaViT, ATS, UViT, nViT, MobileViT, LeViT, ViViT, ...), tiny configurations
in training mode (their dropouts on): one forward and backward each, seeded
as a user seeds them; its tools (Recorder's attention maps, Extractor's
embeddings, DistillWrapper's distillation loss, learnable-memory Adapter);
and a configuration the library cannot build (a stage too narrow for
CrossFormer's cross-embedding split), refused as torch refuses it."""
import random

import torch
from vit_pytorch.ats_vit import ViT as ATSViT
from vit_pytorch.cct import CCT
from vit_pytorch.cross_vit import CrossViT
from vit_pytorch.crossformer import CrossFormer
from vit_pytorch.cvt import CvT
from vit_pytorch.deepvit import DeepViT
from vit_pytorch.distill import DistillableViT, DistillWrapper
from vit_pytorch.extractor import Extractor
from vit_pytorch.learnable_memory_vit import Adapter, ViT as MemoryViT
from vit_pytorch.levit import LeViT
from vit_pytorch.max_vit import MaxViT
from vit_pytorch.mobile_vit import MobileViT
from vit_pytorch.na_vit import NaViT
from vit_pytorch.nest import NesT
from vit_pytorch.normalized_vit import nViT
from vit_pytorch.parallel_vit import ViT as ParallelViT
from vit_pytorch.pit import PiT
from vit_pytorch.recorder import Recorder
from vit_pytorch.regionvit import RegionViT
from vit_pytorch.scalable_vit import ScalableViT
from vit_pytorch.simple_flash_attn_vit import SimpleViT as FlashViT
from vit_pytorch.simple_uvit import SimpleUViT
from vit_pytorch.simple_vit_with_fft import SimpleViT as FFTViT
from vit_pytorch.simple_vit_with_patch_dropout import SimpleViT as PatchDropoutViT
from vit_pytorch.simple_vit_with_register_tokens import SimpleViT as RegisterViT
from vit_pytorch.twins_svt import TwinsSVT
from vit_pytorch.vit_1d import ViT as ViT1d
from vit_pytorch.vit_3d import ViT as ViT3d
from vit_pytorch.vit import ViT
from vit_pytorch.vit_for_small_dataset import ViT as SmallDatasetViT
from vit_pytorch.vivit import ViViT

torch.manual_seed(0)
images = torch.randn(2, 3, 32, 32)


def check(name, build, x=images):
    torch.manual_seed(0)
    random.seed(0)
    model = build()
    out = model(x)
    out.sum().backward()
    grad = sum(p.grad.abs().sum() for p in model.parameters() if p.grad is not None)
    print(f"{name:12s} {tuple(out.shape)} sum {out.sum().item():.5f} grad l1 {grad.item():.3f}")
    print(" " * 12, out[0, :3])


small = dict(num_classes=5, dim=16, heads=2, mlp_dim=32)
check("deepvit", lambda: DeepViT(image_size=32, patch_size=8, depth=2, dropout=0.1,
                                 emb_dropout=0.1, **small))
check("crossvit", lambda: CrossViT(image_size=32, num_classes=5, depth=1, sm_dim=16,
                                   sm_patch_size=8, sm_enc_depth=1, sm_enc_heads=2,
                                   sm_enc_mlp_dim=32, lg_dim=24, lg_patch_size=16, lg_enc_depth=1,
                                   lg_enc_heads=2, lg_enc_mlp_dim=32, cross_attn_depth=1,
                                   cross_attn_heads=2, dropout=0.1, emb_dropout=0.1))
check("pit", lambda: PiT(image_size=32, patch_size=8, depth=(1, 1), dropout=0.1, emb_dropout=0.1,
                         **small))
check("cvt", lambda: CvT(num_classes=5, s1_emb_dim=8, s1_heads=1, s1_depth=1, s2_emb_dim=16,
                         s2_heads=2, s2_depth=1, s3_emb_dim=16, s3_heads=2, s3_depth=1))
check("twins-svt", lambda: TwinsSVT(
    num_classes=5, s1_emb_dim=8, s1_patch_size=4, s1_local_patch_size=2, s1_global_k=2,
    s1_depth=1, s2_emb_dim=16, s2_patch_size=2, s2_local_patch_size=2, s2_global_k=2, s2_depth=1,
    s3_emb_dim=16, s3_patch_size=2, s3_local_patch_size=2, s3_global_k=1, s3_depth=1,
    s4_emb_dim=16, s4_patch_size=1, s4_local_patch_size=1, s4_global_k=1, s4_depth=1))
check("cct", lambda: CCT(img_size=(32, 32), embedding_dim=16, n_conv_layers=1, kernel_size=3,
                         stride=2, padding=1, pooling_kernel_size=3, pooling_stride=2,
                         pooling_padding=1, num_layers=1, num_heads=2, mlp_ratio=2.,
                         num_classes=5, positional_embedding="learnable"))
check("maxvit", lambda: MaxViT(num_classes=5, dim_conv_stem=8, dim=16, dim_head=8, depth=(1, 1),
                               window_size=4, mbconv_expansion_rate=2,
                               mbconv_shrinkage_rate=0.25, dropout=0.1))
check("regionvit", lambda: RegionViT(dim=(8, 16, 16, 16), depth=(1, 1, 1, 1), window_size=2,
                                     num_classes=5, tokenize_local_3_conv=False, use_peg=False))
check("nest", lambda: NesT(image_size=32, patch_size=4, dim=16, heads=2, num_hierarchies=2,
                           block_repeats=(1, 1), num_classes=5))
check("scalablevit", lambda: ScalableViT(num_classes=5, dim=8, heads=(1, 1, 1, 1),
                                         depth=(1, 1, 1, 1), ssa_dim_key=(8, 8, 8, 8),
                                         reduction_factor=(2, 2, 1, 1),
                                         window_size=(2, 2, None, None), dropout=0.1),
      torch.randn(1, 3, 64, 64))


class PackedNaViT(torch.nn.Module):
    """NaViT on a batch of variable-resolution images (two sequences)."""

    def __init__(self):
        super().__init__()
        self.navit = NaViT(image_size=32, patch_size=8, depth=1, dropout=0.1, emb_dropout=0.1,
                           token_dropout_prob=0.1, **small)

    def forward(self, x):
        return self.navit([[x[0, :, :, :16], x[1, :, :16, :16]], [x[0]]])


check("navit", PackedNaViT)
check("ats", lambda: ATSViT(image_size=32, patch_size=8, depth=2, max_tokens_per_depth=(8, 4),
                            **small))
check("uvit", lambda: SimpleUViT(image_size=32, patch_size=8, depth=3, **small))
check("nvit", lambda: nViT(image_size=32, patch_size=8, depth=1, **small))
check("parallel", lambda: ParallelViT(image_size=32, patch_size=8, depth=1,
                                      num_parallel_branches=2, **small))
check("smalldata", lambda: SmallDatasetViT(image_size=32, patch_size=8, depth=1, dropout=0.1,
                                           emb_dropout=0.1, **small))
check("registers", lambda: RegisterViT(image_size=32, patch_size=8, depth=1,
                                       num_register_tokens=2, **small))
check("patchdrop", lambda: PatchDropoutViT(image_size=32, patch_size=8, depth=1,
                                           patch_dropout=0.5, **small))
check("fft", lambda: FFTViT(image_size=32, patch_size=8, freq_patch_size=8, depth=1, **small))
check("flash", lambda: FlashViT(image_size=32, patch_size=8, depth=1, **small))
check("vit1d", lambda: ViT1d(seq_len=32, patch_size=8, depth=1, channels=3, **small),
      torch.randn(2, 3, 32))
check("vit3d", lambda: ViT3d(image_size=16, frames=4, image_patch_size=8, frame_patch_size=2,
                             depth=1, **small), torch.randn(2, 3, 4, 16, 16))

check("mobilevit", lambda: MobileViT(image_size=(64, 64), dims=[16, 16, 16],
                                     channels=[8] * 10 + [16], num_classes=5),
      torch.randn(2, 3, 64, 64))
check("levit", lambda: LeViT(image_size=32, num_classes=5, stages=2, dim=(16, 24), depth=1,
                             heads=(2, 2), mlp_mult=2, dropout=0.1))
for variant in ("factorized_encoder", "factorized_self_attention"):
    check(variant[:12], lambda: ViViT(image_size=16, frames=4, image_patch_size=8,
                                      frame_patch_size=2, spatial_depth=1, temporal_depth=1,
                                      variant=variant, **small), torch.randn(2, 3, 4, 16, 16))

torch.manual_seed(0)
vit = ViT(image_size=16, patch_size=4, depth=2, **small)
recorder = Recorder(vit)
preds, attns = recorder(images[:1, :, :16, :16])
print("recorder", tuple(attns.shape), attns[0, 1, 1, 0, :4])
vit = recorder.eject()
embeddings = Extractor(vit, return_embeddings_only=True)(images[:1, :, :16, :16])
print("extractor", tuple(embeddings.shape), embeddings[0, 0, :4])
teacher = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 5))
student = DistillableViT(image_size=16, patch_size=4, depth=1, **small)
distill = DistillWrapper(student=student, teacher=teacher, temperature=3, alpha=0.5, hard=False)
loss = distill(images[:, :, :16, :16], torch.tensor([1, 3]))
loss.backward()
print(f"distillation loss {loss.item():.6f}")
adapter = Adapter(vit=MemoryViT(image_size=16, patch_size=4, depth=2, **small), num_classes=3,
                  num_memories_per_layer=2)
logits = adapter(images[:, :, :16, :16])
logits.sum().backward()
print("memory adapter", logits[0])

# a stage of 8 channels split over cross-embedding kernels (4, 8, 16, 32):
# a 1x1 conv with zero output channels, which torch refuses
try:
    CrossFormer(num_classes=5, dim=(8, 16, 16, 16), depth=(1, 1, 1, 1),
                global_window_size=(2, 2, 1, 1), local_window_size=2)(torch.randn(1, 3, 64, 64))
except RuntimeError as e:
    print("crossformer refused:", e)
