"""Write the shipped digits data set (tracec/data/digits.npz) as raw files
train.c reads: DIR/{train,test}_{x,y}.bin, each an int64 row count then
the rows (x: float32 [n, 64] scaled to 0..1, y: int64 [n] labels 0..9)."""
import os
import sys

import numpy as np

from tracec.data import digits_split


def write(path, a):
    with open(path, "wb") as f:
        f.write(np.int64(len(a)).tobytes())
        f.write(np.ascontiguousarray(a).tobytes())


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    d = digits_split(test_fraction=0.2, seed=0)
    for name, a in (("train_x", d.x_train.astype(np.float32)),
                    ("train_y", d.y_train.astype(np.int64)),
                    ("test_x", d.x_test.astype(np.float32)),
                    ("test_y", d.y_test.astype(np.int64))):
        write(os.path.join(out_dir, name + ".bin"), a)
    print(f"wrote {len(d.x_train)} training and {len(d.x_test)} test digits to {out_dir}/")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "data")
