"""Datasets (Fashion-MNIST, CIFAR, STL-10, image folders, synthetic) and PU splits."""
