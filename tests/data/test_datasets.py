"""Dataset loaders on fake archives in the real formats, the registry, subsets and clear errors."""

from __future__ import annotations

import gzip
import http.client
from pathlib import Path

import numpy as np
import pytest
import torch
from fake_archives import write_cifar, write_fashion_mnist, write_idx, write_stl10

import contrastlab as cl
from contrastlab.data import dataset_names, load_dataset
from contrastlab.data import fashion_mnist as fm


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CONTRASTLAB_DATA", str(tmp_path / "cache"))


def test_registry_names_and_unknown_dataset():
    assert {"fashion_mnist", "cifar10", "cifar100", "stl10", "image_folder", "synthetic"} <= set(dataset_names())
    with pytest.raises(cl.ConfigError, match="cifar10"):
        load_dataset("cifar11")
    with pytest.raises(cl.ConfigError, match="split"):
        load_dataset("cifar10", split="validation")


def test_unknown_loader_option_is_a_config_error_naming_the_options():
    """A mistyped data.options key is a one-line error, not the loader's TypeError."""
    with pytest.raises(cl.ConfigError, match=r"no option 'bogus'; its options: channels, image_size, num_classes"):
        load_dataset("synthetic", bogus=1)
    assert len(load_dataset("synthetic", size=12, num_classes=3)) == 12


def test_fashion_mnist_fake_idx(tmp_path):
    written = write_fashion_mnist(tmp_path)
    for split in ("train", "test"):
        ds = load_dataset("fashion_mnist", root=tmp_path, split=split)
        x, y = written[split]
        assert ds.images.shape == (len(y), 1, 28, 28) and ds.images.dtype == torch.uint8
        assert torch.equal(ds.images[:, 0], torch.from_numpy(x))
        assert torch.equal(ds.labels, torch.from_numpy(y.astype(np.int64)))
        assert ds.num_classes == 10 and len(ds.class_names) == 10


def test_fashion_mnist_missing_says_how_to_get_it(tmp_path, monkeypatch):
    with pytest.raises(cl.DataMissingError, match="apt-get install -y dataset-fashion-mnist"):
        load_dataset("fashion_mnist", root=tmp_path)
    monkeypatch.setattr(fm, "DEBIAN_DIR", tmp_path / "nowhere")
    with pytest.raises(cl.DataMissingError, match=r"data\.root"):
        load_dataset("fashion_mnist", download=False)


def test_fashion_mnist_corrupt_file_is_named(tmp_path):
    write_fashion_mnist(tmp_path)
    bad = tmp_path / "train-images-idx3-ubyte.gz"
    bad.write_bytes(b"not gzip at all")
    with pytest.raises(cl.DataMissingError, match=r"train-images-idx3-ubyte\.gz"):
        load_dataset("fashion_mnist", root=tmp_path)
    write_idx(bad, np.zeros((5, 28, 28), np.uint8))
    with gzip.open(bad, "rb") as f:
        raw = f.read()
    with gzip.open(bad, "wb") as f:
        f.write(raw[:-10])  # truncated payload
    with pytest.raises(cl.DataMissingError, match="corrupt"):
        load_dataset("fashion_mnist", root=tmp_path)


@pytest.mark.skipif(not Path("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz").exists(),
                    reason="Debian package dataset-fashion-mnist not installed")
def test_fashion_mnist_debian_package_test_split():
    ds = load_dataset("fashion_mnist", split="test", download=False)
    assert ds.images.shape == (10000, 1, 28, 28)
    assert torch.equal(ds.labels.bincount(), torch.full((10,), 1000))


@pytest.mark.parametrize("hundred", [False, True])
def test_cifar_fake_archive_and_folder(tmp_path, hundred):
    written = write_cifar(tmp_path, hundred=hundred)
    name = "cifar100" if hundred else "cifar10"
    train = load_dataset(name, root=tmp_path, split="train")
    test = load_dataset(name, root=tmp_path, split="test")
    data0, labels0 = written["train"][0]
    assert train.images.shape == (6 * len(written["train"]), 3, 32, 32)
    assert torch.equal(train.images[:6], torch.from_numpy(data0.reshape(6, 3, 32, 32)))
    assert train.labels[:6].tolist() == labels0
    assert test.images.shape == (6, 3, 32, 32)
    assert train.num_classes == (100 if hundred else 10) and train.class_names[1] == "c1"
    # the extracted folder works the same
    import tarfile

    with tarfile.open(next(tmp_path.glob("*.tar.gz"))) as tar:
        tar.extractall(tmp_path / "extracted", filter="data")
    again = load_dataset(name, root=tmp_path / "extracted", split="train")
    assert torch.equal(again.images, train.images)


def test_cifar_missing_and_corrupt_archives_are_named(tmp_path):
    with pytest.raises(cl.DataMissingError, match=r"cifar-10-python\.tar\.gz"):
        load_dataset("cifar10", root=tmp_path)
    archive = tmp_path / "cifar-10-python.tar.gz"
    archive.write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(cl.DataMissingError, match=r"corrupt .*cifar-10-python\.tar\.gz"):
        load_dataset("cifar10", root=tmp_path)


