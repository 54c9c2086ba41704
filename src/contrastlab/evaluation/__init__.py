"""Evaluation of frozen representations: feature extraction, kNN monitor and linear probe.

Stable API (shared by the ``simclr`` and ``pu`` plugins)::

    from contrastlab.evaluation import extract_features, knn_accuracy, linear_probe
    feats = extract_features(encoder, images_uint8, preprocess, batch_size=512, device=dev)   # [N, d]
    acc = knn_accuracy(train_feats, train_labels, test_feats, test_labels, num_classes, k=200, temperature=0.1)
    result = linear_probe(train_feats, train_labels, test_feats, test_labels, num_classes)  # .top1, .top5
    cv = cross_validated_accuracy(graph_feats, graph_labels, readout="svm", folds=10)  # .mean, .std
"""

from contrastlab.evaluation.features import extract_features
from contrastlab.evaluation.knn import knn_accuracy, knn_predict
from contrastlab.evaluation.linear import LinearProbeResult, linear_probe
from contrastlab.evaluation.svm import CVResult, cross_validated_accuracy

__all__ = [
    "CVResult",
    "LinearProbeResult",
    "cross_validated_accuracy",
    "extract_features",
    "knn_accuracy",
    "knn_predict",
    "linear_probe",
]
