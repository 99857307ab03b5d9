# Hugging Face diffusers' "Train a diffusion model" tutorial (the
# unconditional image generation example), with diffusers itself from PyPI:
# a UNet2DModel with attention down/up blocks, DDPMScheduler.add_noise,
# an AdamW step under get_cosine_schedule_with_warmup, then sampling with
# DDPMPipeline and a DDIMScheduler loop, the model saved with
# save_pretrained and loaded back.  Changed for a CPU test: 16x16 random
# "images" instead of the Smithsonian butterflies, a two-level UNet with 16
# and 32 channels, 3 steps, 5 sampling steps.
import tempfile

import torch
import torch.nn.functional as F
from diffusers import DDIMScheduler, DDPMPipeline, DDPMScheduler, UNet2DModel
from diffusers.optimization import get_cosine_schedule_with_warmup

torch.manual_seed(0)
model = UNet2DModel(
    sample_size=16,  # the target image resolution
    in_channels=3,  # the number of input channels, 3 for RGB images
    out_channels=3,  # the number of output channels
    layers_per_block=1,  # how many ResNet layers to use per UNet block
    block_out_channels=(16, 32),  # the number of output channels for each UNet block
    norm_num_groups=8,
    down_block_types=(
        "DownBlock2D",  # a regular ResNet downsampling block
        "AttnDownBlock2D",  # a ResNet downsampling block with spatial self-attention
    ),
    up_block_types=(
        "AttnUpBlock2D",  # a regular ResNet upsampling block with spatial self-attention
        "UpBlock2D",  # a regular ResNet upsampling block
    ),
)
print("parameters", sum(p.numel() for p in model.parameters()))
print(model.config.sample_size, model.config.block_out_channels, model.dtype, model.device)

noise_scheduler = DDPMScheduler(num_train_timesteps=100)
sample_image = torch.randn(1, 3, 16, 16)
print("Input shape:", sample_image.shape)
print("Output shape:", model(sample_image, timestep=0).sample.shape)

optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
lr_scheduler = get_cosine_schedule_with_warmup(optimizer=optimizer, num_warmup_steps=1,
                                               num_training_steps=4)
clean_images = torch.randn(4, 3, 16, 16)
for step in range(3):
    # Sample noise to add to the images
    noise = torch.randn(clean_images.shape)
    bs = clean_images.shape[0]
    # Sample a random timestep for each image
    timesteps = torch.randint(0, noise_scheduler.config.num_train_timesteps, (bs,),
                              dtype=torch.int64)
    # Add noise to the clean images according to the noise magnitude at each timestep
    noisy_images = noise_scheduler.add_noise(clean_images, noise, timesteps)
    # Predict the noise residual
    noise_pred = model(noisy_images, timesteps, return_dict=False)[0]
    loss = F.mse_loss(noise_pred, noise)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    lr_scheduler.step()
    optimizer.zero_grad()
    print(f"step {step} loss {loss.item():.5f} lr {lr_scheduler.get_last_lr()[0]:.6f}")

model.eval()
pipeline = DDPMPipeline(unet=model, scheduler=DDPMScheduler(num_train_timesteps=100))
pipeline.set_progress_bar_config(disable=True)
images = pipeline(batch_size=2, generator=torch.manual_seed(0), num_inference_steps=5,
                  output_type="np").images
print("pipeline images", images.shape, images.dtype, round(float(images.mean()), 4))

ddim = DDIMScheduler(num_train_timesteps=100)
ddim.set_timesteps(5)
x = torch.randn(1, 3, 16, 16)
with torch.no_grad():
    for t in ddim.timesteps:
        x = ddim.step(model(x, t).sample, t, x).prev_sample
print(ddim.timesteps, round(x.mean().item(), 4), round(x.std().item(), 4))

with tempfile.TemporaryDirectory() as tmp:
    model.save_pretrained(tmp)
    reloaded = UNet2DModel.from_pretrained(tmp)
    with torch.no_grad():
        same = torch.allclose(reloaded(sample_image, 3).sample, model(sample_image, 3).sample,
                              atol=1e-5)
    print("reloaded == saved", same, type(reloaded).__name__)