def test_cifar_rejects_malicious_pickle(tmp_path):
    import io
    import pickle
    import tarfile

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    with tarfile.open(tmp_path / "cifar-10-python.tar.gz", "w:gz") as tar:
        for name in ["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5",
                     "batches.meta"]:
            raw = pickle.dumps({b"x": Evil()})
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    with pytest.raises(cl.DataMissingError, match="forbidden"):
        load_dataset("cifar10", root=tmp_path)


def test_stl10_fake_archive_orientation_and_splits(tmp_path):
    written = write_stl10(tmp_path)
    train = load_dataset("stl10", root=tmp_path, split="train")
    x, y = written["train"]
    assert train.images.shape == (4, 3, 96, 96)
    assert torch.equal(train.images, torch.from_numpy(x))        # column-major storage undone
    assert torch.equal(train.labels, torch.from_numpy(y.astype(np.int64) - 1))
    both = load_dataset("stl10", root=tmp_path, split="train+unlabeled")
    assert len(both) == 6 and both.labels[-2:].tolist() == [-1, -1]
    with pytest.raises(cl.DataMissingError, match="stl10_binary"):
        load_dataset("stl10", root=tmp_path / "empty")


def test_image_folder(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for cls in ("cats", "dogs"):
        (tmp_path / cls).mkdir()
        for i in range(3):
            Image.fromarray(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)).save(tmp_path / cls / f"{i}.png")
    (tmp_path / "dogs" / "notes.txt").write_text("ignored")
    ds = load_dataset("image_folder", root=tmp_path, image_size=8)
    assert ds.images.shape == (6, 3, 8, 8) and ds.class_names == ["cats", "dogs"]
    assert ds.labels.tolist() == [0, 0, 0, 1, 1, 1]
    gray = load_dataset("image_folder", root=tmp_path, channels=1)
    assert gray.images.shape == (6, 1, 12, 12)
    (tmp_path / "cats" / "broken.png").write_bytes(b"nope")
    with pytest.raises(cl.DataMissingError, match=r"broken\.png"):
        load_dataset("image_folder", root=tmp_path)
    with pytest.raises(cl.DataMissingError, match=r"data\.root"):
        load_dataset("image_folder")


def test_synthetic_is_deterministic_balanced_and_split_dependent():
    a = load_dataset("synthetic", size=40, num_classes=4)
    b = load_dataset("synthetic", size=40, num_classes=4)
    t = load_dataset("synthetic", split="test", size=40, num_classes=4)
    assert torch.equal(a.images, b.images) and not torch.equal(a.images, t.images)
    assert a.labels.bincount().tolist() == [10, 10, 10, 10]
    assert a.images.shape == (40, 3, 32, 32) and a.images.dtype == torch.uint8


def test_subset_is_seeded():
    ds = load_dataset("synthetic", size=64)
    s1, s2 = ds.subset(10, seed=3), ds.subset(10, seed=3)
    assert len(s1) == 10 and torch.equal(s1.images, s2.images)
    assert ds.subset(None) is ds and ds.subset(1000) is ds
    assert not torch.equal(s1.images, ds.subset(10, seed=4).images)
    idx = ds.subset_indices(10, seed=3)
    assert ds.subset_indices(None) is None and torch.equal(ds.images[idx], s1.images)


def test_image_folder_test_split_keeps_the_training_class_ids(tmp_path):
    # The ids came from each split's own sorted folders: a test split without "bird" numbered "cat" 0 and "dog" 1,
    # while training had bird 0, cat 1, dog 2, so every test label pointed at the wrong class, silently.
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, names in (("train", ("bird", "cat", "dog")), ("test", ("cat", "dog"))):
        for cls in names:
            (tmp_path / split / cls).mkdir(parents=True)
            Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(tmp_path / split / cls / "0.png")
    train = load_dataset("image_folder", root=tmp_path, split="train")
    test = load_dataset("image_folder", root=tmp_path, split="test")
    assert train.class_names == test.class_names == ["bird", "cat", "dog"] and test.num_classes == 3
    assert test.labels.tolist() == [1, 2]
    (tmp_path / "test" / "eel").mkdir()
    with pytest.raises(cl.ConfigError, match=r"eel.*no folder in"):
        load_dataset("image_folder", root=tmp_path, split="test")


class _Response:
    """A stand-in for ``urlopen``'s response whose second read stops with ``stop`` (after one chunk was written)."""

    def __init__(self, stop: BaseException) -> None:
        self.stop, self.reads = stop, 0

    def __enter__(self) -> _Response:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def read(self, n: int = -1) -> bytes:
        self.reads += 1
        if self.reads > 1:
            raise self.stop
        return b"x" * 100


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), http.client.IncompleteRead(b"x", 10)],
                         ids=["ctrl-c", "truncated"])
def test_an_interrupted_download_leaves_no_partial_file(tmp_path, monkeypatch, stop) -> None:
    """A Ctrl-C or a truncated response in the middle of a download used to leave its ``<name>…part`` file in the
    cache (a new one at every try); a truncated response also escaped as a traceback instead of one line."""
    from contrastlab.data import base

    monkeypatch.setattr(base.urllib.request, "urlopen", lambda url, timeout: _Response(stop))
    dest = tmp_path / "cache" / "archive.tar.gz"
    expected = KeyboardInterrupt if isinstance(stop, KeyboardInterrupt) else cl.DataMissingError
    with pytest.raises(expected):
        base.download("https://example.invalid/archive.tar.gz", dest)
    assert sorted(p.name for p in dest.parent.iterdir()) == []
