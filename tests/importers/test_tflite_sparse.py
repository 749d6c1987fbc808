"""densify (pyarena/importers/tflite_sparse.py) on the TFLite sparsity
layout, checked against the dense matrices a CSR description stands for."""
import numpy as np

from pyarena.importers.tflite_sparse import DENSE, SPARSE_CSR, densify


def test_a_csr_matrix_matches_its_dense_form():
    # rows 0..2, CSR columns: [[0, 5, 0, 0], [0, 0, 0, 0], [7, 0, 0, 9]]
    want = np.array([[0, 5, 0, 0], [0, 0, 0, 0], [7, 0, 0, 9]], np.float32)
    got = densify(np.array([5, 7, 9], np.float32), (3, 4), [0, 1], [],
                  [(DENSE, 3, None, None), (SPARSE_CSR, None, [0, 1, 1, 3], [1, 0, 3])])
    np.testing.assert_array_equal(got, want)


def test_a_csr_matrix_with_no_stored_value_is_all_zeros():
    got = densify(np.zeros(0, np.float32), (2, 3), [0, 1], [],
                  [(DENSE, 2, None, None), (SPARSE_CSR, None, [0, 0, 0], [])])
    np.testing.assert_array_equal(got, np.zeros((2, 3), np.float32))
