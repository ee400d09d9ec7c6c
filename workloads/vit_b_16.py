"""ViT-B/16 (torchvision) on JPEG images: the article's DataLoader-bound transformer."""
from workloads.base import VisionWorkload, register


@register
class ViTB16(VisionWorkload):
    name = "vit_b_16"
    attention = True
    defaults = {
        "cpu": {"batch_size": 4, "image_size": 64, "lr": 0.002},
        "gpu": {"batch_size": 128, "image_size": 224, "lr": 0.005},
    }

    def build_model(self):
        import torchvision
        return torchvision.models.vit_b_16(image_size=self.params["image_size"],
                                           num_classes=self.params["num_classes"])
