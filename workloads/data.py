"""Datasets the pipeline makes, deterministic from a seed.

images: real JPEG files (about 500x375, quality 90, ~70 KB) in ImageFolder layout, class k's
        images tinted by a hue of its own so a model can learn them; both torchvision and DALI
        decode them.
tokens: a .npy stream of token ids with a Zipf unigram law and learnable bigram structure.
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image

WIDTH, HEIGHT, QUALITY = 500, 375, 90


def _smooth_noise(rng, shape_lo, size, scale, resample):
    noise = rng.standard_normal((*shape_lo, 3)) * scale + 128
    img = Image.fromarray(noise.clip(0, 255).astype(np.uint8)).resize(size, resample)
    return np.asarray(img, dtype=np.float32) - 128


def make_image(seed: int, cls: int, n_classes: int) -> Image.Image:
    """One 500x375 RGB image: a class hue, soft blobs, mid-scale texture and fine grain."""
    rng = np.random.default_rng(seed)
    hue = cls / n_classes
    base = np.array([np.sin(2 * np.pi * (hue + k / 3)) * 0.5 + 0.5 for k in range(3)]) * 200 + 20
    blobs = _smooth_noise(rng, (6, 8), (WIDTH, HEIGHT), 40, Image.BICUBIC)
    texture = _smooth_noise(rng, (HEIGHT // 8, WIDTH // 8), (WIDTH, HEIGHT), 34, Image.BILINEAR)
    grain = rng.standard_normal((HEIGHT, WIDTH, 1)) * 7.5
    return Image.fromarray((base + blobs + texture + grain).clip(0, 255).astype(np.uint8))


def _write_image(args) -> int:
    path, seed, cls, n_classes = args
    tmp = path.with_suffix(".tmp")
    make_image(seed, cls, n_classes).save(tmp, format="JPEG", quality=QUALITY)
    os.replace(tmp, path)
    return path.stat().st_size


def make_images(root: str | Path, n: int, classes: int, seed: int = 0, jobs: int | None = None) -> dict:
    """Write n JPEGs under root/class_XXX/; returns (and writes to root/dataset.json) a summary."""
    root = Path(root)
    tasks = []
    for i in range(n):
        cls = i % classes
        folder = root / f"class_{cls:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        tasks.append((folder / f"img_{i:06d}.jpg", seed * 1_000_003 + i, cls, classes))
    with ProcessPoolExecutor(max_workers=jobs or min(16, os.cpu_count() or 1)) as pool:
        sizes = list(pool.map(_write_image, tasks, chunksize=16))
    info = {"kind": "images", "files": n, "classes": classes, "seed": seed,
            "width": WIDTH, "height": HEIGHT, "quality": QUALITY,
            "mean_kb": round(sum(sizes) / len(sizes) / 1e3, 1)}
    (root / "dataset.json").write_text(json.dumps(info, indent=1))
    return info


def make_tokens(path: str | Path, n: int, vocab: int = 10000, seed: int = 0) -> dict:
    """Write n token ids to path (.npy, int32): Zipf unigrams, half followed by a fixed successor."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocab + 1)
    p = 1.0 / ranks
    draws = rng.choice(vocab, size=n, p=p / p.sum())
    successor = rng.permutation(vocab)
    follow = rng.random(n) < 0.5
    tokens = draws.copy()
    tokens[1:][follow[1:]] = successor[draws[:-1][follow[1:]]]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.npy")
    np.save(tmp, tokens.astype(np.int32))
    os.replace(tmp, path)
    info = {"kind": "tokens", "tokens": n, "vocab": vocab, "seed": seed}
    path.with_suffix(".json").write_text(json.dumps(info, indent=1))
    return info


def check_dataset(path: str | Path, kind: str) -> Path:
    """A real or generated dataset path, checked before any run starts; one clear error otherwise."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"dataset {path} does not exist")
    if kind == "images":
        if not path.is_dir() or not any(p.suffix.lower() in (".jpg", ".jpeg") for p in path.rglob("*")):
            raise FileNotFoundError(f"dataset {path} holds no .jpg files in class folders")
    elif kind == "tokens" and (path.suffix != ".npy" or path.stat().st_size == 0):
        raise FileNotFoundError(f"dataset {path} is not a non-empty .npy file of token ids")
    return path
