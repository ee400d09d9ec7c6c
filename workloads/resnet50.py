"""ResNet-50 (torchvision) on JPEG images: the articles' main case."""
from workloads.base import VisionWorkload, register


@register
class ResNet50(VisionWorkload):
    name = "resnet50"
    cnn = True
    defaults = {
        "cpu": {"batch_size": 8, "image_size": 64, "lr": 0.002},
        "gpu": {"batch_size": 256, "image_size": 224, "lr": 0.02},
    }

    def build_model(self):
        import torchvision  # imported here: a process that trains another workload never pays for it
        return torchvision.models.resnet50(num_classes=self.params["num_classes"])
