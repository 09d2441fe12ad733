#!/usr/bin/python3
"""Writes data/resize_bilinear.txt: PIL's crop + resize(BILINEAR) of a fixed 40x30 RGB image,
the path torchvision's RandomResizedCrop takes on a PIL image (F.resized_crop: img.crop(box)
then img.resize(size, BILINEAR), antialiased). The C++ resampler (src/data/resample.cpp) is
checked against it in tests/data/resample_test.cpp, which builds the same input image.

Format: per case one line "x y w h out_w out_h", then out_h lines of out_w*3 integers (RGB)."""
import argparse
import os

from PIL import Image

W, H = 40, 30
CASES = [(3, 2, 31, 25, 16, 16),   # downscale ~2x, aspect change
         (10, 5, 12, 9, 20, 20),   # upscale
         (0, 0, 40, 30, 7, 11),    # strong, unequal downscale
         (5, 4, 30, 20, 30, 20)]   # same size: a plain crop


def pixel(x, y, c):
    # Smooth gradients plus a few sharp steps: both exercise the filter.
    return (x * 6 + y * 5 + c * 40 + (60 if (x // 7 + y // 5) % 2 else 0)) % 256


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "resize_bilinear.txt"))
    a = ap.parse_args()
    img = Image.new("RGB", (W, H))
    img.putdata([tuple(pixel(x, y, c) for c in range(3)) for y in range(H) for x in range(W)])
    lines = []
    for x, y, w, h, ow, oh in CASES:
        out = img.crop((x, y, x + w, y + h)).resize((ow, oh), Image.BILINEAR)
        lines.append(f"{x} {y} {w} {h} {ow} {oh}")
        px = list(out.getdata())
        for r in range(oh):
            lines.append(" ".join(str(v) for p in px[r * ow:(r + 1) * ow] for v in p))
    with open(a.output, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {a.output}: {len(CASES)} crops of a {W}x{H} image (PIL {Image.__version__ if hasattr(Image, '__version__') else ''})")


if __name__ == "__main__":
    main()
